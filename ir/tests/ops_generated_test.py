"""Per-op tests generated from the OpSpec table: every op is built with valid inputs.

For every case of ir_op_cases (at least one per OpSpec): the builder returns the declared
number of outputs, absent conditional outputs are None and not wired, present outputs
are virtual, named `<node>::<suffix>`, dimensioned and typed as the case states
(expected values are written in the case, not computed by the inference code);
validate() then fills unset dtypes from the graph context.
"""
import random

import pytest

import cudnn
from cudnn.ops.op_spec import ReturnStyle
from cudnn.ops.registry import all_specs
import ir_op_cases

D = cudnn.data_type
SEEDS = (0, 1, 2)


def test_every_opspec_has_a_case():
    assert ir_op_cases.covered_ops() == set(all_specs())


def _build(case, seed):
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    built = case.make(g, random.Random(seed))
    result = getattr(g, case.op)(*built.args, **built.kwargs)
    spec = all_specs()[case.op]
    outputs = [result] if spec.returns is ReturnStyle.SINGLE else result
    return g, spec, built, outputs


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", ir_op_cases.all_cases(), ids=lambda c: f"{c.op}-{c.id}")
def test_op_builds_with_expected_outputs(case, seed):
    g, spec, built, outputs = _build(case, seed)
    assert isinstance(outputs, list) and len(outputs) == len(spec.outputs)
    assert set(built.dims) == set(spec.output_names), "case must state every declared output"
    (node,) = [n for n in g.nodes if n.spec is spec]
    assert node.node_type is spec.node_type
    for out, tensor in zip(spec.outputs, outputs):
        expected = built.dims[out.name]
        if expected is None:
            assert tensor is None, f"{out.name} should be absent"
            assert out.name not in node.outputs
            continue
        assert tensor is node.outputs[out.name]
        assert tuple(tensor.dim) == expected, out.name
        assert tensor.is_virtual
        assert tensor.dim_assigned == (out.name in built.assigned), out.name
        assert tensor.name == f"{node.name}::{out.suffix or out.name}"
        assert tensor.data_type == built.dtypes[out.name], out.name
    # stored params: the attrs passed (and the scalar parts of ports: a float
    # attn_scale, dropout's probability), plus those whose signature default is a value
    given = {**dict(zip(spec.call.positional, built.args)), **built.kwargs}
    passed = {k for k, v in given.items() if v is not None and k in {a.name for a in spec.attrs}}
    passed |= {a.name for a in spec.attrs if a.signature_default is not None}
    scalar_ports = {k for k in node.params if k in {p.name for p in spec.ports}}
    assert set(node.params) - scalar_ports == passed


@pytest.mark.parametrize("case", ir_op_cases.all_cases(), ids=lambda c: f"{c.op}-{c.id}")
def test_validate_fills_output_dtypes(case):
    g, spec, built, outputs = _build(case, 0)
    g.validate()
    assert g.state.validated
    for out, tensor in zip(spec.outputs, outputs):
        if tensor is None:
            continue
        expected = built.dtypes[out.name] or (out.fill_dtype or D.FLOAT)
        assert tensor.data_type == expected, out.name
        assert tuple(tensor.stride) == _row_major(tensor.dim)


@pytest.mark.parametrize("case", ir_op_cases.all_cases(), ids=lambda c: f"{c.op}-{c.id}")
def test_positional_call_matches_keyword_call(case):
    g, spec, built, outputs = _build(case, 1)
    h = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    again = case.make(h, random.Random(1))
    bound = dict(zip(spec.call.positional, again.args))
    bound.update(again.kwargs)
    positional = [bound.get(n) for n in spec.call.positional]
    while positional and positional[-1] is None:
        positional.pop()
    keyword_only = {k: v for k, v in again.kwargs.items() if k in spec.call.keyword_only}
    result = getattr(h, case.op)(*positional, **keyword_only)
    result = [result] if spec.returns is ReturnStyle.SINGLE else result
    assert [None if t is None else tuple(t.dim) for t in result] == \
        [None if t is None else tuple(t.dim) for t in outputs]


def _row_major(dims):
    out, run = [], 1
    for n in reversed(dims):
        out.append(run)
        run *= max(n, 1)
    return tuple(reversed(out))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
