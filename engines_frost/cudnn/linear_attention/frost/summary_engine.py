"""The FROST summary engine shared by gdn_summary_frost, kda_summary_frost and
gdn2_summary_frost: `<family>_summary` and `<family>_summary_bwd` nodes on the FROST
forward/backward kernels (kernels/summary.py says how).

- check_support: summary_gates.py on the facts, then the graph's handle device, then the
  runtime probe (torch + CUDA, a kernel build for the SM, the CuTe DSL), as la_engine.py.
- build_plan: fixes the device and the exact workspace (kernels/summary.py layout; unset
  dtypes are sized at their widest) and what every port's buffer must look like.
- execute: the caller's buffers go straight to frost_summary / frost_summary_bwd on the
  context's stream (ValueError names a port whose buffer the kernels cannot take as it
  is); scratch is carved from the caller's workspace.
- direct_launch (unless LANE_ENV=0): frost_summary's checks and kernel lookups done once
  (kernels/summary.py bind_summary; the backward's, without a transition, bind_summary_bwd
  on kernels/bwd.py bind_bwd), so a cached torch-op call takes the op's launch lane
  (ops/_launch_lane.py) as the forward's does: per call only the scratch views, the zero
  / identity fills and the launches. On by default since the H200 run: bitwise what
  execute writes, the summary call's host time 0.79 -> 0.31 ms (GDN, 1 x 32768 tokens).
"""
from __future__ import annotations

from typing import Any, ClassVar

from cudnn import behavior_note
from cudnn.engines.base import (BaseEngine, CompiledPlan, DirectLaunch, PlanConfig,
                                resolve_node_buffers)
from cudnn.linear_attention.common.facts import LinearAttentionFacts, linear_attention_facts
from cudnn.linear_attention.common.port_buffers import PortBuffer, checked_tensors
from cudnn.linear_attention.common.port_dtypes import IO
from cudnn.linear_attention.common.switches import binary_switch
from cudnn.linear_attention.common.torch_buffers import torch_stream

from . import la_engine, runtime_probe
from .direct_launch import bound_direct_launch
from .engine_gates import FamilyTraits
from .summary_gates import summary_decline_reason, summary_dtypes
from .workspace import carve_scratch

_FORWARD = (("k", "v", "g", "beta", "w", "cu_seqlens", "initial_state"),
            ("final_state", "transition"))
_BACKWARD = (("q", "k", "g", "beta", "cu_seqlens", "dO", "d_final_state"),
             ("d_initial_state", "transition"))
#: unset or 1: summary plans offer a direct launch (module docstring); 0: not
LANE_ENV = "CUDNN_FROST_SUMMARY_LANE"


def lane_enabled() -> bool:
    return binary_switch(LANE_ENV, default=True)


class FrostSummaryEngine(BaseEngine):
    traits: ClassVar[FamilyTraits]
    behavior_notes = (behavior_note.RUNTIME_COMPILATION,)

    def check_support(self, graph) -> None:
        la_engine.raise_unless_served(
            graph, self.name, summary_decline_reason(linear_attention_facts(graph), self.traits, self.name))

    def build_plan(self, graph, plan: PlanConfig, ctx=None) -> CompiledPlan:
        self.check_support(graph)
        handle = getattr(ctx, "handle", None)
        device = la_engine._build_device(graph.handle if handle is None else handle, self.name)
        if runtime_probe.kernel_arch(device) is None:
            raise NotImplementedError(runtime_probe.arch_reason(self.name, device))
        return FrostSummaryPlan(self.name, self.traits, linear_attention_facts(graph), device)


class FrostSummaryPlan(CompiledPlan):
    def __init__(self, engine: str, traits: FamilyTraits, facts: LinearAttentionFacts,
                 device: Any) -> None:
        from .kernels.summary import no_output_requested, summary_workspace_layout

        self.engine, self.traits, self.facts, self.device = engine, traits, facts, device
        self.backward = facts.kind.value == "summary_bwd"
        # FROST_SUMMARY_NO_OUTPUT, read once here: it decides the workspace layout, so every
        # call of this plan runs the passes it was sized for (execute passes it on)
        self.no_output = not self.backward and no_output_requested()
        inputs, outputs = _BACKWARD if self.backward else _FORWARD
        rules = summary_dtypes(traits)
        self.ports = []
        for direction, names, wired in (("input", inputs, facts.node.inputs),
                                        ("output", outputs, facts.node.outputs)):
            for port in names:
                if port in wired:
                    rule = rules.ports[port]
                    declared = wired[port].data_type
                    if not self.ports:  # k or q: its dtype is the io dtype of the others
                        rule = rules.io_dtypes
                    dtypes = IO if rule is IO else ((declared,) if declared else rule)
                    self.ports.append(PortBuffer(direction, port, tuple(wired[port].dim),
                                                 dtypes))
        self.workspace_size = int(summary_workspace_layout(self._widest_shape())[1])

    def _widest_shape(self):
        """The layout's shape with unset dtypes at their widest (an upper bound)."""
        from .kernels.summary import SummaryShape

        f, t = self.facts, self.traits

        def name(port: str, widest: str) -> str:
            dt = f.dtype(port)
            return widest if dt is None else {"BFLOAT16": "bfloat16", "HALF": "float16",
                                              "FLOAT": "float32"}.get(dt.name, widest)
        state = "d_initial_state" if self.backward else "final_state"
        return SummaryShape(
            backward=self.backward, T=f.total_t, N=f.n_seq, HO=f.h_o, HK=f.h_k,
            H_or_HV=f.h_q if self.backward else f.h_v, K=f.d_qk, V=f.d_v, io="bfloat16",
            state=name(state, "float32"),
            transition=name("transition", "float32") if f.has_output("transition") else None,
            gate_per_channel=t.gate_per_channel, beta_per_channel=t.beta_per_channel,
            beta=name("beta", "float32"), no_output=self.no_output)

    def get_workspace_size(self) -> int:
        return self.workspace_size

    def execute(self, graph, data, ctx) -> None:
        if ctx.has_overrides:
            raise ValueError(f"{self.engine}: execute-time shape/stride overrides are not "
                             "supported; the plan runs the graph's declared dims")
        node = resolve_node_buffers(graph, data, ctx)[self.facts.node]
        # the first port (k or q) fixes the io dtype of the others
        t = checked_tensors(self.engine, self.ports, lambda p: (
            node.input(p.port) if p.direction == "input" else node.output(p.port)), self.device)
        scratch = carve_scratch(self.engine, ctx.workspace, self.workspace_size, self.device)
        from .kernels import summary
        common = dict(g=t["g"], beta=t["beta"], cu_seqlens=t["cu_seqlens"],
                      transition=t.get("transition"), workspace=scratch,
                      use_l2norm=self.facts.flags.use_qk_l2norm,
                      gate_per_channel=self.traits.gate_per_channel,
                      beta_per_channel=self.traits.beta_per_channel,
                      stream=torch_stream(ctx.stream, self.device))
        if self.backward:
            summary.frost_summary_bwd(q=t["q"], k=t["k"], dO=t["dO"],
                                      d_final_state=t.get("d_final_state"),
                                      d_initial_state=t["d_initial_state"],
                                      scale=float(self.facts.flags.scale), **common)
        else:
            summary.frost_summary(k=t["k"], v=t["v"], w=t.get("w"),
                                  initial_state=t.get("initial_state"),
                                  final_state=t["final_state"], no_output=self.no_output, **common)

    def direct_launch(self, graph, data) -> DirectLaunch | None:
        """frost_summary (frost_summary_bwd) for buffers laid out like `data`'s, its checks
        done here once (module docstring; direct_launch.py builds it); None with
        LANE_ENV=0, in strict cu_seqlens mode (execute checks the table on every call),
        for buffers that are not plain torch tensors, for a backward with a transition
        and for calls with nothing to launch."""
        if not lane_enabled():
            return None
        from .kernels import summary
        flags = dict(use_l2norm=self.facts.flags.use_qk_l2norm,
                     gate_per_channel=self.traits.gate_per_channel,
                     beta_per_channel=self.traits.beta_per_channel)
        if self.backward:
            bind, flags["scale"] = summary.bind_summary_bwd, float(self.facts.flags.scale)
        else:
            # the plan's own reading of the switch (at build): its workspace is sized by it
            bind, flags["no_output"] = summary.bind_summary, self.no_output
        inputs, outputs = _BACKWARD if self.backward else _FORWARD
        return bound_direct_launch(
            self.facts.node, (*inputs, *outputs), data, self.workspace_size,
            lambda operands, workspace: bind(**operands, workspace=workspace, **flags))

    def __repr__(self) -> str:
        return f"FrostSummaryPlan({self.engine}, {self.device})"
