"""Text dump, Graphviz DOT export and inspect() show nodes, ports, shapes, dtypes, uids."""
import re

import pytest

import cudnn

D = cudnn.data_type


def _graph():
    g = cudnn.pygraph(name='my "graph"', io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    a = g.tensor([4, 8], name="a", uid=42)
    b = g.tensor([8, 3], name="b")
    c = g.matmul(a, b, name="mm")
    d = g.relu(c, negative_slope=0.25, name="act").set_output(True)
    return g, a, b, c, d


def test_dump_lists_nodes_ports_shapes_dtypes_uids():
    g, a, b, c, d = _graph()
    g.validate()
    text = g.dump()
    assert text.splitlines()[0] == ("pygraph 'my \"graph\"' [validated] io=HALF "
                                    "intermediate=FLOAT compute=HALF")
    assert "node mm: matmul (MATMUL, compute=HALF)" in text
    line = next(ln for ln in text.splitlines() if "<- A" in ln)
    assert re.search(r"<- A\s+a\s+uid=42\s+dim=\[4, 8\] stride=~\[8, 1\] HALF", line), line
    out_line = next(ln for ln in text.splitlines() if "-> C" in ln)
    assert f"uid={c.uid}" in out_line and "dim=~[4, 3]" in out_line and "FLOAT" in out_line
    assert "[virtual]" in out_line
    assert "params: negative_slope=0.25" in text
    assert text.splitlines()[-2] == f"  graph inputs: a(uid 42), b(uid {b.uid})"
    assert text.splitlines()[-1] == f"  graph outputs: act::OUT_0(uid {d.uid})"


def test_dot_export_has_every_node_tensor_and_edge():
    g, a, b, c, d = _graph()
    dot = g.to_dot()
    assert dot.startswith('digraph "my \\"graph\\"" {') and dot.endswith("}")
    for t in (a, b, c, d):
        assert re.search(rf"^  t{t.uid} \[shape=ellipse", dot, re.M), t.name
    assert re.search(rf'^  t{c.uid} .*style="dashed"', dot, re.M)  # virtual tensor
    edges = re.findall(r"^  (t\d+|n\d+) -> (t\d+|n\d+)", dot, re.M)
    assert edges == [(f"t{a.uid}", "n0"), (f"t{b.uid}", "n0"), ("n0", f"t{c.uid}"),
                     (f"t{c.uid}", "n1"), ("n1", f"t{d.uid}")]


def test_inspect_is_plain_data():
    g, a, b, c, d = _graph()
    info = g.inspect()
    assert info["state"] == "building" and info["context"]["io_data_type"] == "HALF"
    assert [n["name"] for n in info["nodes"]] == ["mm", "act"]
    assert info["nodes"][0]["inputs"] == {"A": 42, "B": b.uid}
    assert info["nodes"][1]["params"] == {"negative_slope": 0.25}
    rec = next(t for t in info["tensors"] if t["uid"] == c.uid)
    assert rec["dim"] == [4, 3] and not rec["dim_assigned"] and rec["is_virtual"]


def test_lookup_helpers():
    g, a, b, c, d = _graph()
    g.tensor([1], name="a")
    with pytest.raises(ValueError, match="ambiguous"):
        g.find_tensor("a")
    assert "a" not in g.tensors and g.tensors["b"] is b
    assert g.find_tensor(42) is a and g.find_tensor(10_000) is None
    assert g.get_node("mm").outputs["C"] is c and g.producer_of(c).name == "mm"
    assert g.get_outputs() == [d]


def test_node_helpers_for_lowering():
    g = cudnn.pygraph()
    parts = [g.tensor([2, 3]), g.tensor([2, 1])]
    g.concatenate(parts, axis=1, name="cat")
    cat = g.get_node("cat")
    assert cat.list_input("inputs") == parts and set(cat.inputs) == {"inputs_0", "inputs_1"}
    assert cat.params == {"axis": 1} and cat.param("in_place_index") is None
    q = g.tensor([1, 1, 4, 8])
    seed, offset = g.tensor([1], data_type=D.INT64), g.tensor([1], data_type=D.INT64)
    g.sdpa(q, q, q, dropout=(0.25, seed, offset), attn_scale=0.5, name="att")
    att = g.get_node("att")
    assert att.tuple_input("dropout") == (0.25, seed, offset)
    assert att.params == {"dropout": (0.25, None, None), "attn_scale": 0.5}
    assert att.inputs["dropout_1"] is seed and att.tuple_input("missing") is None
    assert att.param("use_causal_mask") is False  # the effective default from the OpSpec
    assert att.argument("attn_scale") == 0.5 and att.argument("q") is q
    assert att.argument("dropout") == (0.25, seed, offset)
    assert att.argument("bias") is None and att.argument("use_causal_mask") is None
    assert cat.argument("inputs") == parts and cat.argument("axis") == 1
    with pytest.raises(KeyError):
        att.argument("no_such_argument")
    assert att.param("diagonal_alignment") is cudnn.diagonal_alignment.TOP_LEFT


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
