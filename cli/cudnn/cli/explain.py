"""`python -m cudnn explain OP... [shape flags]`: the plan explainer for ops and shapes.

Builds one single-node graph per OP (gdn, kda, gdn2, their `_bwd` ops, or matmul) at the
shape the flags give and prints `graph.explain_plans()`: every candidate engine, claimed
(with its ranked knobs), declined (with the reason) or absent (why it cannot load here),
the cuDNN backend's answer and the ranked plan list. Nothing runs on a device.

    python -m cudnn explain gdn kda --seqs 8 --seq_len 4096 --heads 16 --head_dim 128
    python -m cudnn explain gdn_bwd --initial_state
    python -m cudnn explain matmul --batch 4 --m 256 --n 128 --k 512
"""
from __future__ import annotations

from collections.abc import Sequence

from absl import app

from cudnn.cli import shapes


def report(ops: Sequence[str]) -> str:
    sections = []
    for op in ops:
        graph = shapes.graph_from_flags(op)
        sections.append(f"== {op} ==\n{graph.explain_plans().render()}")
    return "\n\n".join(sections)


def main(argv: Sequence[str]) -> None:
    ops = list(argv[1:])
    if not ops:
        raise app.UsageError(f"name at least one op: {', '.join(shapes.OPS)}")
    unknown = [op for op in ops if op not in shapes.OPS]
    if unknown:
        raise app.UsageError(f"unknown op(s) {unknown}; known: {', '.join(shapes.OPS)}")
    print(report(ops))
