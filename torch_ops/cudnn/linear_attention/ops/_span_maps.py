"""The span table and the composition of span maps, on the device (_span_split.py uses them).

A span maps the state entering it to the state leaving it affinely, in the V-major layout
([V, K] per head): X_out = X_in @ M + D (M the span's transition [K, K], D its final state
from zero, ops/summary.py). The gradient goes the other way through the same map:
dX_in = dX_out @ M^T + dX_in(o) (the part of dX_in that the span's own outputs give,
the backward summary). Both are a walk along each sequence's spans with
v -> v @ maps[p] + shifts[p]; `walk` does it for every sequence at once, one span per
step, and returns the value each span receives.
"""
from __future__ import annotations

import dataclasses

import torch


def span_count_bound(T: int, N: int, span: int) -> int:
    """Spans of the table for T tokens in N sequences: sum of ceil(len / span), at least
    one per sequence, is at most N + T // span."""
    return N + T // span


@dataclasses.dataclass(frozen=True)
class WalkRows:
    """The rows one walk (`walk`) reads and writes, [steps x N] step-major: `read` the span
    whose map step j of sequence n applies (None when that is span j of the only
    sequence: the walk then reads the maps as they lie, no gather), `received` for every
    span of the table the row of the walk's values it receives (1 + j N + n for step j
    of sequence n, 0, a zero row, for the empty spans past the real ones)."""
    read: torch.Tensor | None
    received: torch.Tensor


@dataclasses.dataclass(frozen=True)
class SpanTable:
    """Where every sequence's spans are (device tensors, `span_table` builds them):
    span_cu [spans + 1] in cu_seqlens' dtype; sequence n's spans are first[n] .. last[n].
    A walk (`walk`) visits them one per step, step j of sequence n at span first[n] + j
    (forward) or last[n] - j (backward) while j < its span count: `forward` and
    `backward` are each walk's rows (WalkRows). Past its spans a sequence keeps walking
    (each step reads some real span's map) but nothing reads what it computes there: the
    values the spans receive are gathered from the live steps only. Built once per
    table: the walks are host-bound, so everything they index by is precomputed."""
    span_cu: torch.Tensor
    first: torch.Tensor
    last: torch.Tensor
    steps: int
    forward: WalkRows
    backward: WalkRows


def span_table(cu_seqlens: torch.Tensor, total: int, span: int, spans: int,
               steps: int) -> SpanTable:
    """The table of `spans` spans (span_count_bound) of `span` tokens each but each
    sequence's last over `total` tokens; a sequence has at least one span (an empty one when
    it is empty), the rows past the real spans are empty spans at its end. `steps` bounds one
    sequence's spans.

    The table is read as the engines read a well-formed one; a malformed one (entries
    outside [0, total], decreasing) is first clamped into [0, total] and made
    non-decreasing (its running maximum), so no sequence is longer than `total` and the
    spans stay within `spans` and `steps`: a sequence past the end would otherwise own
    spans the walk never reaches, its entering state never written."""
    cu = torch.cummax(cu_seqlens.long().clamp(0, total), 0).values
    N = cu.numel() - 1
    lengths = cu[1:] - cu[:-1]
    count = torch.clamp((lengths + span - 1) // span, min=1)
    ends = torch.cumsum(count, 0)
    first = ends - count
    last = ends - 1
    i = torch.arange(spans, device=cu.device)
    n = torch.searchsorted(ends, i, right=True)  # the sequence of span i; N past the real ones
    real = n < N
    n = n.clamp(max=N - 1)
    starts = torch.where(real, cu[n] + (i - first[n]) * span, cu[N])
    j = torch.arange(steps, device=cu.device)[:, None]

    def rows(order: torch.Tensor, step_of_span: torch.Tensor, static: bool) -> WalkRows:
        read = None if static else order.clamp(0, spans - 1).flatten()
        return WalkRows(read, torch.where(real, 1 + step_of_span * N + n, 0))

    # one sequence walks its spans forward in table order: step j reads span j as it lies
    static = N == 1 and steps <= spans
    return SpanTable(span_cu=torch.cat([starts, cu[N:]]).to(cu_seqlens.dtype), first=first,
                     last=last, steps=steps,
                     forward=rows(first[None] + j, i - first[n], static),
                     backward=rows(last[None] - j, last[n] - i, False))


def walk(start: torch.Tensor | None, shifts: torch.Tensor, maps: torch.Tensor,
         rows: WalkRows, steps: int, dtype: torch.dtype) -> torch.Tensor:
    """The value each span receives ([spans, HO, V, K], `dtype`) when every sequence walks
    its spans in the order `rows` gives (SpanTable.forward / backward) from start[n]
    (zero when None), each span p taking v to v @ maps[p] + shifts[p] (maps
    [spans, HO, K, K], shifts [spans, HO, V, K]). Each step is one baddbmm into the next
    step's row of one buffer; the spans' values are one gather from it (every span's row
    is its own, so the result does not depend on any scatter order)."""
    spans, HO, V, K = shifts.shape
    acc = torch.float64 if shifts.dtype == torch.float64 else torch.float32
    maps, shifts = maps.to(acc), shifts.to(acc)  # no copy when they are already
    if rows.read is None:  # span j of the one sequence at step j: the maps as they lie
        N = 1
        step_maps, step_shifts = maps[:steps], shifts[:steps]
    else:
        N = rows.read.numel() // steps
        step_maps = maps.index_select(0, rows.read).view(steps, N * HO, K, K)
        step_shifts = shifts.index_select(0, rows.read).view(steps, N * HO, V, K)
    pairs = N * HO
    # row 0 zero (what the empty spans receive), then the values of steps 0 .. steps - 1
    flat = shifts.new_empty((1 + steps * N, HO, V, K))
    if start is None:
        flat[:1 + N].zero_()
    else:
        flat[0].zero_()
        flat[1:1 + N].copy_(start)
    values = flat[1:].view(steps, pairs, V, K).unbind(0)
    step_maps, step_shifts = step_maps.reshape(steps, pairs, K, K).unbind(0), \
        step_shifts.reshape(steps, pairs, V, K).unbind(0)
    # the loop is host-bound (microseconds of GPU work per step): one launch per step
    for step in range(steps - 1):
        torch.baddbmm(step_shifts[step], values[step], step_maps[step], out=values[step + 1])
    return flat.index_select(0, rows.received).to(dtype)


def entering_states(initial: torch.Tensor | None, final0: torch.Tensor, transition: torch.Tensor,
                    table: SpanTable, dtype: torch.dtype) -> torch.Tensor:
    """The state entering each span: the walk forward along each sequence from its initial
    state through X -> X @ transition + final0."""
    return walk(initial, final0, transition, table.forward, table.steps, dtype)


def leaving_gradients(d_final: torch.Tensor | None, d_entering: torch.Tensor,
                      transition: torch.Tensor, table: SpanTable, dtype: torch.dtype) -> torch.Tensor:
    """The gradient of the state leaving each span: the walk backward along each sequence
    from its d_final_state (zero when None) through dX -> dX @ transition^T + d_entering
    (d_entering: each span's own outputs' gradient of its entering state)."""
    return walk(d_final, d_entering, transition.transpose(-1, -2), table.backward, table.steps, dtype)
