"""Serving scenarios for the torch ops, shared by the CPU test (reference engines) and
the GPU test (the FROST decode engine): a state pool driven through several forward
calls with state_indices, checked after each call against the float64 serving reference
(tests/reference/serving.py) chained over the same calls.

`Step` is one call: its sequence lengths (1 per sequence = a decode step, a few = a
speculative-decoding step, mixed with longer ones = prefill and decode in one batch) and
its slot per sequence (negative or >= the pool size: skipped). `run_steps` makes the inputs
of each step, calls the public function on the device's pool and on a float64 copy of it
through the reference, and returns the worst relative errors seen.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from tests.reference.compare import rel_err
from tests.reference.delta_rule import Primals
from tests.reference.inputs import InputConfig, Inputs, make_inputs
from tests.reference.preprocess import Family
from tests.reference.serving import run_serving
from tests.torch_ops.op_calls import FUNCTIONS, op_kwargs


@dataclasses.dataclass(frozen=True)
class Step:
    seq_lens: tuple[int, ...]
    slots: tuple[int, ...]


def step_inputs(base: InputConfig, step: Step, seed: int) -> Inputs:
    return make_inputs(dataclasses.replace(base, seq_lens=step.seq_lens,
                                           with_initial_state=False), seed)


def reference_call(base: InputConfig, x: Inputs, pool64: torch.Tensor, slots: torch.Tensor,
                   every: int, scale: float | None):
    p = Primals(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w, initial_state=pool64,
                a_log=x.a_log, dt_bias=x.dt_bias)
    opts = dataclasses.replace(base.options(), scale=scale)
    return run_serving("serving_steps", base.family, opts, p, state_indices=slots,
                       output_final_state=True, checkpoint_every_n_tokens=every)


def run_steps(base: InputConfig, steps: list[Step], pool: torch.Tensor, *,
              overwrite: bool = True, every: int = 0, checkpoint_dtype=None,
              device: str = "cpu", seed: int = 0) -> dict[str, float]:
    """Drive `pool` (on `device`, in its dtype) through `steps`; the worst relative error
    of o, the pool (or the final_state rows) and the checkpoints against the reference."""
    fn = FUNCTIONS[base.family]
    pool64 = pool.detach().to("cpu", torch.float64).clone()
    worst = {"o": 0.0, "state": 0.0, "checkpoints": 0.0}
    for i, step in enumerate(steps):
        x = step_inputs(base, step, seed + i)
        slots = torch.tensor(step.slots, dtype=torch.int32)
        xd = x.to(device=device)
        kwargs = op_kwargs(xd, initial_state=pool, state_indices=slots.to(device),
                           overwrite_initial_state=overwrite,
                           checkpoint_every_n_tokens=every, checkpoint_dtype=checkpoint_dtype)
        with torch.no_grad():
            out = fn(*xd.args(), **kwargs)
        ref = reference_call(base, x, pool64, slots, every, base.scale)
        worst["o"] = max(worst["o"], rel_err(out[0], ref.o))
        if overwrite:
            assert out[1] is pool, "overwrite_initial_state returns the pool itself"
            pool64 = ref.state_after(pool64)
            worst["state"] = max(worst["state"], rel_err(pool, pool64))
        else:
            for row, state in ref.written.items():
                worst["state"] = max(worst["state"], rel_err(out[1][row], state))
        if every:
            rows = sum((n + every - 1) // every for n in step.seq_lens)
            worst["checkpoints"] = max(worst["checkpoints"],
                                       rel_err(out[2][:rows], ref.checkpoints[:rows]))
    return worst


def pool_config(family: Family, **kw: Any) -> InputConfig:
    base = dict(family=family, seq_lens=(1,), H=2, HV=4, K=8, V=4)
    base.update(kw)
    return InputConfig(**base)
