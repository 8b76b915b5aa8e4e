"""CPU tests of the cuTile engines' support gates (L0: planning decisions, no GPU).

Each case builds a real single-node graph with the IR and checks that the engine claims
it or declines with a message naming the property and its value.
"""
import os
import sys

import pytest

from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.linear_attention.cutile.engine_gates import decline_reason, runtime_reason
from cudnn.linear_attention.cutile.gdn_engine import GdnCuTileEngine
from cudnn.linear_attention.cutile.kda_engine import KdaCuTileEngine
from cudnn.ops.linear_attention_family import GDN_FAMILY, KDA_FAMILY

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cutile_graphs import DT, la_graph  # noqa: E402


FAMILIES = {"gdn": GDN_FAMILY, "kda": KDA_FAMILY}


def reason(graph, family="gdn"):
    return decline_reason(linear_attention_facts(graph), FAMILIES[family], f"{family}_cutile")


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("backward", [False, True])
def test_supported_graphs_are_claimed(family, backward):
    attrs = {} if backward else {"output_final_state": True}
    assert reason(la_graph(family, backward, with_h0=True, **attrs), family) is None


@pytest.mark.parametrize("attrs, needle", [
    (dict(use_beta_sigmoid=True), "use_beta_sigmoid=True"),
    (dict(safe_gate=True), "safe_gate=True"),
    (dict(gate_domain="linear"), "gate_domain='linear' is not implemented (only 'log')"),
    (dict(H=4, HV=12), "power-of-two"),
    (dict(K=512), "K = 512"),
    (dict(io=DT.FLOAT), "HALF or BFLOAT16, got FLOAT"),
    (dict(g_dtype=DT.BFLOAT16), "'g' dtype must be FLOAT, got BFLOAT16"),
    (dict(cu_dtype=DT.INT64), "'cu_seqlens' dtype must be INT32, got INT64"),
])
def test_declines_name_property_and_value(attrs, needle):
    msg = reason(la_graph(**attrs))
    assert msg is not None and needle in msg and msg.startswith("gdn_cutile:")


def test_family_mismatch_declines():
    assert "serves kda nodes, not gdn" in reason(la_graph("gdn"), "kda")


def test_engines_decline_through_check_support_without_gpu():
    g = la_graph("kda")
    engine = KdaCuTileEngine()
    if runtime_reason(engine.name) is None:
        pytest.skip("this machine can run cuTile kernels")
    with pytest.raises(NotImplementedError, match="kda_cutile"):
        engine.check_support(g)
    with pytest.raises(NotImplementedError, match="gdn_cutile: serves gdn nodes, not kda"):
        GdnCuTileEngine().check_support(g)


def test_planning_reports_cutile_decline_reason():
    g = la_graph("gdn")
    text = g.explain_plans() if hasattr(g, "explain_plans") else ""
    if runtime_reason("gdn_cutile") is None:
        pytest.skip("this machine can run cuTile kernels")
    assert "gdn_cutile" in str(text)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
