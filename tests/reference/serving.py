"""Float64 reference of the serving forms of a delta-rule forward: state pools, in-place
state updates, per-sequence skips and state checkpoints (docs/LINEAR_ATTENTION.md §3.6).

`run_serving(fn, family, opts, x, ...)` evaluates one forward call the way an inference
server issues it:

- states live in a pool `initial_state [S, HO, V, K]` (V-major); sequence i reads row
  `state_indices[i]` (row i without indices, then S = N);
- a slot outside [0, S) - negative (a padding entry of a captured batch) or >= S (a bad
  index) - skips the sequence: nothing is read from or written to any state row, and its
  output rows and checkpoint rows are zeros (the behaviour every engine serving pools
  implements);
- with output_final_state each served sequence's final state is written to its slot:
  of the initial_state buffer itself under overwrite_initial_state, else of a separate
  final_state buffer shaped like the pool (rows of no served sequence keep their contents);
- checkpoint_every_n_tokens = n > 0: for each sequence b, rows j = 0..ceil(L_b / n) - 1
  hold the state before its token j * n (row 0 = the state it starts from), packed in
  sequence order; `max(T // n + N, 1)` rows are allocated, rows past the last written one
  are not part of the contract.

Everything else (pre-processing, the recurrence) is the token-by-token reference
(preprocess.py, recurrent.py). Results are float64 on the CPU.
"""
from __future__ import annotations

import dataclasses

import torch

from tests.reference import preprocess as pp
from tests.reference.delta_rule import Primals
from tests.reference.recurrent import delta_rule_recurrence, to_stored


@dataclasses.dataclass(frozen=True)
class ServingResult:
    """o [T, HO, V]; `written` {pool row: final state [HO, V, K]} of every served sequence
    (empty without output_final_state); checkpoints [rows, HO, V, K] or None."""

    o: torch.Tensor
    written: dict[int, torch.Tensor]
    checkpoints: torch.Tensor | None

    def state_after(self, before: torch.Tensor) -> torch.Tensor:
        """The final-state buffer after the call, given its contents `before` (the pool under
        overwrite_initial_state, else the separate final_state buffer)."""
        out = before.detach().to(device="cpu", dtype=torch.float64).clone()
        for row, state in self.written.items():
            out[row] = state
        return out


def slots_of(state_indices: torch.Tensor | None, n_seq: int) -> list[int]:
    return list(range(n_seq)) if state_indices is None else [int(i) for i in state_indices.tolist()]


def run_serving(fn: str, family: pp.Family, opts: pp.Options, x: Primals, *,
                state_indices: torch.Tensor | None = None, output_final_state: bool = False,
                checkpoint_every_n_tokens: int = 0) -> ServingResult:
    """One forward call with a state pool (see the module docstring). `x.initial_state` is the
    pool [S, HO, V, K] (or None: every sequence starts from zero, and without a pool
    S = N for the final states)."""
    pool = x.initial_state
    # the per-sequence runs below take their state from the pool, not from prepare()
    p = dataclasses.replace(x, initial_state=None).prepare(fn, family, opts)
    d = p.dims
    rows = d.N if pool is None or state_indices is None else pool.shape[0]
    if state_indices is not None and tuple(state_indices.shape) != (d.N,):
        raise ValueError(f"{fn}: state_indices must be [N] = [{d.N}], got {list(state_indices.shape)}")
    if pool is not None and tuple(pool.shape[1:]) != (d.HO, d.V, d.K):
        raise ValueError(f"{fn}: initial_state must be [S, HO, V, K] = [S, {d.HO}, {d.V}, {d.K}], "
                         f"got {list(pool.shape)}")
    every = checkpoint_every_n_tokens
    o = p.q.new_zeros(d.T, d.HO, d.V)
    ck = p.q.new_zeros(max(d.T // every + d.N, 1), d.HO, d.V, d.K) if every > 0 else None
    written: dict[int, torch.Tensor] = {}
    ck_row = 0
    for n, ((start, end), slot) in enumerate(zip(d.bounds, slots_of(state_indices, d.N))):
        served = 0 <= slot < rows
        h0 = None
        if served and pool is not None:
            h0 = pool[slot].to(torch.float64).transpose(-1, -2)[None]  # FLA orientation
        if served:
            o[start:end], final = _one_sequence(p, start, end, h0)
            if output_final_state:
                written[slot] = to_stored(final)
        if every > 0:
            for j in range(0, end - start, every):
                if served:
                    state = h0[0] if j == 0 and h0 is not None else (
                        _one_sequence(p, start, start + j, h0)[1] if j else p.q.new_zeros(d.HO, d.K, d.V))
                    ck[ck_row] = to_stored(state)
                ck_row += 1
    return ServingResult(o=o.cpu(), written={r: s.cpu() for r, s in written.items()},
                         checkpoints=None if ck is None else ck.cpu())


def _one_sequence(p: pp.Prepared, start: int, end: int, h0: torch.Tensor | None):
    """(o [L, HO, V], final state [HO, K, V]) of tokens start..end-1 from state h0."""
    dims = dataclasses.replace(p.dims, T=end - start, N=1, bounds=((0, end - start),))
    sl = slice(start, end)
    one = dataclasses.replace(p, q=p.q[sl], k=p.k[sl], v=p.v[sl], gamma=p.gamma[sl],
                              erase=p.erase[sl], write=p.write[sl], initial_state=h0, dims=dims)
    o, final = delta_rule_recurrence(one)
    return o, final[0]
