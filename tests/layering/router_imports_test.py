"""The router knows no op family and no framework: none of its sources imports the
linear-attention code, torch or the backend.

What only some engines need (the linear-attention facts record, torch buffers) lives in
engines_common/, above the router; the router reaches engines through the manifest's
module paths at run time. This reads the router's shipped sources (found through
`cudnn.__path__`), as engine_imports_test does for the engines.
"""

import os

import pytest

import cudnn
from tests.layering.import_scan import forbidden_imports

FORBIDDEN = ("cudnn.linear_attention", "cudnn.backend", "cudnn._pybind_module", "torch")


def router_sources():
    """(path, dotted package) of every .py file under the router's source root."""
    found = []
    for pkg_dir in cudnn.__path__:
        root = os.path.dirname(os.path.normpath(pkg_dir))
        if os.path.basename(root) != "router":
            continue
        for dirpath, _, filenames in os.walk(pkg_dir):
            package = os.path.relpath(dirpath, root).replace(os.sep, ".")
            found.extend((os.path.join(dirpath, f), package)
                         for f in filenames if f.endswith(".py"))
    return found


def test_the_router_root_is_scanned():
    assert any(path.endswith(os.path.join("engines", "router.py"))
               for path, _ in router_sources())


def test_no_router_source_imports_an_op_family_torch_or_the_backend():
    offenders = []
    for path, package in router_sources():
        with open(path, encoding="utf-8") as f:
            findings = forbidden_imports(f.read(), package, path, FORBIDDEN)
        offenders.extend(f"{path}:{x.line}: imports {x.module}" for x in findings)
    assert not offenders, "the router must stay op- and framework-agnostic:\n" + \
        "\n".join(offenders)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
