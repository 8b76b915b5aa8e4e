#!/usr/bin/env python3
"""Runs the README's GPU example as a user would and checks its printed output.

    python3 tools/gpu/readme_example.py [README.md]

Takes the first ```python block after "## Example (GPU)" and the ``` block after it (the
output the README shows), runs the code in a fresh interpreter from a temporary folder
with PYTHONPATH removed (so only the installed package can be imported), and compares
what it prints with the README. Exits non-zero on a difference.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def example(readme: str) -> tuple[str, str]:
    section = readme.split("## Example (GPU)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```python\n.*?```\s*```\n(.*?)```", section, re.S).group(1)
    return code, shown


def main(argv: list[str]) -> int:
    readme = Path(argv[0] if argv else Path(__file__).resolve().parents[2] / "README.md")
    code, shown = example(readme.read_text(encoding="utf-8"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env,
                                capture_output=True, text=True, timeout=600)
    print(result.stdout, end="")
    print(result.stderr, end="", file=sys.stderr)
    if result.returncode != 0:
        return result.returncode
    if result.stdout.strip() != shown.strip():
        print(f"README shows:\n{shown}printed:\n{result.stdout}", file=sys.stderr)
        return 1
    print("README example: output as shown")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
