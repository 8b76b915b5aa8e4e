"""Helpers of the native backend GPU suite (test_native_backend_lowering.py).

`run_on_backend` takes an IR graph built with `cudnn.pygraph` through the public plan API
(create_execution_plans -> build_plans -> execute) and asserts on the way that the run
went through the backend plan path: every entry of the plan list is a backend entry, the
selected engine is the cuDNN backend adapter, the lowered graph is on the graph and the
compiled plan is a backend plan. Output buffers are allocated after planning, from the
layouts the IR holds then (the backend's inferred ones copied back), and pre-filled with
NaN so an output the plan never wrote cannot pass.

`check` records one row of the result table (op, shape, relative error, bound, plan) and
then asserts the bound; `declined` records a graph the backend declined where the test
expects that (pass column "decl", the reason in the plan column); `table()` renders the
rows.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch

import cudnn
from cudnn.backend.adapter import CudnnBackendAdapter
from cudnn.backend.compiled_plan import BackendPlan
from cudnn.backend.lowered_graph import LoweredGraph
from cudnn.engines import engine_ids

DT = cudnn.data_type
TORCH_DTYPE = {DT.HALF: torch.float16, DT.FLOAT: torch.float32, DT.BFLOAT16: torch.bfloat16,
               DT.DOUBLE: torch.float64, DT.INT32: torch.int32, DT.INT64: torch.int64,
               DT.BOOLEAN: torch.bool, DT.FP8_E4M3: torch.float8_e4m3fn,
               DT.FP8_E5M2: torch.float8_e5m2}
if hasattr(torch, "float8_e8m0fnu"):  # block scales (torch >= 2.7)
    TORCH_DTYPE[DT.FP8_E8M0] = torch.float8_e8m0fnu


@dataclass
class Row:
    op: str
    shape: str
    rel_err: float
    bound: float
    plan: str
    declined: bool = False

    @property
    def passed(self) -> bool:
        return self.rel_err <= self.bound  # NaN compares False: an unwritten output fails

    @property
    def verdict(self) -> str:
        return "decl" if self.declined else "yes" if self.passed else "NO"


ROWS: list[Row] = []


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max |got - ref| / max |ref|, in float64."""
    got64 = got.detach().to(torch.float64).reshape(ref.shape)
    ref64 = ref.detach().to(torch.float64).to(got64.device)
    return ((got64 - ref64).abs().max() / ref64.abs().max().clamp_min(1e-30)).item()


def check(op: str, got: torch.Tensor, ref: torch.Tensor, bound: float, plan: str = "") -> None:
    row = Row(op, "x".join(map(str, ref.shape)), rel_err(got, ref), bound, plan)
    ROWS.append(row)
    assert row.passed, f"{op} {row.shape}: relative error {row.rel_err:.3e} > {bound:.1e}"


def declined(op: str, shape: Iterable[int], reason: str) -> None:
    """Record that the backend declined `op` (the caller has checked that it should)."""
    ROWS.append(Row(op, "x".join(map(str, shape)), float("nan"), float("nan"), reason, True))


def table() -> str:
    head = f"{'op':<34} {'shape':<18} {'rel err':>10} {'bound':>8}  pass  plan"
    lines = [head, "-" * len(head)]
    for r in ROWS:
        lines.append(f"{r.op:<34} {r.shape:<18} {r.rel_err:>10.3e} {r.bound:>8.1e}  "
                     f"{r.verdict:<4}  {r.plan}")
    return "\n".join(lines)


def assert_backend_path(graph: cudnn.pygraph) -> None:
    planning = graph.lifecycle.planning
    assert planning.plans, "the plan list is empty"
    sides = {engine_ids.side_of(p.engine_id) for p in planning.plans}
    assert sides == {"backend"}, f"non-backend entries planned:\n{graph.explain_plans()}"
    assert all(p.cpp_index is not None for p in planning.plans
               if p.engine_id != engine_ids.BACKEND_HEURISTIC_ENGINE_ID)
    assert isinstance(graph.selected_engine, CudnnBackendAdapter), graph.selected_engine
    assert isinstance(planning.lowered, LoweredGraph), planning.lowered
    assert planning.lowered.backend.get_execution_plan_count() >= 1
    assert isinstance(planning.compiled_plans[planning.selected_index], BackendPlan)


def empty_like_ir(t: cudnn.Tensor) -> torch.Tensor:
    buf = torch.empty_strided(tuple(t.dim), tuple(t.stride), dtype=TORCH_DTYPE[t.data_type],
                              device="cuda")
    if buf.is_floating_point() and buf.element_size() == 1:
        buf.view(torch.uint8).fill_(0xFF)  # NaN in FP8 E4M3, E5M2 and E8M0
    elif buf.is_floating_point():
        buf.fill_(float("nan"))
    return buf


def plan_on_backend(graph: cudnn.pygraph,
                    heuristics: list[cudnn.heur_mode] | None = None) -> str:
    """Plan and build `graph` through the router; returns the selected plan's name."""
    graph.create_execution_plans(heuristics)
    graph.build_plans()
    assert_backend_path(graph)
    return graph.get_plan_name_at_index(graph.lifecycle.planning.selected_index)


def run_on_backend(graph: cudnn.pygraph, feeds: Mapping[cudnn.Tensor, torch.Tensor],
                   outputs: Iterable[cudnn.Tensor],
                   heuristics: list[cudnn.heur_mode] | None = None,
                   ) -> tuple[list[torch.Tensor], str]:
    """Plan, build and execute `graph` on the GPU; returns the output buffers (in the order
    of `outputs`) and the name of the plan that ran."""
    outputs = list(outputs)
    plan = plan_on_backend(graph, heuristics)
    buffers = [empty_like_ir(t) for t in outputs]
    size = graph.get_workspace_size()
    workspace = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")
    graph.execute({**feeds, **dict(zip(outputs, buffers))}, workspace)
    torch.cuda.synchronize()
    return buffers, plan


def ir_input(graph: cudnn.pygraph, value: torch.Tensor, name: str,
             data_type: cudnn.data_type | None = None) -> cudnn.Tensor:
    """An IR graph input with `value`'s dims, strides and dtype."""
    dt = data_type or next(d for d, t in TORCH_DTYPE.items() if t == value.dtype)
    return graph.tensor(dim=list(value.shape), stride=list(value.stride()), data_type=dt,
                        name=name)
