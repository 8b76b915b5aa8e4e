"""The command line of the package: `python -m cudnn {explain,precompile,bench,env}`.

One module per command (explain.py, precompile.py, bench.py, env.py), each an absl-py
program whose flags are defined when the command is chosen; main.py dispatches. The
commands use the package's public API only (graphs, plans, the torch ops, the kernel
caches' documented entry points). docs/CLI.md describes each command.
"""
