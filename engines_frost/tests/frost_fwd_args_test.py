"""frost_fwd's operand checks on CPU tensors: each bad operand raises ValueError naming it.

check_operands runs every check except the CUDA-device one, so the error paths are
reachable without a GPU; a well-formed CPU call gets past all of them and then stops at
"a CUDA tensor". Also: the module imports without torch or cutlass, and the config
rejects unsupported static combinations.
"""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention.frost.kernels.config import PIPELINE_MIN_TOKENS, FrostFwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.fwd import check_operands, frost_fwd, frost_workspace_size  # noqa: E402

T, N, H, K, V = 10, 2, 2, 64, 64


def _operands(family="kda", **over):
    bf = torch.bfloat16
    ops = dict(
        q=torch.zeros(T, H, K, dtype=bf), k=torch.zeros(T, H, K, dtype=bf), v=torch.zeros(T, H, V, dtype=bf),
        g=torch.zeros((T, H) if family == "gdn" else (T, H, K)),
        beta=torch.zeros(T, H, K, dtype=bf) if family == "gdn2" else torch.zeros(T, H),
        w=torch.zeros(T, H, V, dtype=bf) if family == "gdn2" else None,
        cu_seqlens=torch.tensor([0, 4, T], dtype=torch.int32), out=torch.zeros(T, H, V, dtype=bf),
        initial_state=torch.zeros(N, H, V, K), final_state=torch.zeros(N, H, V, K),
        use_l2norm=False, gate_per_channel=family != "gdn", beta_per_channel=family == "gdn2",
    )
    ops.update(over)
    return ops


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_well_formed_operands_pass_every_check(family):
    launch = check_operands(**_operands(family))
    assert launch.config.family == family and (launch.T, launch.N) == (T, N)
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        frost_fwd(**_operands(family), scale=0.125, stream=None)


BAD = [
    ("q", dict(q=torch.zeros(T, H, K)), "dtype bfloat16 or float16"),
    ("k", dict(k=torch.zeros(T, H, K, dtype=torch.float16)), "k must be of dtype bfloat16"),
    ("v", dict(v=torch.zeros(T, H, V + 1, dtype=torch.bfloat16)), "out must be of shape"),
    ("g", dict(g=torch.zeros(T, H)), "g must be of shape"),
    ("beta", dict(beta=torch.zeros(T, H, dtype=torch.bfloat16)), "beta must be of dtype float32"),
    ("w", dict(w=torch.zeros(T, H, V, dtype=torch.bfloat16)), "w must be None"),
    ("cu_seqlens", dict(cu_seqlens=torch.tensor([0, 4, T])), "cu_seqlens must be of dtype int32"),
    ("out", dict(out=torch.zeros(T, H, V, dtype=torch.bfloat16).transpose(1, 2).contiguous().transpose(1, 2)),
     "out must be contiguous"),
    ("initial_state", dict(initial_state=torch.zeros(N, H, K, V + 1)), "initial_state must be of shape"),
    ("final_state", dict(final_state=torch.zeros(N, H, V, K, dtype=torch.bfloat16)), "final_state must be of dtype float32"),
    ("state dtype", dict(initial_state=torch.zeros(N, H, V, K, dtype=torch.float16), final_state=None),
     "initial_state must be of dtype float32 or bfloat16"),
    ("head dim", dict(q=torch.zeros(T, H, 32, dtype=torch.bfloat16), k=torch.zeros(T, H, 32, dtype=torch.bfloat16),
                      g=torch.zeros(T, H, 32), initial_state=None, final_state=None), "K must be one of"),
    ("misaligned", dict(q=torch.zeros(T * H * K + 1, dtype=torch.bfloat16)[1:].view(T, H, K)), "q must be 16-byte aligned"),
]


@pytest.mark.parametrize("what,over,message", BAD, ids=[b[0] for b in BAD])
def test_bad_operand_names_itself(what, over, message):
    with pytest.raises(ValueError, match=message):
        check_operands(**_operands("kda", **over))


@pytest.mark.parametrize("family", ["kda", "gdn2"])
def test_gate_alignment_read_off_the_pointer(family):
    """Vector gates at a 16-byte aligned address compile as gate_align16 (pipelined copies them
    16 bytes at a time); at a 4-byte aligned one they still pass, as the 4-byte variant."""
    aligned = check_operands(**_operands(family)).config
    assert aligned.gate_align16 and aligned.family == family
    shifted = torch.zeros(T * H * K + 1)[1:].view(T, H, K)
    assert shifted.data_ptr() % 16 == 4
    launch = check_operands(**_operands(family, g=shifted))
    assert not launch.config.gate_align16
    assert not check_operands(**_operands("gdn")).config.gate_align16  # scalar gates: 4-byte copies anyway


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_state_checkpoints_select_the_checkpoint_kernel(family):
    """A state_checkpoints buffer ([T // 64 + N, HO, V, K] bf16) turns on write_checkpoints,
    and the kernel's argument list gains that operand last; without one nothing changes."""
    from cudnn.linear_attention.frost.kernels.config import abi_operands

    ckpt = torch.zeros(T // 64 + N, H, V, K, dtype=torch.bfloat16)
    launch = check_operands(**_operands(family), state_checkpoints=ckpt)
    assert launch.config.write_checkpoints and launch.tensors["state_checkpoints"] is ckpt
    assert abi_operands(launch.config)[-1] == "state_checkpoints"
    plain = check_operands(**_operands(family)).config
    assert not plain.write_checkpoints and "state_checkpoints" not in abi_operands(plain)


@pytest.mark.parametrize("over, message", [
    (dict(state_checkpoints=torch.zeros(T // 64 + N + 1, H, V, K, dtype=torch.bfloat16)),
     "frost_fwd: state_checkpoints must be of shape [2, 2, 64, 64], got [3, 2, 64, 64]"),
    (dict(state_checkpoints=torch.zeros(T // 64 + N, H, V, K)),
     "frost_fwd: state_checkpoints must be of dtype bfloat16, got torch.float32"),
])
def test_bad_state_checkpoints_name_themselves(over, message):
    with pytest.raises(ValueError) as e:
        check_operands(**_operands(), **over)
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_values_select_the_values_kernel(family):
    """A values buffer (U, [T, HO, V] bf16) next to the checkpoints turns on write_values:
    the argument list ends state_checkpoints, values; the checkpoint-only kernel is unchanged."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.config import abi_operands

    ckpt = torch.zeros(T // 64 + N, H, V, K, dtype=torch.bfloat16)
    u = torch.zeros(T, H, V, dtype=torch.bfloat16)
    launch = check_operands(**_operands(family), state_checkpoints=ckpt, values=u)
    assert launch.config.write_checkpoints and launch.config.write_values and launch.tensors["values"] is u
    assert abi_operands(launch.config)[-2:] == ("state_checkpoints", "values")
    only = check_operands(**_operands(family), state_checkpoints=ckpt).config
    assert not only.write_values and abi_operands(only)[-1] == "state_checkpoints"
    # each layer's values launcher for the bf16 call: the wgmma layer's on sm_90a (GDN's with the
    # decays as factors, fwd_wgmma_scaled.scaled_decay_class), the pipelined layer's elsewhere
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmmaCheckpoints, FrostFwdWgmmaValues

    assert issubclass(kernel_class(launch.config, "sm_90a"), FrostFwdWgmmaValues)
    assert issubclass(kernel_class(only, "sm_90a"), FrostFwdWgmmaCheckpoints)
    assert not issubclass(kernel_class(only, "sm_90a"), FrostFwdWgmmaValues)
    for cfg in (launch.config, only):
        assert getattr(kernel_class(cfg, "sm_90a"), "decay_scaled", False) == (family == "gdn")
    assert kernel_class(launch.config, "sm_100a").__name__ == "FrostFwdPipelinedValues"
    assert kernel_class(only, "sm_100a").__name__ == "FrostFwdPipelinedCheckpoints"


@pytest.mark.parametrize("over, message", [
    (dict(values=torch.zeros(T, H, V, dtype=torch.bfloat16)),
     "frost_fwd: values must be None unless state_checkpoints is given"),
    (dict(state_checkpoints=torch.zeros(T // 64 + N, H, V, K, dtype=torch.bfloat16),
          values=torch.zeros(T, H, V + 1, dtype=torch.bfloat16)),
     "frost_fwd: values must be of shape [10, 2, 64], got [10, 2, 65]"),
    (dict(state_checkpoints=torch.zeros(T // 64 + N, H, V, K, dtype=torch.bfloat16),
          values=torch.zeros(T, H, V)),
     "frost_fwd: values must be of dtype bfloat16, got torch.float32"),
])
def test_bad_values_name_themselves(over, message):
    with pytest.raises(ValueError) as e:
        check_operands(**_operands(), **over)
    assert str(e.value).startswith(message), str(e.value)


def _gdn_tokens(tokens, family="gdn", dim=128, io=torch.bfloat16):
    """Operands of `tokens` tokens in two sequences, the first of one token, at K = V = dim
    (GDN by default, at the four-role kernel's K = V = 128)."""
    cu = torch.tensor([0, min(1, tokens), tokens], dtype=torch.int32)
    rows = dict(q=torch.zeros(tokens, H, dim, dtype=io), k=torch.zeros(tokens, H, dim, dtype=io),
                v=torch.zeros(tokens, H, dim, dtype=io), out=torch.zeros(tokens, H, dim, dtype=io))
    gates = dict(g=torch.zeros((tokens, H) if family == "gdn" else (tokens, H, dim)),
                 beta=torch.zeros(tokens, H, dim, dtype=io) if family == "gdn2" else torch.zeros(tokens, H),
                 w=torch.zeros(tokens, H, dim, dtype=io) if family == "gdn2" else None)
    states = dict(initial_state=torch.zeros(N, H, dim, dim), final_state=torch.zeros(N, H, dim, dim))
    return _operands(family, **rows, **gates, **states, cu_seqlens=cu)


@pytest.mark.parametrize("tokens", [0, 1, PIPELINE_MIN_TOKENS * 2 - 1, PIPELINE_MIN_TOKENS * 2])
def test_pipelined_from_the_average_sequence_length(tokens):
    """The config asks for the four-role kernel once T >= PIPELINE_MIN_TOKENS * N, whatever
    the lengths' split."""
    assert check_operands(**_gdn_tokens(tokens)).config.pipelined == (tokens >= PIPELINE_MIN_TOKENS * N)


@pytest.mark.parametrize("family, dim, io", [("kda", 128, torch.bfloat16), ("gdn2", 128, torch.bfloat16),
                                             ("gdn", 64, torch.bfloat16), ("gdn", 128, torch.float16)],
                         ids=["kda", "gdn2", "gdn-K64", "gdn-fp16"])
def test_pipelined_only_where_it_selects_a_kernel(family, dim, io):
    """Where no kernel depends on the sequence length (compile_kernel.four_roles_possible:
    vector gates, K = V = 64, fp16 io) a long and a short batch get one config, so one
    compiled kernel, not two copies keyed apart by `pipelined`."""
    long, short = (check_operands(**_gdn_tokens(t, family, dim, io)).config
                   for t in (PIPELINE_MIN_TOKENS * 4, PIPELINE_MIN_TOKENS * 2 - 1))
    assert not long.pipelined and long == short


def test_batch_invariant_launches_never_pick_by_length():
    """A choice made from the batch's average length would make a sequence's result depend
    on the others in its batch: batch_invariant launches keep one kernel."""
    ops = _gdn_tokens(PIPELINE_MIN_TOKENS * 4)
    assert check_operands(**ops).config.pipelined
    assert not check_operands(**ops, batch_invariant=True).config.pipelined
    with pytest.raises(ValueError, match="batch_invariant must be True or False"):
        check_operands(**ops, batch_invariant=1)


def test_gdn2_requires_w():
    with pytest.raises(ValueError, match="w must be a"):
        check_operands(**_operands("gdn2", w=None))


def test_config_rejects_unsupported_combinations():
    base = dict(io_dtype="bfloat16", state_dtype=None, H=2, HK=2, HV=2, K=64, V=64, gate_per_channel=True,
                beta_per_channel=False, has_w=False, use_l2norm=False, has_initial_state=False,
                has_final_state=False)
    FrostFwdConfig(**base)
    for over, name in ((dict(HV=3), "H"), (dict(HK=1), "HK"), (dict(has_w=True), "has_w"),
                       (dict(state_dtype="float32"), "state_dtype"),
                       (dict(gate_per_channel=False, gate_align16=True), "gate_align16"),
                       (dict(write_values=True), "write_values")):
        with pytest.raises(ValueError, match=f"FrostFwdConfig: {name} must be"):
            FrostFwdConfig(**{**base, **over})
    assert frost_workspace_size(**base) == 0


def test_the_product_config_carries_no_experiment_switch():
    """One kernel family: no config field picks a kernel layer or an experiment knob, and
    no kernels/ module reads the environment variables that once did (their home is
    frost_fwd_experiments.py, the test tooling's)."""
    import dataclasses
    from pathlib import Path

    from cudnn.linear_attention.frost import kernels

    assert not {f.name for f in dataclasses.fields(FrostFwdConfig)} & {"algorithm", "ldmatrix", "skip_stages"}
    here = Path(kernels.__file__).parent
    for path in here.glob("*.py"):
        text = path.read_text()
        assert "FROST_FWD_ALGORITHM" not in text and "FROST_FWD_LDMATRIX" not in text, path.name
    assert not list(here.glob("*oracle*.py"))  # the SIMT oracle is test-only (frost_fwd_oracle.py)
    assert not list(here.glob("fwd_v[0-9]*.py"))  # the forward's layers are named by what they are


def test_import_needs_neither_torch_nor_cutlass():
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, *a):\n"
            "        if name.split('.')[0] in ('torch', 'cutlass', 'cuda'):\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import cudnn.linear_attention.frost.kernels.fwd as f\n"
            "print(f.frost_workspace_size())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.strip() == "0", res.stderr


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
