"""No product layer can see //backend_cc: Bazel visibility admits only the root and tests.

The facts come from genquery targets in this package (see BUILD.bazel), evaluated by Bazel
at build time; this test reads their outputs. Loosening `//backend_cc:clients` (or any
backend target's visibility) to an engine, router, IR, ops or torch_ops package makes
`layers_seeing_backend` non-empty and this test fail.
"""

import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


def _labels(name):
    path = HERE / name
    if not path.exists():
        pytest.skip(f"{name} is a genquery output; run this test with Bazel")
    return [line for line in path.read_text().splitlines() if line.strip()]


def test_no_layer_sees_a_backend_target():
    seen = _labels("layers_seeing_backend")
    assert seen == [], "backend targets visible to product layers:\n" + "\n".join(seen)


def test_no_layer_depends_on_the_backend():
    path = _labels("layers_reaching_backend")
    assert path == [], "dependency path from a product layer to the backend:\n" + "\n".join(path)


def test_query_sees_what_the_umbrella_may_see():
    # Control: the same query shape finds the backend from the root package, so an empty
    # answer above is a real "no", not a query that matches nothing.
    assert "//backend_cc:backend_cc" in _labels("umbrella_seeing_backend")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
