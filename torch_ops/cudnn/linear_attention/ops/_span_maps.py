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

import torch


def span_count_bound(T: int, N: int, span: int) -> int:
    """Spans of the table for T tokens in N sequences: sum of ceil(len / span), at least
    one per sequence, is at most N + T // span."""
    return N + T // span


def span_table(cu_seqlens: torch.Tensor, span: int, spans: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(span_cu [spans + 1] in cu_seqlens' dtype, first [N], count [N]) on the device:
    sequence n's spans are first[n] .. first[n] + count[n] - 1, of `span` tokens each but
    the last; the rows past the real spans are empty spans at T."""
    cu = cu_seqlens.long()
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
    return torch.cat([starts, cu[N:]]).to(cu_seqlens.dtype), first, count


def walk(start: torch.Tensor | None, shifts: torch.Tensor, maps: torch.Tensor,
         order: torch.Tensor, live: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The value each span receives ([spans, HO, V, K], `dtype`) when every sequence n
    walks its spans order[0, n], order[1, n], ... (while live) from start[n] (zero when
    None), each span p taking v to v @ maps[p] + shifts[p] (maps [spans, HO, K, K],
    shifts [spans, HO, V, K]). A sequence past its last span reads an identity map and a
    zero shift (it stands still) and writes a row of its own past the real ones, so no
    two writes of a step meet and the result does not depend on scatter order."""
    spans, HO, V, K = shifts.shape
    steps, N = order.shape
    acc = torch.float64 if shifts.dtype == torch.float64 else torch.float32
    eye = torch.eye(K, dtype=acc, device=shifts.device).expand(1, HO, K, K)
    maps = torch.cat([maps.to(acc), eye])          # row `spans`: the identity
    shifts = torch.cat([shifts.to(acc), shifts.new_zeros((1, HO, V, K), dtype=acc)])
    received = shifts.new_zeros((spans + N, HO, V, K))
    write = torch.where(live, order, spans + torch.arange(N, device=order.device)[None])
    read = torch.where(live, order, spans).flatten()
    # every step's maps gathered once, each step one baddbmm into the next row: the loop is
    # host-bound (microseconds of GPU work per step), so it launches as little as it can
    pairs = N * HO
    step_maps = maps.index_select(0, read).view(steps, pairs, K, K)
    step_shifts = shifts.index_select(0, read).view(steps, pairs, V, K)
    values = received.new_empty((steps, pairs, V, K))
    if start is None:
        values[0].zero_()
    else:
        values[0] = start.reshape(pairs, V, K)
    for step in range(steps - 1):
        torch.baddbmm(step_shifts[step], values[step], step_maps[step], out=values[step + 1])
    received.index_copy_(0, write.flatten(), values.view(steps * N, HO, V, K))
    return received[:spans].to(dtype)


def _steps(first: torch.Tensor, count: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    j = torch.arange(steps, device=first.device)[:, None]
    return j, j < count[None]


def entering_states(initial: torch.Tensor | None, final0: torch.Tensor, transition: torch.Tensor,
                    first: torch.Tensor, count: torch.Tensor, steps: int, dtype: torch.dtype
                    ) -> torch.Tensor:
    """The state entering each span: the walk forward along each sequence from its initial
    state through X -> X @ transition + final0. `steps` bounds one sequence's spans."""
    j, live = _steps(first, count, steps)
    return walk(initial, final0, transition, first[None] + j, live, dtype)


def leaving_gradients(d_final: torch.Tensor | None, d_entering: torch.Tensor,
                      transition: torch.Tensor, first: torch.Tensor, count: torch.Tensor,
                      steps: int, dtype: torch.dtype) -> torch.Tensor:
    """The gradient of the state leaving each span: the walk backward along each sequence
    from its d_final_state (zero when None) through dX -> dX @ transition^T + d_entering
    (d_entering: each span's own outputs' gradient of its entering state)."""
    j, live = _steps(first, count, steps)
    return walk(d_final, d_entering, transition.transpose(-1, -2), (first + count - 1)[None] - j,
                live, dtype)
