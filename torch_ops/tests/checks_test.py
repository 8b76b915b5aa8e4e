"""Errors for bad calls: each names the op and the argument, what was expected and what was
given; the same checks run in the fake kernels (meta tensors here) and the real ones (CPU
tensors, where the check fires before any graph is built). Shape and flag rules are the
op spec's (cudnn.ops), reported in the op's names; dtype relations and devices are the
op's own. And the error when no engine can run a call: one line per engine of the
family, saying why."""
from __future__ import annotations

import pytest
import torch

import cudnn
from cudnn.engines import manifest
from la_inputs import BACKWARD_OPS, FUNCTIONS, make_args, state

DEVICES = ("meta", "cpu")


def _expect(exc_type, call, *, op, argument, expected, given):
    with pytest.raises(exc_type) as info:
        call()
    err = info.value
    assert isinstance(err, cudnn.OpArgumentError), err
    assert (err.op, err.argument) == (op, argument)
    assert expected in err.expected, err.expected
    assert given in err.given, err.given
    assert argument in str(err) and op in str(err)


@pytest.mark.parametrize("device", DEVICES)
def test_k_and_v_must_share_q_dtype(device):
    args = make_args("gdn", device=device)
    args["v"] = args["v"].to(torch.float16)
    _expect(TypeError, lambda: FUNCTIONS["gdn"](**args), op="cudnn::gated_delta_net_fwd",
            argument="v", expected="q's dtype (bfloat16)", given="float16")


# The registered ops keep the strict dtype contract; the public functions convert gate,
# index and state dtypes before calling them (tests/torch_ops/dtype_normalise_test.py).
@pytest.mark.parametrize("device", DEVICES)
def test_gdn_beta_is_float32_or_q_dtype(device):
    args = make_args("gdn", device=device)
    args["beta"] = args["beta"].to(torch.float16)
    op = torch.ops.cudnn.gated_delta_net_fwd
    _expect(TypeError, lambda: op(**args, scale=1.0), op="cudnn::gated_delta_net_fwd",
            argument="beta", expected="float32 or q's dtype (bfloat16 or float32)",
            given="float16")


@pytest.mark.parametrize("device", DEVICES)
def test_gdn2_beta_and_w_are_in_q_dtype(device):
    args = make_args("gdn2", device=device)
    args["w"] = args["w"].float()
    op = torch.ops.cudnn.gated_delta_net_v2_fwd
    _expect(TypeError, lambda: op(**args, scale=1.0), op="cudnn::gated_delta_net_v2_fwd",
            argument="w", expected="q's dtype", given="float32")


@pytest.mark.parametrize("device", DEVICES)
def test_gate_must_be_floating(device):
    args = make_args("kda", device=device)
    args["g"] = args["g"].to(torch.int32)
    _expect(TypeError, lambda: FUNCTIONS["kda"](**args), op="cudnn::kimi_delta_attention_fwd",
            argument="g", expected="one of BFLOAT16, DOUBLE, FLOAT, HALF", given="int32")


@pytest.mark.parametrize("device", DEVICES)
def test_cu_seqlens_must_be_int32_or_int64(device):
    args = make_args("gdn", device=device)
    args["cu_seqlens"] = args["cu_seqlens"].float()
    _expect(TypeError, lambda: FUNCTIONS["gdn"](**args), op="cudnn::gated_delta_net_fwd",
            argument="cu_seqlens", expected="one of INT32, INT64", given="float32")


@pytest.mark.parametrize("device", DEVICES)
def test_kda_gate_needs_a_channel_axis(device):
    args = make_args("kda", device=device)
    args["g"] = args["g"][..., 0]
    _expect(ValueError, lambda: FUNCTIONS["kda"](**args), op="cudnn::kimi_delta_attention_fwd",
            argument="g", expected="rank 3", given="dims [12, 2]")


@pytest.mark.parametrize("device", DEVICES)
def test_token_counts_must_agree(device):
    args = make_args("gdn", device=device)
    args["v"] = args["v"][:-1]
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args), op="cudnn::gated_delta_net_fwd",
            argument="v", expected="dims [12, '*', '*'] (T, the token count)",
            given="v.dim [11, 2, 8]")


@pytest.mark.parametrize("device", DEVICES)
def test_head_counts_must_group(device):
    args = make_args("gdn", device=device, H=2, HV=3)
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args), op="cudnn::gated_delta_net_fwd",
            argument="q", expected="a head count dividing HO = 3", given="(2 heads)")
    args = make_args("gdn", device=device, H=2, HK=1, HV=4)
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args), op="cudnn::gated_delta_net_fwd",
            argument="k", expected="HK equal to H = 2 or HV = 4", given="(1 heads)")


@pytest.mark.parametrize("device", DEVICES)
def test_initial_state_rows_follow_cu_seqlens(device):
    args = make_args("gdn", device=device, N=2)
    h0 = torch.cat([state(args), state(args)])
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args, initial_state=h0),
            op="cudnn::gated_delta_net_fwd", argument="initial_state",
            expected="dims [2, 2, 8, 16] ([N, HO, V, K])", given="dim [4, 2, 8, 16]")


def test_every_tensor_on_q_device():
    args = make_args("gdn", device="meta")
    args["beta"] = torch.rand(12, 2)
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args), op="cudnn::gated_delta_net_fwd",
            argument="beta", expected="on q's device (meta)", given="on cpu")


@pytest.mark.parametrize("flags, argument, expected", [
    (dict(gate_domain="exp"), "gate_domain", "one of ['log', 'linear']"),
    (dict(gate_domain="linear", safe_gate=True), "gate_domain",
     "gate_domain='linear' is incompatible with safe_gate=True"),
    (dict(allow_neg_eigval=True), "allow_neg_eigval",
     "allow_neg_eigval requires use_beta_sigmoid_in_kernel=True"),
    (dict(gate_lower_bound=-3.0), "gate_lower_bound", "gate_lower_bound requires safe_gate=True"),
    (dict(checkpoint_every_n_tokens=-1), "checkpoint_every_n_tokens", ">= 0"),
])
@pytest.mark.parametrize("device", DEVICES)
def test_flag_combinations(device, flags, argument, expected):
    args = make_args("kda", device=device)
    _expect(ValueError, lambda: FUNCTIONS["kda"](**args, **flags),
            op="cudnn::kimi_delta_attention_fwd", argument=argument, expected=expected,
            given="")


def test_a_log_needs_safe_gate():
    args = make_args("gdn")
    a_log = torch.zeros(2, device="meta")
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args, a_log=a_log),
            op="cudnn::gated_delta_net_fwd", argument="a_log",
            expected="a_log requires safe_gate=True", given="a tensor")


def test_checkpoint_dtype_is_float32_or_q_dtype():
    args = make_args("gdn")
    _expect(TypeError, lambda: FUNCTIONS["gdn"](**args, checkpoint_every_n_tokens=4,
                                                checkpoint_dtype=torch.float16),
            op="cudnn::gated_delta_net_fwd", argument="checkpoint_dtype",
            expected="None, float32 or q's dtype (bfloat16)", given="float16")


def test_d_final_state_must_match_the_state_dtype():
    args = make_args("gdn")
    dO = torch.empty(12, 2, 8, dtype=torch.bfloat16, device="meta")
    d_final = state(args, torch.bfloat16)
    op = getattr(torch.ops.cudnn, BACKWARD_OPS["gdn"]).default
    _expect(TypeError, lambda: op(dO, *args.values(), 0.25, d_final_state=d_final),
            op="cudnn::gated_delta_net_bwd", argument="d_final_state",
            expected="the state dtype", given="bfloat16")


@pytest.mark.parametrize("family", sorted(FUNCTIONS))
def test_public_functions_want_thd_q(family):
    args = make_args(family)
    args["q"] = args["q"][None]
    with pytest.raises(ValueError, match=r"expected THD inputs, q \[T, H, K\] \(rank 3\); "
                                         r"got dims \[1, 12, 2, 16\]"):
        FUNCTIONS[family](**args)


# State pools go to the serving op (cudnn::<family>_serve): its errors name it.
@pytest.mark.parametrize("device", DEVICES)
def test_overwrite_needs_the_final_state(device):
    args = make_args("gdn", device=device)
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args, initial_state=state(args),
                                                 overwrite_initial_state=True),
            op="cudnn::gated_delta_net_serve", argument="overwrite_initial_state",
            expected="requires initial_state and output_final_state=True", given="True")


@pytest.mark.parametrize("device", DEVICES)
def test_state_indices_are_int32_one_per_sequence(device):
    args = make_args("gdn", device=device)
    pool = torch.zeros(5, *state(args).shape[1:], device=device)
    n = args["cu_seqlens"].numel() - 1
    wide = torch.zeros(n, dtype=torch.int64, device=device)
    _expect(TypeError, lambda: FUNCTIONS["gdn"](**args, initial_state=pool, state_indices=wide),
            op="cudnn::gated_delta_net_serve", argument="state_indices", expected="INT32",
            given="int64")
    short = torch.zeros(n + 1, dtype=torch.int32, device=device)
    _expect(ValueError, lambda: FUNCTIONS["gdn"](**args, initial_state=pool, state_indices=short),
            op="cudnn::gated_delta_net_serve", argument="state_indices",
            expected=f"dims [{n}]", given=f"[{n + 1}]")


def test_state_pools_are_inference_only():
    args = make_args("gdn", device="cpu")
    args["q"].requires_grad_(True)
    with pytest.raises(ValueError, match="inference only"):
        FUNCTIONS["gdn"](**args, initial_state=state(args), output_final_state=True,
                         overwrite_initial_state=True)


@pytest.mark.parametrize("family", sorted(FUNCTIONS))
def test_no_engine_for_cpu_tensors_lists_every_engine(family):
    args = make_args(family, device="cpu")
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as info:
        FUNCTIONS[family](**args)
    message = str(info.value)
    assert message.startswith(f"cudnn::{FUNCTIONS[family].__name__}_fwd: no engine can run "
                              "this call (q [12, 2, 16] bfloat16"), message
    assert "on cpu" in message.splitlines()[0]
    fam = next(f for f in manifest.MANIFEST if f.name == family)
    for slot in fam.engine_slots:  # every engine of the family, with its reason
        line = next((ln for ln in message.splitlines() if ln.startswith(f"  - {slot.name} (")),
                    None)
        assert line is not None, message
        assert line.split(": ", 1)[1].strip(), line
    assert "  - cuDNN backend: declined:" in message


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
