"""Single-matmul graphs for the plan-list contract tests (CPU, TorchMatmulEngine oracle):
the graph, seeded operands, the float64 relative error and a workspace of the right size."""
from __future__ import annotations

import torch

import cudnn
from cudnn.engines.manifest import register_backend

D = cudnn.data_type
TORCH_TO_CUDNN = {torch.float32: D.FLOAT, torch.float64: D.DOUBLE,
                  torch.bfloat16: D.BFLOAT16, torch.float16: D.HALF}
# Relative error bounds against the float64 product, per dtype: unit roundoff of the
# storage type times a small factor for K <= 64 accumulations and the output rounding.
REL_BOUND = {torch.float32: 1e-5, torch.float64: 1e-5, torch.bfloat16: 2e-2,
             torch.float16: 4e-3}


def matmul_graph(dtype=torch.float32, batch=2, m=5, k=12, n=7, engine=None, **graph_kw):
    dt = TORCH_TO_CUDNN[dtype]
    g = cudnn.pygraph(name=graph_kw.pop("name", "mm_graph"), io_data_type=dt,
                      compute_data_type=D.FLOAT, **graph_kw)
    a = g.tensor([batch, m, k], data_type=dt, name="A")
    b = g.tensor([batch, k, n], data_type=dt, name="B")
    c = g.matmul(a, b, name="mm")
    c.set_output(True).set_data_type(dt)
    if engine is not None:
        register_backend(g, engine)
    return g, a, b, c


def operands(a, b, c, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    ta = torch.randn(*a.dim, generator=gen, dtype=torch.float64).to(dtype)
    tb = torch.randn(*b.dim, generator=gen, dtype=torch.float64).to(dtype)
    tc = torch.full(tuple(c.dim), float("nan"), dtype=dtype)
    return ta, tb, tc


def rel_error(got, a, b):
    ref = torch.matmul(a.double(), b.double())
    return ((got.double() - ref).norm() / ref.norm()).item()


def workspace_for(graph, index=None):
    size = (graph.get_workspace_size() if index is None
            else graph.get_workspace_size_plan_at_index(index))
    return torch.empty(max(size, 1), dtype=torch.uint8)
