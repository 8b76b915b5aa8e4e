"""The cuTile linear-attention engine shared by GDN and KDA (kernels/fwd.py, kernels/bwd.py).

One engine per family (gdn_engine.py, kda_engine.py) declares only its family; gating,
workspace sizing and buffer plumbing live here.  Plans compile lazily: cuTile JITs each
kernel at its first launch (cached per configuration), so build_plan only fixes the
scratch layout; `get_workspace_size` is that layout's exact size.  The layout depends on
the q/k/v dtype (KDA float16 adds fp32 input copies, kernels/input_staging.py), so an
unset io dtype plans for bfloat16 and execute insists the buffers match the plan.
"""
from __future__ import annotations

from typing import ClassVar

from cudnn import behavior_note
from cudnn.engines.base import BaseEngine, CompiledPlan, PlanConfig, resolve_node_buffers
from cudnn.linear_attention.common import cost_model as la_cost
from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.linear_attention.common.torch_buffers import (as_torch, handle_device_reason,
                                                        torch_stream)
from cudnn.ops.linear_attention_family import KDA_FAMILY, Family

from .engine_gates import decline_reason, runtime_reason
from .kernel_cache import first_run


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
        return _LinearAttentionPlan(linear_attention_facts(graph), self.family is KDA_FAMILY)


def check_io_dtypes(node_name: str, planned, **buffers) -> None:
    """q/k/v buffers must have the dtype the plan's scratch layout was sized for."""
    for port, buf in buffers.items():
        if buf.dtype != planned:
            raise ValueError(f"{node_name}: '{port}' is {buf.dtype} but the plan was built for "
                             f"{planned} q/k/v (set the graph tensor's data_type to match)")


class _LinearAttentionPlan(CompiledPlan):
    def __init__(self, facts, kda: bool) -> None:
        import torch

        from .kernels.bwd import bwd_layout
        from .kernels.fwd import fwd_layout
        self.facts, self.kda = facts, kda
        f = facts
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
        f = self.facts
        buf = resolve_node_buffers(graph, data)[f.node]
        t = as_torch
        scratch = self.layout.carve(t(ctx.workspace) if ctx.workspace is not None else None)
        stream = torch_stream(ctx.stream)
        common = dict(kda=self.kda, scale=float(f.flags.scale), use_l2norm=f.flags.use_qk_l2norm,
                      stream=stream)
        q, k, v, g, beta, cu = (t(buf.input(p), p) for p in ("q", "k", "v", "g", "beta",
                                                          "cu_seqlens"))
        if not q.is_cuda:
            raise ValueError(f"{f.node_name}: the cuTile engine needs CUDA buffers; "
                             f"'q' is on {q.device}")
        check_io_dtypes(f.node_name, self.io_dtype, q=q, k=k, v=v)
        h0 = t(buf.inputs.get("initial_state"))
        family = getattr(f.family, "name", f.family)
        what = (f"{family} {'backward' if f.is_backward else 'forward'} (T={f.total_t}, "
                f"N={f.n_seq}, H={f.h_q}, HV={f.h_v}, K={f.d_qk}, V={f.d_v})")
        with first_run(self, what, q.device):
            self._run(f, buf, q, k, v, g, beta, cu, h0, scratch, common)

    def _run(self, f, buf, q, k, v, g, beta, cu, h0, scratch, common) -> None:
        t = as_torch
        from .kernels.bwd import chunked_bwd
        from .kernels.fwd import chunked_fwd
        if f.is_backward:
            d_out = t(buf.input("dO"))
            check_io_dtypes(f.node_name, self.io_dtype, dO=d_out)
            chunked_bwd(q, k, v, g, beta, cu, d_out, t(buf.output("dQ")),
                        t(buf.output("dK")), t(buf.output("dV")), t(buf.output("dG")),
                        t(buf.output("dBeta")), scratch, initial_state=h0,
                        d_final_state=t(buf.inputs.get("d_final_state")),
                        d_initial_state=t(buf.outputs.get("d_initial_state")), **common)
        else:
            chunked_fwd(q, k, v, g, beta, cu, t(buf.output("O")), scratch, initial_state=h0,
                        final_state=t(buf.outputs.get("final_state")), **common)
