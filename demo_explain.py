"""`demo explain`: the plan explainer on sample graphs (a matmul and a GDN forward).

    tools/bazel run //:demo -- explain

Each sample graph is built with the public IR only (no framework tensors) and explained
with `graph.explain_plans()`, which plans the graph: every candidate engine with its claim,
decline or absence, the backend's answer, and the ranked plan list. What is claimed
depends on what this machine has installed (engine kernels, the cuDNN backend).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import cudnn

D = cudnn.data_type


def matmul_graph() -> cudnn.pygraph:
    g = cudnn.pygraph(name="matmul_sample", io_data_type=D.BFLOAT16,
                      compute_data_type=D.FLOAT)
    a = g.tensor([4, 256, 512], name="A")
    b = g.tensor([4, 512, 128], name="B")
    g.matmul(a, b, name="mm").set_output(True)
    return g


def gdn_graph() -> cudnn.pygraph:
    """GDN forward, 2 sequences in 512 packed tokens, 16 heads of 128."""
    g = cudnn.pygraph(name="gdn_sample")
    t, n, h, k, v = 512, 2, 16, 128, 128
    io = {"data_type": D.BFLOAT16}
    q = g.tensor([t, h, k], name="q", **io)
    key = g.tensor([t, h, k], name="k", **io)
    val = g.tensor([t, h, v], name="v", **io)
    gate = g.tensor([t, h], name="g", data_type=D.FLOAT)
    beta = g.tensor([t, h], name="beta", data_type=D.FLOAT)
    cu = g.tensor([n + 1], name="cu_seqlens", data_type=D.INT32)
    out, final_state, _ = g.gdn(q, key, val, gate, beta, cu, output_final_state=True,
                                name="gdn")
    out.set_output(True).set_data_type(D.BFLOAT16)
    final_state.set_output(True).set_data_type(D.FLOAT)
    return g


SAMPLES: dict[str, Callable[[], cudnn.pygraph]] = {"matmul": matmul_graph, "gdn": gdn_graph}


def report(names: Iterable[str] = tuple(SAMPLES)) -> str:
    sections = []
    for name in names:
        if name not in SAMPLES:
            raise ValueError(f"unknown sample graph '{name}' (known: {', '.join(SAMPLES)})")
        sections.append(f"== {name} ==\n{SAMPLES[name]().explain_plans().render()}")
    return "\n\n".join(sections)


if __name__ == "__main__":
    print(report())
