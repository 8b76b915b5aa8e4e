"""OpSignature: schema text, binding what the dispatcher passes, and the registered
schemas and public signatures against the documented argument order (docs/LINEAR_ATTENTION.md §5)."""
from __future__ import annotations

import inspect

import pytest
import torch

from cudnn.linear_attention import ops
from cudnn.linear_attention.ops._signature import OpSignature

# The spec's argument orders, written out here (not derived from the tables under test).
GDN_FWD = ["q", "k", "v", "g", "beta", "cu_seqlens", "scale", "initial_state",
           "output_final_state", "use_qk_l2norm_in_kernel", "batch_invariant",
           "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "safe_gate", "gate_domain",
           "a_log", "dt_bias", "checkpoint_every_n_tokens", "checkpoint_dtype", "plan_name"]
KDA_FWD = GDN_FWD[:14] + ["gate_lower_bound"] + GDN_FWD[14:]
GDN2_FWD = (GDN_FWD[:5] + ["w"] + GDN_FWD[5:13] + ["beta_guard", "safe_gate", "gate_domain",
                                                    "gate_lower_bound"] + GDN_FWD[15:])
GDN_BWD = ["dO", "q", "k", "v", "g", "beta", "cu_seqlens", "scale", "initial_state",
           "d_final_state", "state_checkpoints", "checkpoint_every_n_tokens",
           "use_qk_l2norm_in_kernel", "batch_invariant", "use_beta_sigmoid_in_kernel",
           "allow_neg_eigval", "safe_gate", "gate_domain", "a_log", "dt_bias", "plan_name"]
PUBLIC_TAIL = ["overwrite_initial_state", "state_indices", "strict_cu_seqlens"]
# The ops (not the public functions) carry the forward's values for the training path:
# output_values last in the forward's schema (a fourth result), values after the
# checkpoints in the backward's.
OP_FWD_TAIL = ["output_values"]


def _with_values(bwd):
    at = bwd.index("state_checkpoints") + 1
    return bwd[:at] + ["values"] + bwd[at:]


def test_schema_text_renders_types_and_defaults():
    sig = OpSignature(["q", "scale", "initial_state", "gate_domain", "gate_lower_bound",
                       "checkpoint_dtype"], ["o"])
    assert sig.schema() == ('(Tensor q, float scale, Tensor? initial_state=None, '
                            'str gate_domain="log", float? gate_lower_bound=None, '
                            'ScalarType? checkpoint_dtype=None) -> (Tensor)')


def test_complete_fills_trailing_defaults_and_places_kwargs():
    sig = OpSignature(["q", "scale", "output_final_state", "gate_domain"], ["o"])
    assert sig.complete(("Q", 0.5)) == ("Q", 0.5, False, "log")
    assert sig.complete(("Q", 0.5), {"gate_domain": "linear"}) == ("Q", 0.5, False, "linear")
    with pytest.raises(TypeError, match="scale"):
        sig.complete(("Q",))


def test_positional_reads_a_mapping_in_schema_order():
    sig = OpSignature(["q", "scale", "output_final_state"], ["o"])
    assert sig.positional({"scale": 2.0, "q": "Q"}) == ("Q", 2.0, False)


def _argument_names(op_name):
    schema = getattr(torch.ops.cudnn, op_name).default._schema
    return [a.name for a in schema.arguments], len(schema.returns)


@pytest.mark.parametrize("op_name, names, returns", [
    ("gated_delta_net_fwd", GDN_FWD + OP_FWD_TAIL, 4),
    ("kimi_delta_attention_fwd", KDA_FWD + OP_FWD_TAIL, 4),
    ("gated_delta_net_v2_fwd", GDN2_FWD + OP_FWD_TAIL, 4),
    ("gated_delta_net_bwd", _with_values(GDN_BWD), 8),
    ("kimi_delta_attention_bwd",
     _with_values(GDN_BWD[:16] + ["safe_gate", "gate_lower_bound", "gate_domain"] + GDN_BWD[18:]), 8),
    ("gated_delta_net_v2_bwd",
     _with_values(GDN_BWD[:6] + ["w"] + GDN_BWD[6:16] + ["beta_guard", "safe_gate", "gate_domain",
                                                         "gate_lower_bound"] + GDN_BWD[18:]), 9),
])
def test_registered_schemas_follow_the_spec(op_name, names, returns):
    assert _argument_names(op_name) == (names, returns)


@pytest.mark.parametrize("fn, names", [
    (ops.gated_delta_net, GDN_FWD + PUBLIC_TAIL),
    (ops.kimi_delta_attention, KDA_FWD + PUBLIC_TAIL),
    (ops.gated_delta_net_v2, GDN2_FWD + PUBLIC_TAIL),
])
def test_public_functions_take_the_spec_arguments(fn, names):
    params = inspect.signature(fn).parameters
    assert list(params) == names
    assert params["scale"].default is None
    assert params["gate_domain"].default == "log"
    assert params["checkpoint_every_n_tokens"].default == 0


@pytest.mark.parametrize("module,fn", [("gdn", "gated_delta_net"), ("kda", "kimi_delta_attention"),
                                       ("gdn2", "gated_delta_net_v2")])
def test_public_function_hands_every_argument_to_the_op(monkeypatch, module, fn):
    """The public functions list their arguments by hand in schema order (dynamo cannot
    trace locals()): every parameter must reach OPS.forward at its schema position (the
    three outside the schema after the tuple), unchanged; output_values, which only the
    training path sets, goes as False."""
    import importlib

    mod = importlib.import_module(f"cudnn.linear_attention.ops.{module}")
    public = getattr(mod, fn)
    names = list(inspect.signature(public).parameters)
    sentinels = {name: object() for name in names}
    seen = {}

    def forward(args, overwrite_initial_state, state_indices, strict_cu_seqlens):
        assert len(args) == len(mod.OPS.forward_signature.names)
        seen.update(zip(mod.OPS.forward_signature.names, args))
        seen.update(overwrite_initial_state=overwrite_initial_state,
                    state_indices=state_indices, strict_cu_seqlens=strict_cu_seqlens)

    monkeypatch.setattr(mod.OPS, "forward", forward)
    public(**sentinels)
    assert seen.pop("output_values") is False
    assert sorted(seen) == sorted(names)
    assert all(seen[name] is sentinels[name] for name in names)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
