"""The recurrent (decode) kernel cross-compiles for sm_90a (no GPU needed) over its feature
matrix, through the launcher's own entry (decode_compile.compile_decode, decode_fake_args), and
ptxas keeps its state in registers: no local memory (spills) for K = V = 128 at either
tile width (16, 32, and 64 under FROST_DECODE_BV64) (frost_cubin_report.resource_usage; needs cuobjdump, else that test skips), for
both channel maps; under contiguous_channels the state rows move in vector accesses
(frost_cubin_report.sass_instructions; needs nvdisasm).

The core (compile_tiers): every variant, the register check at the tiles the product
picks (16, 32), both maps, and the vector check; the register check at FROST_DECODE_BV64's
tile (64, off by default until measured: NOTES_decode.md) waits for FROST_FULL_MATRIX=1.
The register and the vector checks read one build per config (_cubin_of): the vector
check's fp32 builds are the register check's at BLOCK_V = 32.
"""
import dataclasses
import functools
import glob
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels.decode_compile import compile_decode, decode_fake_args  # noqa: E402
from cudnn.linear_attention.frost.kernels.decode_config import FrostDecodeConfig  # noqa: E402

from compile_tiers import tiered  # noqa: E402

BASE = dict(io_dtype="bfloat16", state_dtype="float32", H=16, HK=16, HV=16, K=128, V=128,
            use_l2norm=True, has_initial_state=True, has_final_state=True, has_pool=True)
GATES = {"gdn": dict(safe_gate=True, has_a_log=True, has_dt_bias=True, beta_sigmoid=True),
         "kda": dict(safe_gate=True, has_a_log=True, has_dt_bias=True, gate_lower_bound=-3.0),
         "gdn2": dict(beta_sigmoid=True, neg_eigval=True, linear_gate=True)}

MATRIX = {
    **{f"{fam}-serving": dict(family=fam, **GATES[fam]) for fam in GATES},
    "gdn-plain-rows": dict(family="gdn", has_pool=False, use_l2norm=False),
    "kda-ck1-fp32": dict(family="kda", checkpoint_every=1, checkpoint_dtype="float32"),
    "gdn2-ck4-bf16-state": dict(family="gdn2", state_dtype="bfloat16", checkpoint_every=4,
                                checkpoint_dtype="bfloat16"),
    "gdn-k64-gva-fp16": dict(family="gdn", io_dtype="float16", K=64, V=64, H=4, HK=4, HV=16,
                             block_v=16),
    "kda-stateless": dict(family="kda", state_dtype=None, has_initial_state=False,
                          has_final_state=False, has_pool=False),
    **{f"{fam}-serving-vec": dict(family=fam, contiguous_channels=True, **GATES[fam])
       for fam in GATES},
    "kda-ck1-fp32-vec": dict(family="kda", checkpoint_every=1, checkpoint_dtype="float32",
                             contiguous_channels=True),
    "gdn2-ck4-bf16-state-vec": dict(family="gdn2", state_dtype="bfloat16", checkpoint_every=4,
                                    checkpoint_dtype="bfloat16", contiguous_channels=True),
    "gdn-k64-gva-fp16-vec": dict(family="gdn", io_dtype="float16", K=64, V=64, H=4, HK=4, HV=16,
                                 block_v=16, contiguous_channels=True),
}


@pytest.mark.parametrize("name", list(MATRIX))
def test_decode_variant_compiles_for_sm90a(name):
    cfg = FrostDecodeConfig(**{**BASE, **MATRIX[name]})
    kernel = compile_decode(cfg, "sm_90a", ffi="cute")
    assert callable(kernel.fn) and kernel.ffi == "cute" and kernel.cfg == cfg


_CUBINS = tempfile.TemporaryDirectory(prefix="frost_decode_cubins_")  # removed at exit


@functools.cache
def _cubin_of(cfg):
    """cfg's kernel built for sm_90a; its cubin kept for the process, so a config two tests
    read is built once."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.decode_kernel import FrostDecode

    tmp = tempfile.mkdtemp(dir=_CUBINS.name)
    cute.compile(FrostDecode(cfg), *decode_fake_args(cfg),
                 options=f"--gpu-arch sm_90a --keep-cubin --dump-dir {tmp}")
    (cubin,) = glob.glob(os.path.join(tmp, "*.cubin"))
    return cubin


@pytest.mark.parametrize("contiguous", [False, True], ids=["strided", "contiguous"])
@pytest.mark.parametrize("block_v", tiered([16, 32, 64], [0, 1]))  # 64: FROST_DECODE_BV64's, the full matrix
@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_state_stays_in_registers(family, block_v, contiguous):
    from frost_cubin_report import resource_usage

    cfg = FrostDecodeConfig(**{**BASE, "family": family, "block_v": block_v, **GATES[family],
                               "contiguous_channels": contiguous})
    cubin = _cubin_of(cfg)
    try:
        usage = resource_usage(cubin)
    except FileNotFoundError as e:
        pytest.skip(str(e))
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    # 8 (or 4) rows x 4 channels of state per thread plus the token's operands; 16 rows at
    # BLOCK_V = 64 (3 CTAs per SM: up to 168 registers)
    assert usage["REG"] <= (128 if block_v < 64 else 168), usage


@pytest.mark.parametrize("state_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_contiguous_channels_move_state_rows_as_vectors(family, state_dtype):
    """Each of a warp's RPW state rows is one vector load and one vector store per lane of
    the lane's KPL = 4 channels (16 B fp32, 8 B bf16), and no state element moves alone:
    the only global accesses of the state's element width left are the scalar operands'."""
    import collections

    from frost_cubin_report import sass_instructions

    cfg = FrostDecodeConfig(**{**BASE, "family": family, **GATES[family],
                               "state_dtype": state_dtype, "contiguous_channels": True})
    plain = dataclasses.replace(cfg, contiguous_channels=False)
    counts = {}
    for c in (cfg, plain):
        try:
            instrs = sass_instructions(_cubin_of(c))
        except FileNotFoundError as e:
            pytest.skip(str(e))
        counts[c] = collections.Counter(i.split()[0] for i in instrs)
    rows = cfg.block_v // 4
    width = cfg.K // 32 * (4 if state_dtype == "float32" else 2) * 8
    vec, old = counts[cfg], counts[plain]
    assert vec[f"LDG.E.{width}"] >= rows and vec[f"STG.E.{width}"] >= rows, vec
    # the strided kernel's element-wise state stores are gone (fp32: STG.E; bf16: STG.E.U16
    # of the state, leaving the output's)
    elem = "STG.E" if state_dtype == "float32" else "STG.E.U16"
    assert vec[elem] <= old[elem] - rows * cfg.K // 32, (vec, old)


def test_store_round_trip(tmp_path, monkeypatch):
    """Cross-compiled as frost_precompile.py does, stored, then found by the launcher's
    lookup with the compiler made to raise and the store strict."""
    from cudnn.linear_attention.frost.kernels import decode, decode_compile, kernel_store

    cfg = FrostDecodeConfig(**{**BASE, "family": "gdn", "K": 64, "V": 64, "H": 1, "HK": 1,
                               "HV": 1, "block_v": 16})
    kernel = decode_compile.compile_decode(cfg, "sm_90a", host_target=kernel_store.GENERIC_X86_64)
    kernel_store.KernelStore(tmp_path).save(cfg, "sm_90a", kernel)
    assert "decode gdn H1/HK1/HV1 K64 V64 BV16" in kernel_store.describe(cfg)

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler was called")
    monkeypatch.setattr(decode, "compile_decode", no_compiler)
    monkeypatch.setenv(kernel_store.STORE_ENV, str(tmp_path))
    monkeypatch.setenv(kernel_store.STRICT_ENV, "1")
    monkeypatch.setattr(decode, "_cache", {})
    loaded = decode.compiled_decode(cfg, "sm_90a", "cute")
    assert loaded.ffi == "cute" and loaded.cfg == cfg
    other = dataclasses.replace(cfg, block_v=32)
    with pytest.raises(kernel_store.KernelStoreMiss, match="decode gdn"):
        decode.compiled_decode(other, "sm_90a", "cute")


def test_config_rejects_what_the_kernel_cannot_do():
    with pytest.raises(ValueError, match="block_v must be one of"):
        FrostDecodeConfig(**{**BASE, "family": "gdn", "V": 64, "block_v": 48})
    with pytest.raises(ValueError, match="checkpoint_dtype must be set exactly"):
        FrostDecodeConfig(**{**BASE, "family": "gdn", "checkpoint_every": 2})
    with pytest.raises(ValueError, match="safe_gate must be True"):
        FrostDecodeConfig(**{**BASE, "family": "kda", "has_a_log": True})
    with pytest.raises(ValueError, match="has_pool must be False"):
        FrostDecodeConfig(**{**BASE, "family": "kda", "state_dtype": None,
                             "has_initial_state": False, "has_final_state": False})
    assert dataclasses.replace(FrostDecodeConfig(**{**BASE, "family": "gdn"}), block_v=16)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
