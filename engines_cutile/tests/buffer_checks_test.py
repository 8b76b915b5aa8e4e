"""The cuTile engine checks every caller buffer against the graph before any launch.

Buffers that contradict the graph used to reach the launcher (only q's device and the
q/k/v dtypes were checked): q/k/v of another length, O of 10 tokens, a cu_seqlens of
another length, float32 O, bfloat16 g, O with an innermost stride of 2. Each is now a
ValueError naming the engine and the port (engines_common's port_buffers), checked here
on CPU tensors through the plan's port list; execute runs the same `check_buffers` on
the caller's device after refusing a non-CUDA q.
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention.common.facts import linear_attention_facts  # noqa: E402
from cudnn.linear_attention.common.port_buffers import check_buffers  # noqa: E402
from cudnn.linear_attention.cutile.la_engine import _LinearAttentionPlan  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cutile_graphs import DT, la_graph  # noqa: E402

CPU = torch.device("cpu")
T, N, H, K, V = 40, 3, 2, 64, 64


def plan(backward=False):
    g = la_graph("gdn", backward, T=T, N=N, H=H, HV=H, K=K, V=V, io=DT.BFLOAT16)
    return _LinearAttentionPlan(linear_attention_facts(g), kda=False, engine="gdn_cutile")


def good(backward=False):
    bf = torch.bfloat16
    t = {"q": torch.zeros(T, H, K, dtype=bf), "k": torch.zeros(T, H, K, dtype=bf),
         "v": torch.zeros(T, H, V, dtype=bf), "g": torch.zeros(T, H),
         "beta": torch.zeros(T, H), "cu_seqlens": torch.tensor([0, 10, 25, T], dtype=torch.int32)}
    if backward:
        t.update(dO=torch.zeros(T, H, V, dtype=bf), dQ=torch.zeros(T, H, K, dtype=bf),
                 dK=torch.zeros(T, H, K, dtype=bf), dV=torch.zeros(T, H, V, dtype=bf),
                 dG=torch.zeros(T, H), dBeta=torch.zeros(T, H))
    else:
        t["O"] = torch.zeros(T, H, V, dtype=bf)
    return t


def test_matching_buffers_pass():
    for backward in (False, True):
        p = plan(backward)
        check_buffers(p.engine, p.ports, good(backward), CPU)


@pytest.mark.parametrize("port, bad, needle", [
    ("q", lambda t: torch.zeros(T + 8, H, K, dtype=t.dtype), "input 'q' has shape [48, 2, 64]"),
    ("v", lambda t: t[:T - 1], "input 'v' has shape [39, 2, 64]"),
    ("O", lambda t: t[:10], "output 'O' has shape [10, 2, 64]; the graph declares [40, 2, 64]"),
    ("cu_seqlens", lambda t: torch.zeros(65, dtype=torch.int32),
     "input 'cu_seqlens' has shape [65]; the graph declares [4]"),
    ("O", lambda t: t.float(), "output 'O' has dtype FLOAT; the kernel reads BFLOAT16"),
    ("g", lambda t: t.bfloat16(), "input 'g' has dtype BFLOAT16; the kernel reads FLOAT"),
    ("O", lambda t: torch.zeros(T, H, 2 * V, dtype=t.dtype)[:, :, ::2],
     "output 'O' has innermost stride 2"),
    ("k", lambda t: t.half(), "input 'k' has dtype HALF; the kernel reads BFLOAT16"),
])
def test_buffers_contradicting_the_graph_are_refused(port, bad, needle):
    p = plan()
    t = good()
    t[port] = bad(t[port])
    with pytest.raises(ValueError, match="gdn_cutile: " + needle.replace("[", r"\[")):
        check_buffers(p.engine, p.ports, t, CPU)


def test_backward_gradients_are_checked_too():
    p = plan(backward=True)
    t = good(backward=True)
    t["dBeta"] = t["dBeta"][:5]
    with pytest.raises(ValueError, match=r"gdn_cutile: output 'dBeta' has shape \[5, 2\]"):
        check_buffers(p.engine, p.ports, t, CPU)


def test_execute_refuses_host_buffers_before_anything_else():
    from cudnn.engines.base import ExecutionContext

    g = la_graph("gdn", False, T=T, N=N, H=H, HV=H, K=K, V=V, io=DT.BFLOAT16)
    p = _LinearAttentionPlan(linear_attention_facts(g), kda=False, engine="gdn_cutile")
    node = g.nodes[0]
    ports = {**node.inputs, **node.outputs}
    data = {ports[name].uid: buf for name, buf in good().items()}
    with pytest.raises(ValueError, match="gdn_cutile: input 'q' is on cpu; the kernels need "
                                         "CUDA buffers"):
        p.execute(g, data, ExecutionContext())


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
