"""Long sequences on few heads: the forward split into spans that run side by side.

The chunked kernels walk each (sequence, head) pair's state serially, one CTA per pair, so
a call with few pairs leaves most of the GPU idle: one 32k-token sequence with 16 heads
keeps 16 of an H200's 132 SMs busy and takes 8x the time of the same tokens as 8
sequences. The state a span leaves is an affine function of the state entering it
(X_out = X_in @ transition + final_from_zero, ops/summary.py), so the forward can run as:

1. cut every sequence into spans of S tokens (span j of sequence n starts at
   cu[n] + j S; a sequence always has at least one span, an empty one if it is empty);
2. one span-summary call over all spans at once (their final states from zero and their
   transitions: two forward passes, every span in parallel);
3. the entering state of each span by composing those maps along each sequence (a few
   small batched matmuls per span of the longest sequence, on the device);
4. the forward over all spans at once, each from its entering state; a sequence's final
   state is its last span's.

That is three forward passes with S-token critical paths instead of one with the whole
sequence's, so it pays when the spans multiply the pairs by well over three
(`auto_span_tokens`: 8 spans per sequence, 4 for a training call whose backward splits). Nothing reads cu_seqlens on the host: the span table is built on
the device with a static bound on its length (N + T // span spans; spans past the real
ones are empty, at T; _span_maps.py has the table and the composition).

The backward: a split forward also keeps its span table, entering states and transitions,
and the backward splits the same way (CUDNN_LA_SPAN_BACKWARD=0: autograd saves the call's
own arguments and the backward runs on the unsplit sequences): the backward summary (each span's outputs' gradient of its
entering state, every span at once), the gradient of each span's leaving state composed
backward along each sequence through the transposed transitions, then one backward over
all spans from their entering states and leaving-state gradients.

Not split: calls that ask for checkpoints or values (their rows are laid out by the
unsplit sequences), a pinned plan (it must run as asked), batch_invariant (the span
length depends on the batch's size), calls under torch.compile (they go through the
registered op), and calls whose summary no engine serves (remembered per configuration).
CUDNN_LA_SPAN_TOKENS overrides the choice: 0 never splits, a positive n splits every call
that may be split into n-token spans (on any device: the tests use it on the CPU).
"""
from __future__ import annotations

import dataclasses
import operator
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from cudnn.linear_attention.common.switches import binary_switch
from cudnn.linear_attention.ops._span_maps import (SpanTable, entering_states, leaving_gradients,
                                                   span_count_bound, span_table)

ENV = "CUDNN_LA_SPAN_TOKENS"
#: 0: the backward of a split forward runs unsplit (unset, empty or 1: it splits too)
BACKWARD_ENV = "CUDNN_LA_SPAN_BACKWARD"
#: spans are whole 64-token chunks of the kernels, and at least this long. The split's
#: host work (the summary and forward calls, the composition's launches) measured ~0.8 ms
#: on the H200's host, so it pays only on sequences whose serial walk is several ms:
#: 1 x 32768 tokens, 16 heads (8 spans of 4096) went from 2.9 to 1.3 ms (GDN), 4.0 to 1.8
#: (KDA) and 4.4 to 1.9 (GDN-2); the forward alone at 2 x 16384 and 4 x 8192 lost
#: (1.43 -> 1.59, 0.72 -> 1.64 ms GDN), so those are not split (see MIN_GAIN_TRAINING)
MIN_SPAN = 4096
CHUNK = 64
#: split only when spans multiply the (sequence, head) pairs by at least this much: the
#: split runs three passes where the plain forward runs one, plus the host work above
MIN_GAIN = 8
#: the same for a training call whose backward splits too (and recomputes: no training
#: checkpoints): H200, 16 heads, fwd+bwd back to back, split into spans of 4096 against
#: unsplit: 1 x 16384 GDN 5.29 -> 4.53 ms, KDA 7.45 -> 4.35; 2 x 16384 GDN 5.61 -> 4.74,
#: KDA 8.21 -> 5.38 (4 spans per sequence), where the forward alone gains at 1 x 16384
#: (1.46 -> 1.21 ms) but loses at 2 x 16384 (1.43 -> 1.59); 4 x 8192 (2 spans) loses both
#: ways. With training checkpoints GDN trains faster unsplit there (3.76 / 4.15 ms), so
#: those calls keep MIN_GAIN
MIN_GAIN_TRAINING = 4

_sm_counts: dict[int, int] = {}


def _sms(device: torch.device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    count = _sm_counts.get(index)
    if count is None:
        count = _sm_counts[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return count


def auto_span_tokens(T: int, N: int, HO: int, sms: int, min_gain: int = MIN_GAIN
                     ) -> int | None:
    """The span length for T tokens in N sequences with HO heads on `sms` SMs, or None when
    splitting would not pay: about one wave of (span, head) pairs, in whole chunks, at
    least MIN_SPAN tokens, and at least `min_gain` spans per sequence on average."""
    if N < 1 or T < 1 or HO < 1:
        return None
    spans = sms // HO  # one wave: each (span, head) pair is one CTA
    if spans < min_gain * N:
        return None
    span = -(-T // spans)
    span = max(MIN_SPAN, -(-span // CHUNK) * CHUNK)
    if T // span < min_gain * N:
        return None
    return span


def forced_span_tokens() -> int | None:
    """ENV's span length (0: never split), or None when it is unset or empty."""
    forced = os.environ.get(ENV)
    if forced is None or forced.strip() == "":
        return None
    try:
        n = int(forced)
    except ValueError:
        raise ValueError(f"{ENV}: expected a non-negative integer; got {forced!r}") from None
    if n < 0:
        raise ValueError(f"{ENV}: expected a non-negative integer; got {n}")
    return n


class _TableCache:
    """The last span table, for the next call with the same cu_seqlens tensor (a model's
    layers share one): kept with a reference to that tensor, so `is` cannot meet a new
    tensor at a freed address, and with its version counter, so writing into it in place
    rebuilds the table."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._cu: torch.Tensor | None = None
        self._table: SpanTable | None = None

    def get(self, cu_seqlens: torch.Tensor, total: int, span: int, spans: int,
            steps: int) -> SpanTable:
        key = (cu_seqlens._version, total, span, spans, steps,
               torch.cuda.current_stream(cu_seqlens.device)
               if cu_seqlens.is_cuda else None)
        if cu_seqlens.is_cuda and torch.cuda.is_current_stream_capturing():
            # a table built inside a CUDA graph capture holds its values only when the graph
            # replays: build it into the graph, keep nothing
            return span_table(cu_seqlens, total, span, spans, steps)
        if self._cu is not cu_seqlens or self._key != key:
            self._table = span_table(cu_seqlens, total, span, spans, steps)
            self._cu, self._key = cu_seqlens, key
        return self._table


@dataclasses.dataclass(frozen=True)
class SpanCall:
    """What a split forward keeps for a split backward: its span table and the spans'
    entering states and transitions (float32: [spans, HO, V, K] and [spans, HO, K, K],
    9.4 MB at 1 x 32768 tokens, 16 heads, K = V = 128)."""
    table: SpanTable
    entering: torch.Tensor
    transition: torch.Tensor


def backward_split_enabled() -> bool:
    """On unless BACKWARD_ENV=0: a forward that split keeps what its backward needs to split
    too (its span table, entering states and transitions, ~2 x spans x HO x K x V floats).
    H200, 1 x 32768 tokens, 16 heads, fwd+bwd op: GDN 9.1 -> 4.0 ms, KDA 12.9 -> 5.3, GDN-2
    13.7 -> 5.8 (the unsplit backward walks each (sequence, head) pair serially)."""
    return binary_switch(BACKWARD_ENV, default=True)


class SpanSplit:
    """The split forward and backward of one family (FamilyOps builds one; module docstring).

    `run_forward(args)` runs the family's forward op on schema-ordered args and returns its
    results; `summaries` is the family's SummaryOps (ops/_summary_ops.py);
    `gradient_results` names the backward op's results in order."""

    def __init__(self, names: Sequence[str], run_forward: Callable[[tuple[Any, ...]], tuple],
                 summaries: Any, gradient_results: Sequence[str]) -> None:
        self._at = at = {name: i for i, name in enumerate(names)}
        self._every, self._values = at["checkpoint_every_n_tokens"], at["output_values"]
        self._plan, self._invariant = at["plan_name"], at["batch_invariant"]
        self._q, self._v, self._cu = at["q"], at["v"], at["cu_seqlens"]
        self._gradient_at_initial_state = tuple(gradient_results).index("d_initial_state")
        self._run_forward = run_forward
        self._summary, self._summary_bwd = summaries.summary, summaries.summary_bwd
        # each call's summary values straight in schema order (the op's run, not its
        # keyword path): the forward's arguments by position, the backward's by name,
        # with the spans' table in cu_seqlens
        taken, self._summary_values = self._summary.signature.arranger(
            {"initial_state": None, "output_transition": True})
        self._summary_take = operator.itemgetter(*[at[n] for n in taken])
        taken_bwd, self._summary_bwd_values = self._summary_bwd.signature.arranger(
            {"d_final_state": None, "output_transition": False})
        self._summary_bwd_take = operator.itemgetter(*taken_bwd)
        #: the other summary arguments (bench/span_split_profile.py calls the ops with them)
        self._summary_args = tuple(n for n in taken if n != "cu_seqlens")
        self._summary_bwd_args = tuple(n for n in taken_bwd if n != "cu_seqlens")
        #: forward-op cache keys the forward's checks passed, and those whose summary no
        #: engine serves (or whose summary's checks refuse what the forward takes)
        self.checked: set[Any] = set()
        self.declined: set[Any] = set()
        self._tables = _TableCache()

    def span_for(self, args: Sequence[Any], training: bool = False) -> int | None:
        """The span length to split this forward call into, or None (module docstring).
        `training`: the call's backward splits too and recomputes (MIN_GAIN_TRAINING).
        Every eager forward asks, so the common answer (None) comes first and cheap."""
        if (args[self._every] or args[self._values] or args[self._plan] is not None
                or args[self._invariant]):
            return None
        forced = forced_span_tokens()
        q = args[self._q]
        if forced is None and not q.is_cuda:
            return None
        T, N = q.shape[0], args[self._cu].numel() - 1
        if forced is not None:
            return forced if forced > 0 and N >= 1 and T >= 1 else None
        return auto_span_tokens(T, N, max(q.shape[1], args[self._v].shape[1]), _sms(q.device),
                                MIN_GAIN_TRAINING if training else MIN_GAIN)

    def run(self, args: tuple[Any, ...], span: int, keep: bool = False
            ) -> tuple[tuple, SpanCall | None] | None:
        """(the forward's results (o, final_state and the unused placeholders) by spans,
        the SpanCall a split backward reads when `keep`), or None when the summary is not
        served (then the caller runs the plain forward)."""
        from cudnn.ops.errors import OpTypeError, OpValueError, cudnnGraphNotSupportedError

        at = self._at
        q, cu, initial = args[at["q"]], args[at["cu_seqlens"]], args[at["initial_state"]]
        T, N = q.shape[0], cu.numel() - 1
        spans = span_count_bound(T, N, span)
        table = self._tables.get(cu, T, span, spans, min(spans, -(-T // span)))
        split = list(args)
        split[self._cu] = table.span_cu
        try:
            # the kernel itself, not the dispatcher: this call is already eager and checked
            final0, transition = self._summary.run(self._summary_values(self._summary_take(split)))
        except (cudnnGraphNotSupportedError, OpTypeError, OpValueError):
            return None
        dtype = initial.dtype if initial is not None else final0.dtype
        x_in = entering_states(initial, final0, transition, table, dtype)
        split[at["initial_state"]] = x_in
        # the spans' final states only when the call wants its own (no split backward reads
        # them); else the forward op's zero-size placeholder is the call's
        results = self._run_forward(tuple(split))
        o, final = results[0], results[1]
        if args[at["output_final_state"]]:
            final = final.index_select(0, table.last)
        call = SpanCall(table, x_in, transition) if keep else None
        return (o, final, *results[2:]), call

    def serve(self, args: tuple[Any, ...], state_indices: torch.Tensor | None,
              overwrite: bool, span: int) -> tuple | None:
        """A serving call (state pool in initial_state, FamilyOps.serve) by spans: each
        sequence's slot gathered from the pool (zero for a skipped slot, outside [0, S)),
        the split forward from those states, the skipped sequences' output rows zeroed,
        the final states scattered into the pool (overwrite) or into a fresh pool-shaped
        tensor whose unserved rows stay unwritten. Results as the serving op's (o, final
        placeholder or pool-shaped final), or None when the summary is not served.
        Nothing synchronises: a skipped sequence writes the row and value of the first
        served one (or its own row's current value when none is served), so every write
        is determined whatever order the scatter takes."""
        at = self._at
        q, cu, pool = args[at["q"]], args[at["cu_seqlens"]], args[at["initial_state"]]
        N, S = cu.numel() - 1, pool.shape[0]
        slots = (state_indices.long() if state_indices is not None
                 else torch.arange(N, device=pool.device))
        served = (slots >= 0) & (slots < S)
        rows = slots.clamp(0, max(S - 1, 0))
        # at least float32 between the spans (a bf16 pool is rounded once, at the end)
        wide = torch.promote_types(pool.dtype, torch.float32)
        initial = pool.index_select(0, rows).to(wide) * served.view(N, 1, 1, 1).to(wide)
        forward = list(args)
        forward[at["initial_state"]] = initial
        forward[at["output_final_state"]] = True
        ran = self.run(tuple(forward), span)
        if ran is None:
            return None
        (o, final, *rest), _ = ran
        # the rows of a skipped sequence: zero, as the engines leave them
        token_seq = torch.searchsorted(cu[1:].long(), torch.arange(q.shape[0], device=cu.device),
                                       right=True).clamp(max=N - 1)
        o = o * served.index_select(0, token_seq).view(-1, 1, 1).to(o.dtype)
        first = torch.argmax(served.to(torch.int32))  # the first served sequence (0 if none)
        anyone = served.any()
        target = torch.where(served, rows, torch.where(anyone, rows[first], rows))
        out = pool if overwrite else torch.empty_like(pool)
        value = torch.where(served.view(N, 1, 1, 1), final.to(pool.dtype),
                            torch.where(anyone, final[first].to(pool.dtype), out.index_select(0, rows)))
        out.index_copy_(0, target, value)
        return (o, out if not overwrite else final.new_empty((0,)), *rest)

    def backward(self, call: SpanCall, named: dict[str, Any],
                 run_backward: Callable[[dict[str, Any]], tuple]) -> tuple:
        """The backward op's results for the forward `call` split, by spans: each span's
        own outputs' gradient of its entering state (the backward summary, every span at
        once), the gradient of each span's leaving state composed backward along each
        sequence, then the backward over all spans at once from their entering states and
        leaving-state gradients. `named` holds the unsplit backward's arguments by name;
        `run_backward(named)` runs the backward op. d_initial_state comes back per
        sequence (its first span's)."""
        from cudnn.ops.errors import OpTypeError, OpValueError, cudnnGraphNotSupportedError

        spanned = dict(named)
        spanned["cu_seqlens"] = call.table.span_cu
        try:
            d_entering, _ = self._summary_bwd.run(self._summary_bwd_values(
                self._summary_bwd_take(spanned)))
        except (cudnnGraphNotSupportedError, OpTypeError, OpValueError):
            return run_backward(named)  # the unsplit backward: the same gradients
        spanned["d_final_state"] = leaving_gradients(named["d_final_state"], d_entering,
                                                     call.transition, call.table, call.entering.dtype)
        spanned["initial_state"] = call.entering
        grads = list(run_backward(spanned))
        at = self._gradient_at_initial_state
        if grads[at] is not None and grads[at].numel():
            grads[at] = grads[at].index_select(0, call.table.first)
        return tuple(grads)
