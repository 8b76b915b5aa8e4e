"""Dispatches `python -m cudnn COMMAND [flags]` to the command's module.

Each command module defines its own absl flags at import time, so only the chosen one is
imported: `explain --help` lists explain's flags alone, and commands stay independent.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

COMMANDS = {
    "explain": "the plan explainer: every engine's answer for an op and shapes",
    "precompile": "fill the kernel caches ahead of time for ops and shapes",
    "bench": "time the public linear-attention ops (and flash-linear-attention if installed)",
    "env": "what is installed, which engines load, and why the others do not",
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m cudnn COMMAND [flags]   (COMMAND --help for its flags)", ""]
    lines += [f"  {name:<{width}}  {what}" for name, what in COMMANDS.items()]
    return "\n".join(lines)


def run(argv: Sequence[str] | None = None) -> None:
    """Run the command named by argv[1] (default: sys.argv); exits like a program."""
    argv = list(sys.argv if argv is None else argv)
    command = argv[1] if len(argv) > 1 else ""
    if command in ("", "-h", "--help", "help"):
        print(usage())
        raise SystemExit(0 if command else 2)
    if command not in COMMANDS:
        print(f"python -m cudnn: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        raise SystemExit(2)
    from absl import app

    module = importlib.import_module(f"cudnn.cli.{command}")
    app.run(module.main, argv=[f"python -m cudnn {command}", *argv[2:]])
