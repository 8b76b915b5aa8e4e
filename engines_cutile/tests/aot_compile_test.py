"""L0: the cuTile kernels compile for sm_90 through the real host orchestration.

The forward and backward passes run on CPU tensors with `ct.launch` replaced by an
ahead-of-time compile (aot_support.CompileOnlyLaunch), so every kernel variant a
configuration launches goes through cuTile, tileiras and ptxas.  Skips (with the reason)
where the cuTile compiler is not installed; runs on build machines that have it.
KDA with float16 io runs on fp32 copies of its inputs (kernels/input_staging.py: a
tileiras 13.4.92 crash); its cases check that path, and an xfail canary notices when a
compiler release no longer crashes on the native float16 kernel.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aot_support import CompileOnlyLaunch, missing_toolchain  # noqa: E402

torch = pytest.importorskip("torch")
_MISSING = missing_toolchain()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))

CONFIGS = [  # (seq lens, H, HV, K, V, with initial state, l2norm), each GDN and KDA
    ([1, 63, 65], 2, 2, 64, 64, True, False),
    ([100, 37], 2, 4, 64, 128, False, True),
    ([77], 4, 2, 128, 64, True, True),
]


FP16_KDA_CONFIGS = [
    ([200], 4, 4, 128, 128, False, False),
    ([100, 37], 2, 4, 64, 128, True, True),
]


def _run(family, backward, lens, H, HV, K, V, h0, l2, io=torch.bfloat16):
    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout
    kda = family == "kda"
    T, N, HO = sum(lens), len(lens), max(H, HV)
    f32 = torch.float32
    q, k = torch.zeros(T, H, K, dtype=io), torch.zeros(T, H, K, dtype=io)
    v = torch.zeros(T, HV, V, dtype=io)
    g = torch.zeros((T, HO, K) if kda else (T, HO))
    beta, cu = torch.zeros(T, HO), torch.zeros(N + 1, dtype=torch.int32)
    st = torch.zeros(N, HO, V, K) if h0 else None
    kw = dict(kda=kda, io_dtype=io, io_itemsize=2, int32_dtype=torch.int32, float32_dtype=f32)
    if backward:
        lay = bwd_layout(T, N, H, HV, K, V, **kw)
        s = {n: torch.zeros(r.shape, dtype=r.dtype) for n, r in lay.regions.items()}
        chunked_bwd(q, k, v, g, beta, cu, torch.zeros(T, HO, V, dtype=io), torch.zeros_like(q),
                    torch.zeros_like(k), torch.zeros_like(v), torch.zeros_like(g),
                    torch.zeros_like(beta), s, kda=kda, scale=0.1, initial_state=st,
                    d_final_state=torch.zeros(N, HO, V, K), d_initial_state=st,
                    use_l2norm=l2, stream=0)
    else:
        lay = fwd_layout(T, N, HO, K, V, h_q=H, hv=HV, **kw)
        s = {n: torch.zeros(r.shape, dtype=r.dtype) for n, r in lay.regions.items()}
        chunked_fwd(q, k, v, g, beta, cu, torch.zeros(T, HO, V, dtype=io), s, kda=kda,
                    scale=0.1, initial_state=st, final_state=st, use_l2norm=l2, stream=0)


def _check_launched(c, backward, kda_entry_points):
    """kda_entry_points: the backward used KDA's own dqkwg / bwd_wy entry points (other
    hints; 16-bit KDA inputs), else the default ones (GDN, fp32-staged KDA)."""
    launched = {name for name, _ in c.compiled}
    kda = "_kda" if kda_entry_points else ""
    expected = {"la_wy_fwd_kernel", "chunk_table_kernel"} | (
        {f"la_bwd_dqkwg{kda}_kernel", f"la_bwd_wy{kda}_kernel", "la_chunk_bwd_dhu_kernel"}
        if backward else {"la_chunk_fwd_kernel"})
    assert expected <= launched
    assert all(size > 0 for _, size in c.compiled)


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("config", CONFIGS, ids=["K64V64", "K64V128_vgroups", "K128V64_qgroups"])
def test_every_launched_kernel_compiles(family, backward, config):
    with CompileOnlyLaunch() as c:
        _run(family, backward, *config)
    _check_launched(c, backward, family == "kda")


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("config", FP16_KDA_CONFIGS, ids=["K128V128", "K64V128_vgroups_h0_l2"])
def test_kda_fp16_compiles_on_fp32_input_copies(backward, config):
    with CompileOnlyLaunch() as c:
        _run("kda", backward, *config, io=torch.float16)
    _check_launched(c, backward, False)
    inputs = {"la_wy_fwd_kernel": 3, "la_bwd_dqkwg_kernel": 2, "la_bwd_wy_kernel": 2}
    for name, dtypes in c.arg_dtypes:   # q, k(, v) reach the kernels as the fp32 copies
        assert set(dtypes[:inputs.get(name, 0)]) <= {"float32"}, (name, dtypes)
    out = "la_chunk_bwd_dhu_kernel" if backward else "la_chunk_fwd_kernel"
    dtypes = next(d for name, d in c.arg_dtypes if name == out)
    assert dtypes[5 if backward else 10] == ("float32" if backward else "float16")  # dO / o


def test_kda_fp16_tier2_wy_kernel_compiles_natively():
    """tileiras 13.4 crashed (signal) on this kernel before the session-5 tier-1/tier-2
    rework; it compiles now. The fp32 staging of float16 KDA inputs
    (kernels/input_staging.py) stays until the native float16 path has passed the GPU
    tests; then retire it."""
    from aot_support import FakeArray, compile_sm90
    from cudnn.linear_attention.cutile.kernels.wy_fwd import la_wy_fwd_kernel
    T, H, K, V, BT, rows = 200, 4, 128, 128, 64, 5
    h16 = "float16"
    args = (FakeArray((T, H, K), h16), FakeArray((T, H, K), h16), FakeArray((T, H, V), h16),
            FakeArray((T, H, K), "float32"), FakeArray((T, H), "float32"),
            FakeArray((2,), "int32"), FakeArray((rows, 2), "int32"),
            FakeArray((T, H, K), h16), FakeArray((T, H, V), h16), FakeArray((T, H, BT), h16),
            FakeArray((T, H, K), h16), FakeArray((T, H, K), h16),
            FakeArray((rows, H, K), "float32"), FakeArray((rows, H), "int32"),
            FakeArray((1, 1, 1), "int32"), FakeArray((1, 1), "int32"), FakeArray((1, 1), "int32"),
            0.1, 1, 1, BT, 6, K, V, K, True, False, 2, False, False, True)
    compile_sm90(la_wy_fwd_kernel, args)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
