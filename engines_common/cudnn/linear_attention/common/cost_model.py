"""Predicted times of the linear-attention engines: measured H200 times scaled by the work.

An engine's `predict_time` (the optional method of the engine contract) looks up the time
its kernels took on the reference shape and scales it by the graph's work:

    t = LAUNCH + t_ref * work / work_ref,   work = T * HO * K * V

with the reference 8 x 4096 tokens, HO = 16 heads, K = V = 128, bf16 (the shape of
`bench/bench_linear_attention.py`) and LAUNCH a fixed 5 us. The per-token cost of the
chunked kernels is linear in T and HO and in K * V (the state products dominate), so the
ratio between two engines is what ranking needs; the absolute value is a rough guide.
Times are NVIDIA H200 measurements (SM 90) wherever the kernel runs: on another GPU the
ranking still follows the ratios, the figures do not claim that GPU's speed.

Sources (medians, back-to-back where the bench reports it):
- FROST forward (bench/NOTES.md, "FROST forward, as the bench sees it", bound launch):
  GDN 0.472 ms, KDA 0.599 ms; GDN-2 0.718 ms (kernels/NOTES_bwd.md, v1.1 table);
- FROST backward kernels (kernels/NOTES_bwd.md, v1.1 on the H200): GDN 2.944, KDA 3.770,
  GDN-2 4.204 ms;
- cuTile forward v3 (bench/NOTES.md same-process table): GDN 0.580, KDA 1.247 ms;
- cuTile backward (bench/NOTES.md, `stage_times.py --bwd`, "bwd all"): GDN 3.766 (v2),
  KDA 6.736 ms (KDA v3).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cudnn.linear_attention.common.facts import LinearAttentionFacts, linear_attention_facts

#: tokens x heads x K x V of the reference shape (8 x 4096 tokens, 16 heads, 128 x 128)
REFERENCE_WORK = 8 * 4096 * 16 * 128 * 128
#: a launch's fixed cost, seconds
LAUNCH_S = 5e-6

#: {(family prefix, backward): seconds on the reference shape}
FROST_H200: Mapping[tuple[str, bool], float] = {
    ("gdn", False): 0.472e-3, ("kda", False): 0.599e-3, ("gdn2", False): 0.718e-3,
    ("gdn", True): 2.944e-3, ("kda", True): 3.770e-3, ("gdn2", True): 4.204e-3,
}
CUTILE_H200: Mapping[tuple[str, bool], float] = {
    ("gdn", False): 0.580e-3, ("kda", False): 1.247e-3,
    ("gdn", True): 3.766e-3, ("kda", True): 6.736e-3,
}
SOURCE = "H200 times scaled by T*HO*K*V"


def work(facts: LinearAttentionFacts) -> int | None:
    """T * HO * K * V of a valid forward or backward record, else None."""
    dims = (facts.total_t, facts.h_o, facts.d_qk, facts.d_v)
    if any(d is None for d in dims):
        return None
    out = 1
    for d in dims:
        out *= int(d)
    return out


def predict_seconds(graph: Any, table: Mapping[tuple[str, bool], float]) -> float | None:
    """The scaled time of `graph` from `table`; None for graphs the table has no entry
    for (summaries, other families, an invalid record)."""
    facts = linear_attention_facts(graph)
    if not facts.valid or facts.is_summary or facts.family is None:
        return None
    ref = table.get((facts.family.prefix, facts.is_backward))
    amount = work(facts)
    if ref is None or amount is None:
        return None
    return LAUNCH_S + ref * amount / REFERENCE_WORK


__all__ = ["CUTILE_H200", "FROST_H200", "LAUNCH_S", "REFERENCE_WORK", "SOURCE",
           "predict_seconds", "work"]
