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


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
