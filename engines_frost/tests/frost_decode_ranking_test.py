"""Where the planner puts the recurrent (decode) engines, and what they decline, read from
the explainer with the runtime probes forced (as in frost_ranking_test.py).

Decode-shaped graphs (T <= 16 N, from the node's dims: no synchronisation) rank the
`*_frost_decode` engine first; beyond 16 tokens per sequence it ranks last. State pools,
overwrite and fused gates keep that order (the chunked FROST forward serves them through
its serving adapter; cuTile declines them by name); state checkpoints are the decode
engine's alone.
"""
import pytest
from frost_graphs import op_graph

from cudnn.linear_attention.cutile import la_engine as cutile_engine
from cudnn.linear_attention.frost import runtime_probe

torch = pytest.importorskip("torch")
FAMILIES = ("gdn", "kda", "gdn2")


@pytest.fixture(autouse=True)
def engines_on(monkeypatch):
    monkeypatch.setattr(cutile_engine, "runtime_reason", lambda engine: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: 90)
    monkeypatch.setattr(runtime_probe, "cutlass_dsl_version", lambda: ((4, 8, 1), "4.8.1"))


def explain(graph):
    ex = graph.explain_plans()
    return [p.name for p in ex.plans], {r.name: r for r in ex.engines}, ex


@pytest.mark.parametrize("op", FAMILIES)
@pytest.mark.parametrize("T, N", [(1, 1), (64, 64), (4 * 256, 256), (16 * 8, 8), (37, 5)])
def test_decode_shapes_rank_the_recurrent_engine_first(op, T, N):
    names, _, ex = explain(op_graph(op, T=T, N=N, with_h0=True, output_final_state=True,
                                    K=128, V=128)[0])
    assert names[0] == f"{op}_frost_decode", ex.render()
    assert f"*  0  {op}_frost_decode" in ex.render()


@pytest.mark.parametrize("op", FAMILIES)
@pytest.mark.parametrize("T, N", [(16 * 8 + 1, 8), (4096, 2)])
def test_prefill_shapes_rank_it_last(op, T, N):
    names, _, ex = explain(op_graph(op, T=T, N=N, with_h0=True, output_final_state=True)[0])
    assert len(names) >= 2 and names[-1] == f"{op}_frost_decode", ex.render()


SERVING = [
    ("state_indices", dict(extra_inputs=("state_indices",), dims={"initial_state": [50, 4, 64, 64]},
                           output_final_state=True, overwrite_initial_state=True)),
    ("a_log", dict(extra_inputs=("a_log", "dt_bias"), safe_gate=True)),  # safe_gate's input
    ("use_beta_sigmoid", dict(use_beta_sigmoid=True, allow_neg_eigval=True)),
    ("gate_domain", dict(gate_domain="linear")),
]


@pytest.mark.parametrize("op", FAMILIES)
@pytest.mark.parametrize("needle, attrs", SERVING, ids=[s[0] for s in SERVING])
def test_serving_features_rank_like_the_plain_forward(op, needle, attrs):
    """Pools and fused gates are served by the recurrent engine (first for T <= 16 N) and by
    the chunked one through its serving adapter (first beyond); cuTile declines them."""
    for T, first in ((8, f"{op}_frost_decode"), (2000, f"{op}_frost")):
        names, rows, ex = explain(op_graph(op, T=T, N=8, with_h0=True, **attrs)[0])
        assert names[0] == first and set(names) == {f"{op}_frost", f"{op}_frost_decode"}, \
            ex.render()
        cutile = rows.get(f"{op}_cutile")
        assert cutile is None or (cutile.status == "declined" and needle in cutile.reason), \
            cutile.reason


@pytest.mark.parametrize("op", FAMILIES)
@pytest.mark.parametrize("T", [8, 2000])  # decode-shaped and prefill-shaped (N = 8)
def test_checkpoints_are_claimed_by_the_decode_engine_alone(op, T):
    names, rows, ex = explain(op_graph(op, T=T, N=8, with_h0=True,
                                       checkpoint_every_n_tokens=1)[0])
    assert names == [f"{op}_frost_decode"], ex.render()
    assert "checkpoint_every_n_tokens=1" in rows[f"{op}_frost"].reason


@pytest.mark.parametrize("op, attrs, reason", [
    ("gdn_bwd", {}, "serves the forward node only"),
    ("gdn2", dict(beta_guard=True, use_qk_l2norm=True), "beta_guard=True is not implemented"),
    ("kda", dict(K=256, V=128), "head dim K = 256"),
])
def test_decode_engine_declines(op, attrs, reason):
    _, rows, ex = explain(op_graph(op, T=8, N=8, **attrs)[0])
    row = rows[f"{op.split('_')[0]}_frost_decode"]
    assert row.status == "declined" and reason in row.reason, ex.render()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
