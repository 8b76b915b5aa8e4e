"""The linear-attention cost model: H200 times scaled by T * HO * K * V; the FROST and
cuTile engines predict with it (the router ranks by it; no GPU needed to predict)."""
from __future__ import annotations

import pytest

from la_graphs import Geo, la_graph

from cudnn.linear_attention.common import cost_model as la_cost

REF = Geo(T=8 * 4096, N=8, HQ=16, HK=16, HV=16, K=128, V=128)


def test_the_reference_shape_predicts_the_measured_time():
    g, _ = la_graph("gdn", geo=REF)
    g.validate()
    assert la_cost.predict_seconds(g, la_cost.FROST_H200) == pytest.approx(
        la_cost.LAUNCH_S + 0.472e-3)
    assert la_cost.predict_seconds(g, la_cost.CUTILE_H200) == pytest.approx(
        la_cost.LAUNCH_S + 0.580e-3)


def test_time_scales_with_tokens_heads_and_head_dims():
    half = Geo(T=4 * 4096, N=8, HQ=16, HK=16, HV=16, K=128, V=64)
    g, _ = la_graph("kda_bwd", geo=half)
    g.validate()
    assert la_cost.predict_seconds(g, la_cost.CUTILE_H200) == pytest.approx(
        la_cost.LAUNCH_S + 6.736e-3 / 4)


def test_no_entry_no_prediction():
    g, _ = la_graph("gdn2_bwd", geo=REF)
    g.validate()
    assert la_cost.predict_seconds(g, la_cost.CUTILE_H200) is None  # no cuTile GDN-2
    assert la_cost.predict_seconds(g, la_cost.FROST_H200) is not None


@pytest.mark.parametrize("op", ["gdn", "kda", "gdn_bwd", "kda_bwd"])
def test_frost_is_predicted_faster_than_cutile_where_both_serve(op):
    g, _ = la_graph(op, geo=REF)
    g.validate()
    frost = la_cost.predict_seconds(g, la_cost.FROST_H200)
    cutile = la_cost.predict_seconds(g, la_cost.CUTILE_H200)
    assert frost < cutile


def test_the_engines_predict_with_their_tables():
    frost = pytest.importorskip("cudnn.linear_attention.frost.gdn_engine")
    cutile = pytest.importorskip("cudnn.linear_attention.cutile.gdn_engine")
    g, _ = la_graph("gdn", geo=REF)
    g.validate()
    assert frost.GdnFrostEngine().predict_time(g, None) == pytest.approx(
        la_cost.predict_seconds(g, la_cost.FROST_H200))
    assert cutile.GdnCuTileEngine().predict_time(g, None) == pytest.approx(
        la_cost.predict_seconds(g, la_cost.CUTILE_H200))
    assert "H200" in frost.GdnFrostEngine.predict_source


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
