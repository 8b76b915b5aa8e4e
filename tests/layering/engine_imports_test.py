"""No Python engine source imports the cuDNN backend.

Bazel visibility stops build edges from //engines_* to //backend_cc, but an installed wheel
puts every module on one path, where an import would quietly work. This reads the engine
sources that ship (the engine libraries' files, found through `cudnn.__path__`).
"""

import os

import pytest

import cudnn
from tests.layering.import_scan import forbidden_imports

ENGINE_ROOTS = ("engines_common", "engines_cutile", "engines_frost")


def engine_sources():
    """(root, path, dotted package) of every .py file under the engine source roots."""
    found = []
    for pkg_dir in cudnn.__path__:
        root = os.path.basename(os.path.dirname(os.path.normpath(pkg_dir)))
        if root not in ENGINE_ROOTS:
            continue
        for dirpath, _, filenames in os.walk(pkg_dir):
            rel = os.path.relpath(dirpath, os.path.dirname(os.path.normpath(pkg_dir)))
            package = rel.replace(os.sep, ".")
            found.extend((root, os.path.join(dirpath, f), package)
                         for f in filenames if f.endswith(".py"))
    return found


def test_every_engine_root_is_scanned():
    roots = {root for root, _, _ in engine_sources()}
    assert roots == set(ENGINE_ROOTS), f"engine roots on the path: {sorted(roots)}"


def test_no_engine_source_imports_the_backend():
    offenders = []
    for _, path, package in engine_sources():
        with open(path, encoding="utf-8") as f:
            findings = forbidden_imports(f.read(), package, path)
        offenders.extend(f"{path}:{x.line}: imports {x.module}" for x in findings)
    assert not offenders, "engines must not import the backend:\n" + "\n".join(offenders)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
