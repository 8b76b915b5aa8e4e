"""The README's FLA drop-in example runs as written (on a CPU here: the reference engines,
and device "cpu" in place of "cuda"; the GPU engines run it on the GPU machine)."""
from __future__ import annotations

import os
import re

import pytest

from tests.torch_ops.reference_engine import reference_engines_installed

MARKER = "<!-- fla-example"


def readme_example() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "..", "README.md")]
    if "TEST_SRCDIR" in os.environ:  # Bazel runfiles
        candidates.append(os.path.join(os.environ["TEST_SRCDIR"], "_main", "README.md"))
    path = next(p for p in candidates if os.path.exists(p))
    text = open(path, encoding="utf-8").read()
    after = text[text.index(MARKER):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


def test_the_readme_example_runs():
    code = readme_example()
    assert 'device = "cuda"' in code
    with reference_engines_installed():
        exec(compile(code.replace('device = "cuda"', 'device = "cpu"'), "README.md", "exec"), {})


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
