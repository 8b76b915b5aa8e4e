"""PortDtypes: the shared kernel-native dtype tables engines gate on (port_dtypes.py)."""
from __future__ import annotations

import pytest
from la_graphs import la_graph

import cudnn
from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.linear_attention.common.port_dtypes import IO, PortDtypes

D = cudnn.data_type
RULES = PortDtypes((D.HALF, D.BFLOAT16), {"g": (D.FLOAT,), "O": IO,
                                          "initial_state": (D.FLOAT, D.BFLOAT16)})


def reason(dtypes=None, ports=()):
    g, _ = la_graph("gdn", ports=ports, dtypes=dtypes)
    return RULES.reason(linear_attention_facts(g), "eng")


def test_native_dtypes_and_unset_ports_pass():
    assert reason(ports=("initial_state",)) is None     # O is unset: always accepted


@pytest.mark.parametrize("dtypes, needle", [
    ({"k": D.HALF}, "eng: q, k and v must share one dtype"),
    ({"q": D.FLOAT, "k": D.FLOAT, "v": D.FLOAT}, "eng: q/k/v dtype must be HALF or BFLOAT16, "
                                                 "got FLOAT"),
    ({"g": D.HALF}, "eng: 'g' dtype must be FLOAT, got HALF"),
    ({"initial_state": D.HALF}, "eng: 'initial_state' dtype must be FLOAT or BFLOAT16, got HALF"),
])
def test_violations_name_engine_port_and_dtype(dtypes, needle):
    assert reason(dtypes, ports=("initial_state",)) == needle


def test_io_rule_follows_the_qkv_dtype():
    assert RULES.allowed("O", D.HALF) == (D.HALF,)
    assert RULES.allowed("O", None) == (D.HALF, D.BFLOAT16)
    assert RULES.allowed("g", D.HALF) == (D.FLOAT,)
    assert RULES.allowed("beta", D.HALF) is None


def test_table_is_read_only():
    with pytest.raises(TypeError):
        RULES.ports["beta"] = (D.FLOAT,)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
