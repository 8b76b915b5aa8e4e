"""SOURCES.md, the files on disk and build_local.sh list the same backend_cc sources."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ("cc", "bindings", "cudnn/backend")
SOURCE_SUFFIXES = (".h", ".cc", ".py")


def on_disk():
    found = set()
    for folder in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith(SOURCE_SUFFIXES):
                    found.add(os.path.relpath(os.path.join(dirpath, name), ROOT))
    return found


def listed_in_sources_md():
    with open(os.path.join(ROOT, "SOURCES.md")) as f:
        text = f.read()
    return set(re.findall(r"^- `([\w/]+\.(?:h|cc|py))`", text, flags=re.M))


def build_script_array(name):
    with open(os.path.join(ROOT, "build_local.sh")) as f:
        text = f.read()
    body = re.search(rf"^{name}=\((.*?)^\)", text, flags=re.M | re.S)
    assert body, f"build_local.sh has no {name} array"
    return set(body.group(1).split())


def test_sources_md_lists_every_source_file():
    listed = {p for p in listed_in_sources_md() if not p.startswith("tests/")}
    assert listed == on_disk()


def test_sources_md_lists_every_test_and_test_helper():
    tests = {os.path.join("tests", n) for n in os.listdir(os.path.join(ROOT, "tests"))
             if n.endswith(".py")}
    assert {p for p in listed_in_sources_md() if p.startswith("tests/")} == tests


def test_build_script_compiles_every_cc_file():
    compiled = build_script_array("SOURCES") | build_script_array("CC_TEST_SOURCES")
    expected = {p for p in on_disk() if p.endswith(".cc")}
    assert compiled == expected
    assert build_script_array("CORE_SOURCES") <= build_script_array("SOURCES")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
