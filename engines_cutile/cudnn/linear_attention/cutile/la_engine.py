"""The cuTile linear-attention engine shared by GDN and KDA (kernels/fwd.py, kernels/bwd.py).

One engine per family (gdn_engine.py, kda_engine.py) declares only its family; gating,
workspace sizing and buffer plumbing live here.  Plans compile lazily: cuTile JITs each
kernel at its first launch (cached per configuration), so build_plan only fixes the
scratch layout; `get_workspace_size` is that layout's exact size.  The layout depends on
the q/k/v dtype (KDA float16 adds fp32 input copies, kernels/input_staging.py), so an
unset io dtype plans for bfloat16 and execute insists the buffers match the plan.
Before any launch, execute checks every caller buffer against the graph (engines_common's
port_buffers: dims, the kernels' dtypes, a stride-1 innermost dim, q's CUDA device).
"""
from __future__ import annotations

from typing import ClassVar

from cudnn import behavior_note
from cudnn.engines.base import BaseEngine, CompiledPlan, PlanConfig, resolve_node_buffers
from cudnn.linear_attention.common import cost_model as la_cost
from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.linear_attention.common.port_buffers import check_buffers, port_buffers
from cudnn.linear_attention.common.torch_buffers import (as_torch, handle_device_reason,
                                                        torch_stream)
from cudnn.ops.linear_attention_family import KDA_FAMILY, Family

from .engine_gates import PORT_DTYPES, decline_reason, runtime_reason
from .kernel_cache import first_run

# the ports each pass reads and writes (q first: its dtype is the io dtype of the others)
_FWD_PORTS = (("q", "k", "v", "g", "beta", "cu_seqlens", "initial_state"),
              ("O", "final_state"))
_BWD_PORTS = (("q", "k", "v", "g", "beta", "cu_seqlens", "dO", "initial_state",
               "d_final_state"),
              ("dQ", "dK", "dV", "dG", "dBeta", "d_initial_state"))


class CuTileLinearAttentionEngine(BaseEngine):
    family: ClassVar[Family]
    behavior_notes = (behavior_note.RUNTIME_COMPILATION,)

    def check_support(self, graph) -> None:
        reason = decline_reason(linear_attention_facts(graph), self.family, self.name) or \
            handle_device_reason(graph, self.name) or runtime_reason(self.name)
        if reason:
            raise NotImplementedError(reason)

    predict_source = f"gdn/kda cutile: {la_cost.SOURCE}"

    def predict_time(self, graph, plan: PlanConfig) -> float | None:
        """The H200 time of these kernels scaled by the graph's work (common/cost_model)."""
        return la_cost.predict_seconds(graph, la_cost.CUTILE_H200)

    def build_plan(self, graph, plan: PlanConfig, ctx=None) -> CompiledPlan:
        self.check_support(graph)
        return _LinearAttentionPlan(linear_attention_facts(graph), self.family is KDA_FAMILY,
                                    self.name)


def check_io_dtypes(node_name: str, planned, **buffers) -> None:
    """q/k/v buffers must have the dtype the plan's scratch layout was sized for."""
    for port, buf in buffers.items():
        if buf.dtype != planned:
            raise ValueError(f"{node_name}: '{port}' is {buf.dtype} but the plan was built for "
                             f"{planned} q/k/v (set the graph tensor's data_type to match)")


class _LinearAttentionPlan(CompiledPlan):
    def __init__(self, facts, kda: bool, engine: str = "cutile") -> None:
        import torch

        from .kernels.bwd import bwd_layout
        from .kernels.fwd import fwd_layout
        self.facts, self.kda, self.engine = facts, kda, engine
        f = facts
        # what every caller buffer must be before any launch: the graph's dims, the
        # kernels' dtypes, a stride-1 innermost dim, q's device
        self.ports = port_buffers(f, PORT_DTYPES, *(_BWD_PORTS if f.is_backward
                                                    else _FWD_PORTS))
        io = {data_type_name: dt for data_type_name, dt in
              (("HALF", torch.float16), ("BFLOAT16", torch.bfloat16))}
        self.io_dtype = io[f.io_dtype.name] if f.io_dtype is not None else torch.bfloat16
        common = dict(kda=kda, io_dtype=self.io_dtype, io_itemsize=2, int32_dtype=torch.int32,
                      float32_dtype=torch.float32)
        if f.is_backward:
            self.layout = bwd_layout(f.total_t, f.n_seq, f.h_q, f.h_v, f.d_qk, f.d_v, **common)
        else:
            self.layout = fwd_layout(f.total_t, f.n_seq, f.h_o, f.d_qk, f.d_v, h_q=f.h_q,
                                     hv=f.h_v, **common)

    def get_workspace_size(self) -> int:
        return self.layout.size

    def execute(self, graph, data, ctx) -> None:
        if ctx.has_overrides:
            raise ValueError(f"{self.engine}: execute-time shape/stride overrides are not "
                             "supported; the plan runs the graph's declared dims")
        f = self.facts
        buf = resolve_node_buffers(graph, data, ctx)[f.node]
        t = {p.port: as_torch(_bound(buf, p), p.port) for p in self.ports}
        q = t["q"]
        if not q.is_cuda:
            raise ValueError(f"{self.engine}: input 'q' is on {q.device}; the kernels need "
                             "CUDA buffers")
        check_buffers(self.engine, self.ports, t, q.device)
        check_io_dtypes(f.node_name, self.io_dtype, q=q)
        scratch = self.layout.carve(as_torch(ctx.workspace) if ctx.workspace is not None
                                    else None)
        common = dict(kda=self.kda, scale=float(f.flags.scale), use_l2norm=f.flags.use_qk_l2norm,
                      stream=torch_stream(ctx.stream))
        family = getattr(f.family, "name", f.family)
        what = (f"{family} {'backward' if f.is_backward else 'forward'} (T={f.total_t}, "
                f"N={f.n_seq}, H={f.h_q}, HV={f.h_v}, K={f.d_qk}, V={f.d_v})")
        with first_run(self, what, q.device):  # logs a slow first run (compiles)
            self._launch(t, scratch, common)

    def _launch(self, t, scratch, common) -> None:
        from .kernels.bwd import chunked_bwd
        from .kernels.fwd import chunked_fwd
        ins = (t["q"], t["k"], t["v"], t["g"], t["beta"], t["cu_seqlens"])
        if self.facts.is_backward:
            chunked_bwd(*ins, t["dO"], t["dQ"], t["dK"], t["dV"], t["dG"], t["dBeta"], scratch,
                        initial_state=t.get("initial_state"),
                        d_final_state=t.get("d_final_state"),
                        d_initial_state=t.get("d_initial_state"), **common)
        else:
            chunked_fwd(*ins, t["O"], scratch, initial_state=t.get("initial_state"),
                        final_state=t.get("final_state"), **common)


# ports every call binds (ValueError naming the port when absent); the others are optional
_REQUIRED = frozenset({"q", "k", "v", "g", "beta", "cu_seqlens", "dO", "O", "dQ", "dK", "dV",
                       "dG", "dBeta"})


def _bound(node, p):
    """The caller's buffer of port `p` (None for an unbound optional port)."""
    inputs = p.direction == "input"
    if p.port in _REQUIRED:
        return node.input(p.port) if inputs else node.output(p.port)
    return (node.inputs if inputs else node.outputs).get(p.port)
