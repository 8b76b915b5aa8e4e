"""The generated builder modules are up to date and expose exactly one method per OpSpec.

Checks the list of builders and each signature against the OpSpec's CallStyle:
positional-or-keyword names in order, then keyword-only names, then **unexpected;
leading required ports have no default; later parameters default to None (attrs to their
signature default).
"""
import inspect

import pytest

import cudnn
from cudnn import builder_codegen
from cudnn.builder_base import BuilderBase
from cudnn.ops.registry import all_specs


def test_generated_modules_match_the_opspecs():
    stale = builder_codegen.stale_modules()
    assert stale == [], (f"regenerate {stale}: PYTHONPATH=ops:ir python "
                         "ir/cudnn/builder_codegen.py --write")


def _generated_methods():
    methods = {}
    for cls in cudnn.pygraph.__mro__:
        if issubclass(cls, BuilderBase) and cls.__module__.startswith("cudnn.builders_"):
            for name, value in vars(cls).items():
                if inspect.isfunction(value):
                    methods[name] = value
    return methods


def test_builders_are_exactly_the_opspecs():
    assert set(_generated_methods()) == set(all_specs())


@pytest.mark.parametrize("spec", all_specs().values(), ids=lambda s: s.name)
def test_builder_signature_follows_the_call_style(spec):
    sig = inspect.signature(getattr(cudnn.pygraph, spec.name))
    params = list(sig.parameters.values())
    assert params[0].name == "self" and params[-1].kind is inspect.Parameter.VAR_KEYWORD
    body = params[1:-1]
    assert [p.name for p in body] == list(spec.call.positional + spec.call.keyword_only)
    kinds = [p.kind for p in body]
    assert kinds == ([inspect.Parameter.POSITIONAL_OR_KEYWORD] * len(spec.call.positional)
                     + [inspect.Parameter.KEYWORD_ONLY] * len(spec.call.keyword_only))
    required = {p.name for p in spec.ports if p.required} | \
        {a.name for a in spec.attrs if a.required}
    seen_default = False
    for p in body:
        has_default = p.default is not inspect.Parameter.empty
        seen_default |= has_default
        if not has_default:
            assert p.name in required and not seen_default, p.name
    doc = getattr(cudnn.pygraph, spec.name).__doc__
    assert spec.summary in doc


def test_unknown_keyword_names_op_argument_and_suggestion():
    g = cudnn.pygraph()
    x = g.tensor([2, 2])
    with pytest.raises(cudnn.OpTypeError) as err:
        g.relu(x, negative_slop=0.1)
    e = err.value
    assert (e.op, e.argument) == ("relu", "negative_slop")
    assert "did you mean 'negative_slope'" in str(e) and "negative_slop=float 0.1" in str(e)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
