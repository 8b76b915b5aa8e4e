"""sources.bzl, the source list Bazel and setup.py both read, names every C++ file on disk
under cc/ and bindings/ (cc/tests/ aside: each test is its own cc_test), and only those."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(ROOT)


def listed():
    path = os.path.join(REPO, "tools", "bzl", "starlark_values.py")
    spec = importlib.util.spec_from_file_location("starlark_values", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    values = module.read_values(os.path.join(ROOT, "sources.bzl"))
    return values["CORE_SRCS"] + values["CORE_HDRS"] + values["BINDING_SRCS"]


def on_disk():
    found = []
    for folder in ("cc", "bindings"):
        for dirpath, subdirs, files in os.walk(os.path.join(ROOT, folder)):
            subdirs[:] = [d for d in subdirs if d != "tests"]
            found += [os.path.relpath(os.path.join(dirpath, f), ROOT)
                      for f in files if f.endswith((".cc", ".h"))]
    return found


def test_every_cpp_file_is_listed_once_and_exists():
    names = listed()
    assert len(names) == len(set(names)), "a file is listed twice"
    assert sorted(names) == sorted(on_disk())


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
