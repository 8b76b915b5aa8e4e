"""Self-checks of the serving reference (serving.py): pools, skips, overwrite, checkpoints,
against the plain token-by-token reference run on the gathered states."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.reference.compare import assert_rel_close
from tests.reference.delta_rule import Primals, run_recurrent
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family
from tests.reference.serving import run_serving

F64 = torch.float64
EXACT = 1e-12


def _inputs(family: Family, seq_lens=(3, 1, 0, 5), **kw):
    cfg = InputConfig(family=family, seq_lens=seq_lens, H=2, HV=4, K=4, V=3, dtype=F64,
                      gate_dtype=F64, state_dtype=F64, param_dtype=F64, with_initial_state=True,
                      **kw)
    x = make_inputs(cfg, seed=7)
    return cfg, x, Primals(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w,
                           initial_state=x.initial_state, a_log=x.a_log, dt_bias=x.dt_bias)


@pytest.mark.parametrize("family", list(Family))
def test_pool_rows_are_the_gathered_initial_states(family):
    cfg, x, p = _inputs(family, safe_gate=True, use_beta_sigmoid=True, allow_neg_eigval=True)
    slots = torch.tensor([5, 0, 2, 3], dtype=torch.int32)
    pool = torch.randn(6, cfg.HO, cfg.V, cfg.K, dtype=F64)
    got = run_serving("t", family, cfg.options(), dataclasses.replace(p, initial_state=pool),
                      state_indices=slots, output_final_state=True)
    gathered = dataclasses.replace(p, initial_state=pool[slots.long()])
    o, final = run_recurrent("t", family, cfg.options(), gathered, True)
    assert_rel_close("o", got.o, o, EXACT)
    assert sorted(got.written) == [0, 2, 3, 5]
    for i, s in enumerate(slots.tolist()):
        assert_rel_close(f"row {s}", got.written[s], final[i], EXACT)
    after = got.state_after(pool)
    for untouched in (1, 4):
        assert torch.equal(after[untouched], pool[untouched])


@pytest.mark.parametrize("bad", [-1, 6, 1000])
def test_a_slot_outside_the_pool_skips_its_sequence(bad):
    cfg, x, p = _inputs(Family.KDA)
    pool = torch.randn(6, cfg.HO, cfg.V, cfg.K, dtype=F64)
    slots = torch.tensor([4, bad, 1, 2], dtype=torch.int32)
    got = run_serving("t", Family.KDA, cfg.options(), dataclasses.replace(p, initial_state=pool),
                      state_indices=slots, output_final_state=True, checkpoint_every_n_tokens=1)
    assert sorted(got.written) == [1, 2, 4]
    lo, hi = int(x.cu_seqlens[1]), int(x.cu_seqlens[2])
    assert hi > lo and got.o[lo:hi].abs().max() == 0
    assert got.checkpoints[lo:hi].abs().max() == 0
    assert got.o[:lo].abs().max() > 0


@pytest.mark.parametrize("every", [1, 2, 3])
def test_checkpoints_chain_into_the_final_state(every):
    cfg, x, p = _inputs(Family.GDN2, seq_lens=(5, 1, 0, 7))
    got = run_serving("t", Family.GDN2, cfg.options(), p, output_final_state=True,
                      checkpoint_every_n_tokens=every)
    cu = x.cu_seqlens.tolist()
    row = 0
    for n in range(len(cu) - 1):
        start, end = cu[n], cu[n + 1]
        if end == start:
            continue
        assert_rel_close("row 0", got.checkpoints[row], p.initial_state[n].to(F64), EXACT)
        marks = list(range(0, end - start, every))
        for j, mark in enumerate(marks):
            stop = marks[j + 1] if j + 1 < len(marks) else end - start
            seg = _segment(p, start + mark, start + stop, got.checkpoints[row + j])
            _, state = run_recurrent("t", Family.GDN2, cfg.options(), seg, True)
            want = got.checkpoints[row + j + 1] if j + 1 < len(marks) else got.written[n]
            assert_rel_close(f"seq {n} mark {mark}", state[0], want, 1e-10)
        row += len(marks)
    assert row <= got.checkpoints.shape[0]


def _segment(p: Primals, start: int, end: int, state: torch.Tensor) -> Primals:
    sl = slice(start, end)
    cut = {f: getattr(p, f)[sl] for f in ("q", "k", "v", "g", "beta", "w") if getattr(p, f) is not None}
    return dataclasses.replace(p, **cut, cu_seqlens=torch.tensor([0, end - start], dtype=torch.int32),
                               initial_state=state[None])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
