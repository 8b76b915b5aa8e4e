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
class SpanTable:
    """Where every sequence's spans are (device tensors, `span_table` builds them):
    span_cu [spans + 1] in cu_seqlens' dtype; sequence n's spans are first[n] .. last[n].
    A walk (`walk`) visits them one per step, step j of sequence n at span first[n] + j
    (forward) or last[n] - j (backward) while j < its span count: `forward` and
    `backward` hold each walk's (read, write) rows, [steps x N] flattened, read = `spans`
    (an identity row) and write = spans + n (a row of its own) once the sequence is past
    its spans. Built once per table: the walks are host-bound."""
    span_cu: torch.Tensor
    first: torch.Tensor
    last: torch.Tensor
    steps: int
    forward: tuple[torch.Tensor, torch.Tensor]
    backward: tuple[torch.Tensor, torch.Tensor]


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
    i = torch.arange(spans, device=cu.device)
    n = torch.searchsorted(ends, i, right=True)  # the sequence of span i; N past the real ones
    real = n < N
    n = n.clamp(max=N - 1)
    starts = torch.where(real, cu[n] + (i - first[n]) * span, cu[N])
    j = torch.arange(steps, device=cu.device)[:, None]
    live = j < count[None]
    own = spans + torch.arange(N, device=cu.device)[None]

    def rows(order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.where(live, order, spans).flatten(), torch.where(live, order, own).flatten()

    last = ends - 1
    return SpanTable(span_cu=torch.cat([starts, cu[N:]]).to(cu_seqlens.dtype), first=first,
                     last=last, steps=steps, forward=rows(first[None] + j),
                     backward=rows(last[None] - j))


def walk(start: torch.Tensor | None, shifts: torch.Tensor, maps: torch.Tensor,
         rows: tuple[torch.Tensor, torch.Tensor], steps: int, dtype: torch.dtype) -> torch.Tensor:
    """The value each span receives ([spans, HO, V, K], `dtype`) when every sequence walks
    its spans in the order `rows` gives (SpanTable.forward / backward: read and write rows,
    [steps x N]) from start[n] (zero when None), each span p taking v to
    v @ maps[p] + shifts[p] (maps [spans, HO, K, K], shifts [spans, HO, V, K]). A sequence
    past its spans reads the identity row appended here (it stands still) and writes a
    row of its own past the real ones, so no two writes meet and the result does not
    depend on scatter order."""
    read, write = rows
    spans, HO, V, K = shifts.shape
    N = read.numel() // steps
    acc = torch.float64 if shifts.dtype == torch.float64 else torch.float32
    eye = torch.eye(K, dtype=acc, device=shifts.device).expand(1, HO, K, K)
    maps = torch.cat([maps.to(acc), eye])          # row `spans`: the identity
    shifts = torch.cat([shifts.to(acc), shifts.new_zeros((1, HO, V, K), dtype=acc)])
    # every step's maps gathered once, each step one baddbmm into the next row: the loop is
    # host-bound (microseconds of GPU work per step), so it launches as little as it can
    pairs = N * HO
    step_maps = maps.index_select(0, read).view(steps, pairs, K, K)
    step_shifts = shifts.index_select(0, read).view(steps, pairs, V, K)
    values = shifts.new_empty((steps, pairs, V, K))
    if start is None:
        values[0].zero_()
    else:
        values[0] = start.reshape(pairs, V, K)
    for step in range(steps - 1):
        torch.baddbmm(step_shifts[step], values[step], step_maps[step], out=values[step + 1])
    received = shifts.new_zeros((spans + N, HO, V, K))  # the empty spans past the real ones: 0
    received.index_copy_(0, write, values.view(steps * N, HO, V, K))
    return received[:spans].to(dtype)


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
