"""The FROST backward plan: a gdn_bwd (kda_bwd, gdn2_bwd) node bound to one device.

Built by FrostLinearAttentionEngine.build_plan for backward nodes. It fixes what every
port's buffer must look like and the exact workspace (kernels/bwd.py workspace_layout:
per-chunk states (none when the node carries the forward's state_checkpoints, which the
kernels read instead of recomputing them) and state gradients, U (none when the node
carries the forward's values too: then only the chain and grads kernels run) and dR, fp32
per-head gradients for grouped heads); execute hands the caller's buffers and the workspace straight to `frost_bwd` on
the context's stream (ValueError names a port whose buffer the kernels cannot take).

direct_launch (unless CUDNN_FROST_BWD_LANE=0; bitwise execute's gradients on the H200): frost_bwd's
checks, workspace layout and kernel lookups done once (kernels/bwd.py bind_bwd, every
stage of the call's path: states, or values with state_checkpoints, or neither with the
forward's values too; then chain and grads and, for grouped heads, the head-group sums),
so a cached torch-op backward call takes the op's launch lane (ops/_launch_lane.py) as
the forward's does: per call only the scratch views and the launches. A backward call's
checked execute costs ~0.4-1.0 ms of host time on the H200 host (bench/NOTES.md). The
kernels are the product's choice (kernels/bwd.py product_choice), fixed at the bind; the
test and bench tooling's variants (engines_frost/tests/frost_bwd_experiments.py
use_bwd_variants) reach a lane only when bound inside their block, and a lane keeps its
first call's kernels (A/B runs switch them per process).
"""
from __future__ import annotations

from typing import Any

from cudnn.engines.base import CompiledPlan, DirectLaunch, resolve_node_buffers
from cudnn.linear_attention.common.facts import LinearAttentionFacts
from cudnn.linear_attention.common.port_buffers import checked_tensors
from cudnn.linear_attention.common.switches import binary_switch
from cudnn.linear_attention.common.torch_buffers import torch_stream

from .direct_launch import bound_direct_launch
from .engine_gates import FamilyTraits
from .workspace import carve_scratch

_INPUTS = ("q", "k", "v", "g", "beta", "w", "cu_seqlens", "dO", "initial_state", "d_final_state",
           "state_checkpoints", "values")
_OUTPUTS = ("dQ", "dK", "dV", "dG", "dBeta", "dW", "d_initial_state")
# graph port -> frost_bwd keyword
_ARGUMENT = {"dQ": "dq", "dK": "dk", "dV": "dv", "dG": "dg", "dBeta": "dbeta", "dW": "dw"}
#: 1, unset or empty: backward plans offer a direct launch (module docstring); 0: not
LANE_ENV = "CUDNN_FROST_BWD_LANE"


def lane_enabled() -> bool:
    return binary_switch(LANE_ENV, default=True)


class FrostBackwardPlan(CompiledPlan):
    def __init__(self, engine: str, traits: FamilyTraits, facts: LinearAttentionFacts, device: Any,
                 arch: Any) -> None:
        from .kernels.bwd import frost_bwd_workspace_size
        from .la_engine import _port_buffers

        f = facts
        self.engine, self.traits, self.facts, self.device, self.arch = engine, traits, f, device, arch
        self.ports = _port_buffers(f, traits, _INPUTS, _OUTPUTS)
        self.workspace_size = int(frost_bwd_workspace_size(
            total_tokens=f.total_t, num_seqs=f.n_seq, heads_q=f.h_q, heads_k=f.h_k, heads_v=f.h_v,
            head_dim_k=f.d_qk, head_dim_v=f.d_v, checkpoints=f.has_input("state_checkpoints"),
            values=f.has_input("values")))

    def get_workspace_size(self) -> int:
        return self.workspace_size

    def execute(self, graph, data, ctx) -> None:
        if ctx.has_overrides:
            raise ValueError(f"{self.engine}: execute-time shape/stride overrides are not "
                             "supported; the plan runs the graph's declared dims")
        f = self.facts
        node = resolve_node_buffers(graph, data, ctx)[f.node]
        t = checked_tensors(self.engine, self.ports, lambda p: (
            node.input(p.port) if p.direction == "input" else node.output(p.port)), self.device)
        scratch = carve_scratch(self.engine, ctx.workspace, self.workspace_size, self.device)
        from .kernels.bwd import frost_bwd
        frost_bwd(
            q=t["q"], k=t["k"], v=t["v"], g=t["g"], beta=t["beta"], w=t.get("w"),
            cu_seqlens=t["cu_seqlens"], dO=t["dO"], initial_state=t.get("initial_state"),
            d_final_state=t.get("d_final_state"), d_initial_state=t.get("d_initial_state"),
            state_checkpoints=t.get("state_checkpoints"), values=t.get("values"),
            workspace=scratch, scale=float(f.flags.scale), use_l2norm=f.flags.use_qk_l2norm,
            gate_per_channel=self.traits.gate_per_channel,
            beta_per_channel=self.traits.beta_per_channel, batch_invariant=f.flags.batch_invariant,
            stream=torch_stream(ctx.stream, self.device),
            **{arg: t.get(port) for port, arg in _ARGUMENT.items()})

    def direct_launch(self, graph, data) -> DirectLaunch | None:
        """frost_bwd for buffers laid out like `data`'s, its checks, workspace layout and
        kernel lookups done here once (module docstring; direct_launch.py builds it); None
        unless LANE_ENV=1, in strict cu_seqlens mode (execute checks the table on every
        call), for buffers that are not plain torch tensors and for calls with nothing to
        launch (no sequences)."""
        if not lane_enabled():
            return None
        from .kernels.bwd import bind_bwd
        f = self.facts
        flags = dict(scale=float(f.flags.scale), use_l2norm=f.flags.use_qk_l2norm,
                     gate_per_channel=self.traits.gate_per_channel,
                     beta_per_channel=self.traits.beta_per_channel,
                     batch_invariant=f.flags.batch_invariant)

        def bind(operands: dict, workspace):
            bound = bind_bwd(**operands, workspace=workspace, **flags)
            return None if bound is None else bound.launch
        return bound_direct_launch(f.node, (*_INPUTS, *_OUTPUTS), data, self.workspace_size,
                                   bind, _ARGUMENT)

    def __repr__(self) -> str:
        return f"FrostBackwardPlan({self.engine}, {self.device}, {self.arch.variant})"
