"""The public ops enqueue their work and return without waiting for the GPU (tag gpu).

A training step that waits for the GPU inside an op stalls the host's run-ahead, and the
GPU then idles while the host issues the rest of the step. The check: a long sleep kernel
is queued on the current stream first and the op's inputs are written after it (a copy on
the same stream), then the op runs forward + backward (both training paths) with torch's
sync debug mode set to "error". The sleep must still be running when the call returns
(an op that waited on the stream or the device, by torch or by any other route, would
have let it finish), and the gradients must be bitwise those of the same call without
the sleep (so nothing ran ahead of the copy on another stream). Each configuration is
called twice first: building a plan or loading a kernel may wait, a cached call may not.

Run on the GPU machine from the repository root:
  python -m pytest -q tests/torch_ops/no_host_sync_gpu_test.py
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.reference.inputs import InputConfig, Inputs, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import grads_of, leaves, train_step

pytestmark = pytest.mark.gpu

#: how long the queued sleep lasts; a warm op call's host time is a few ms
SLEEP_S = 1.0


def _config(family: Family, seq_lens: tuple[int, ...]) -> InputConfig:
    return InputConfig(family=family, seq_lens=seq_lens, H=2, HV=4, K=128, V=128,
                       dtype=torch.bfloat16, device="cuda", with_initial_state=True,
                       use_qk_l2norm=True)


CASES = {
    "gdn": _config(Family.GDN, (100, 37, 0, 300)),
    "kda": _config(Family.KDA, (100, 37, 0, 300)),
    "gdn2": _config(Family.GDN2, (100, 37, 0, 300)),
}


@pytest.fixture(scope="module")
def sleep_cycles() -> int:
    """torch.cuda._sleep's cycle count for about SLEEP_S seconds on this GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    probe = 50_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(probe)  # warm
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    return int(probe * SLEEP_S * 1e3 / start.elapsed_time(end))


def _zeroed(inputs: Inputs) -> Inputs:
    """Leaves of the same shapes, dtypes and layouts, holding zeros until _fill runs."""
    fields = {f.name: getattr(inputs, f.name) for f in dataclasses.fields(inputs) if f.name != "config"}
    blank = {n: (torch.zeros_like(t) if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
             for n, t in fields.items()}
    return leaves(Inputs(config=inputs.config, **blank))


def _fill(target: Inputs, source: Inputs) -> None:
    with torch.no_grad():
        for f in dataclasses.fields(source):
            t = getattr(source, f.name)
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                getattr(target, f.name).copy_(t)


@pytest.mark.parametrize("training", [False, True], ids=["recompute", "checkpoints"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fwd_bwd_returns_before_the_gpu_gets_to_it(case, training, sleep_cycles):
    config = CASES[case]
    source = make_inputs(config, seed=41)
    dO, d_final = make_grad_outputs(config, seed=42)
    reference = None
    for _ in range(2):  # plans built and kernels loaded; the second call is a cached one
        inputs = leaves(source)
        train_step(inputs, dO, d_final, training)
        reference = grads_of(inputs)
    inputs = _zeroed(source)
    torch.cuda.synchronize()
    torch.cuda._sleep(sleep_cycles)
    slept = torch.cuda.Event()
    slept.record()
    _fill(inputs, source)  # the real values exist only after the sleep
    torch.cuda.set_sync_debug_mode("error")
    try:
        train_step(inputs, dO, d_final, training)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    still_sleeping = not slept.query()
    torch.cuda.synchronize()
    assert still_sleeping, f"{case}: the op waited for the GPU (the queued sleep had finished when it returned)"
    for name, grad in grads_of(inputs).items():
        assert torch.equal(grad, reference[name]), f"{case}: {name} differs from the same call without the sleep"
