"""unsupported_feature_reason: the feature declines shared by linear-attention engines."""
from __future__ import annotations

import pytest
from la_graphs import la_graph

from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.linear_attention.common.feature_gates import unsupported_feature_reason


def reason(op="kda", ports=(), **attrs):
    g, _ = la_graph(op, ports=ports, **attrs)
    return unsupported_feature_reason(linear_attention_facts(g), "eng",
                                      flags=("safe_gate", "use_beta_sigmoid"),
                                      inputs=("a_log", "state_indices"), not_done="is out")


@pytest.mark.parametrize("ports, attrs, expected", [
    ((), {}, None),
    (("a_log",), dict(safe_gate=True), "eng: input 'a_log' is out"),   # input named first
    ((), dict(safe_gate=True), "eng: safe_gate=True is out"),
    ((), dict(use_beta_sigmoid=True), "eng: use_beta_sigmoid=True is out"),
    ((), dict(use_qk_l2norm=True), None),                             # not in `flags`
    ((), dict(gate_domain="linear"), "eng: gate_domain='linear' is out (only 'log')"),
    ((), dict(checkpoint_every_n_tokens=16),
     "eng: state checkpoints (checkpoint_every_n_tokens=16) is out"),
])
def test_first_unsupported_feature_is_named(ports, attrs, expected):
    assert reason(ports=ports, **attrs) == expected


def test_an_engine_that_gates_checkpoints_itself_is_not_declined_here():
    g, _ = la_graph("kda", checkpoint_every_n_tokens=16)
    f = linear_attention_facts(g)
    assert unsupported_feature_reason(f, "eng", flags=(), inputs=(), checkpoints=True) is None
    g, _ = la_graph("kda", checkpoint_every_n_tokens=16, safe_gate=True)
    assert unsupported_feature_reason(linear_attention_facts(g), "eng", flags=("safe_gate",), inputs=(),
                                      checkpoints=True) == "eng: safe_gate=True is not implemented"


def test_the_forward_values_are_declined_unless_the_engine_serves_them():
    g, _ = la_graph("kda", checkpoint_every_n_tokens=16, output_values=True)
    f = linear_attention_facts(g)
    assert f.flags.output_values
    assert unsupported_feature_reason(f, "eng", flags=(), inputs=(), checkpoints=True) == \
        "eng: output_values=True (the forward's u_t per token) is not implemented"
    assert unsupported_feature_reason(f, "eng", flags=(), inputs=(), checkpoints=True, values=True) is None


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
