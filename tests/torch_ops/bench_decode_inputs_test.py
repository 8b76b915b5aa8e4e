"""bench/bench_decode.py on a CPU: its decode and speculative steps plan and take the launch
lane on the FROST decode engine (decode_on_cpu.py), and its FLA rows hand FLA the same
inputs as the op: the op's tensors as [1, T, H, D] views, int64 cu_seqlens, the default
scale and gates, and the pool's rows in FLA's [N, H, K, V] layout (gathered through the
slots and scattered back in the pooled row). FLA itself is replaced by a recorder."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tests.torch_ops.decode_on_cpu import decode_engine_on_cpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_decode  # noqa: E402


@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
@pytest.mark.parametrize("tokens", [1, 4])
def test_bench_steps_plan_the_decode_engine_and_take_the_lane(kda, tokens):
    x = bench_decode.inputs(3, kda, dev="cpu", tokens=tokens)
    with torch.no_grad(), decode_engine_on_cpu() as counts:
        call = bench_decode.op_call(x, kda)
        for _ in range(3):
            o, final = call()
        assert final is x["pool"] and o.shape == (3 * tokens, bench_decode.HEADS, bench_decode.DIM)
        assert (counts.builds, counts.checked, counts.launches) == (1, 1, 2), counts
        assert bench_decode.checked_calls() == 1


class _RecordingFla:
    def __init__(self) -> None:
        self.calls = []

    def __call__(self, q, k, v, g, beta, **kw):
        self.calls.append(dict(q=q, k=k, v=v, g=g, beta=beta, **kw))
        h0 = kw["initial_state"]
        return torch.zeros_like(v), h0 + 1.0  # a final state that differs from h0


@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
@pytest.mark.parametrize("pooled", [False, True], ids=["state", "pool"])
def test_fla_rows_get_the_op_inputs(kda, pooled):
    x = bench_decode.inputs(3, kda, dev="cpu", tokens=2)
    fla = _RecordingFla()
    call = bench_decode.fla_call(x, kda, pooled=pooled, fn=fla)
    o, final = call()
    (kw,) = fla.calls
    for name in ("q", "k", "v", "g", "beta"):
        t = kw[name]
        assert t.shape == (1, *x[name].shape) and t.data_ptr() == x[name].data_ptr(), name
    assert kw["cu_seqlens"].dtype == torch.int64 and torch.equal(kw["cu_seqlens"], x["cu"].long())
    assert kw["output_final_state"] is True
    assert not {"scale", "use_qk_l2norm_in_kernel", "use_gate_in_kernel",
                "use_beta_sigmoid_in_kernel"} & kw.keys()  # the defaults, as the op's call
    rows = x["slots"].long() if pooled else torch.arange(3)
    expected = x["pool"][rows].transpose(-1, -2)  # FLA's [N, H, K, V]
    assert torch.equal(kw["initial_state"], expected)
    if pooled:  # the final states went back into the slots' rows, the rest untouched
        fla_pool = final
        assert torch.equal(fla_pool[rows], expected + 1.0)
        others = [r for r in range(fla_pool.shape[0]) if r not in rows.tolist()]
        assert torch.equal(fla_pool[others], x["pool"][others].transpose(-1, -2))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))


_FAULTY_PEER = """
import json, sys
for line in sys.stdin:
    n, kda, tokens = json.loads(line)
    if n == 256:
        sys.stderr.write("torch.AcceleratorError: CUDA error: an illegal memory access was encountered\\n")
        sys.exit(1)
    print("a peer's own output on stdout", flush=True)
    print("cells: " + json.dumps([f"{n}.0", f"{tokens}.0"]), flush=True)
"""


def test_a_faulting_peer_costs_its_cell_only(tmp_path):
    """A peer column whose kernel faults (its process dies) reports that cell as a fault and
    a fresh worker times the next cell."""
    script = tmp_path / "peer.py"
    script.write_text(_FAULTY_PEER)
    peer = bench_decode.PeerWorker("fla", 3, argv=[sys.executable, str(script)])
    assert peer.cells(64, False, 1) == ["64.0", "1.0"]
    first = peer.proc
    fault = peer.cells(256, False, 1)
    assert fault[0].startswith("fault: ") and "illegal memory access" in fault[0] and fault[1] == "-"
    assert peer.cells(1024, True, 4) == ["1024.0", "4.0"]
    assert peer.proc is not first  # restarted
    peer.close()
    assert peer.proc.poll() == 0
