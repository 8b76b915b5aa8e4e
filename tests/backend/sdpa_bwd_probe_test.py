"""The SDPA_BWD probe (sdpa_bwd_probe.py) against the libcudnn installed here, no GPU: the
operation graphs it builds finalize exactly where the op table's runtime gate for
sdpa_backward says cuDNN can take them."""
import pytest

from cudnn.backend import loader

if not loader.is_available():
    pytest.skip("no libcudnn: " + loader.unavailable_reason(), allow_module_level=True)

from tests.backend import sdpa_bwd_probe as probe  # noqa: E402

CU = probe.Cudnn(probe.library_path())
GATE = next(s for s in loader.load().op_schemas()
            if s["method"] == "sdpa_backward")["min_runtime_version"]


@pytest.mark.parametrize("bshd", [True, False], ids=["BSHD", "BHSD"])
def test_the_forward_graph_finalizes(bshd):
    assert probe.probe(CU, backward=False, bshd=bshd) == {"op": "SUCCESS", "graph": "SUCCESS"}


@pytest.mark.parametrize("bshd", [True, False], ids=["BSHD", "BHSD"])
def test_the_backward_graph_finalizes_exactly_from_the_gated_version(bshd):
    result = probe.probe(CU, backward=True, bshd=bshd)
    assert result["op"] == "SUCCESS"
    if CU.version >= GATE:
        assert result["graph"] == "SUCCESS"
    else:
        assert str(result["graph"]).startswith("CUDNN_STATUS_BAD_PARAM"), result


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
