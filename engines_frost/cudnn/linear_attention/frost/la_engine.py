"""The FROST linear-attention engine shared by GDN, KDA and GDN-2 (kernels/fwd.py).

One engine per family (gdn_engine.py, kda_engine.py, gdn2_engine.py) declares only its
`FamilyTraits`; gating, the per-device plan and buffer plumbing live here.
- check_support: the facts gates (engine_gates.py), then the graph's handle device, then
  the runtime probe (torch + CUDA, a kernel build for the SM, the CuTe DSL).
- build_plan: fixes the device (the build context's handle, else the graph's, else the
  current CUDA device), its kernel build, the exact workspace size reported by the
  launcher, and what every port's buffer must look like. The CuTe DSL compiles each
  kernel configuration at its first launch (cached per configuration).
- execute: the caller's buffers go straight to `frost_fwd` on the context's stream (the
  state_checkpoints output, when bound, is written by the same kernel: checkpoints.py;
  so is the values output, u_t per token, which the backward reads with them);
  ValueError names the port of a buffer the kernels cannot take as it is. Every execute
  is checked: the plan keeps nothing per call.
- direct_launch: the same checks once, for a caller that repeats a call with buffers of
  one layout (the torch ops' cached graph): a DirectLaunch over the checked kernel
  (kernels/fwd.py bind_fwd), which that caller holds.
"""
from __future__ import annotations

from typing import Any, ClassVar

from cudnn import behavior_note
from cudnn.engines.base import (BaseEngine, CompiledPlan, DirectLaunch, PlanConfig,
                                resolve_node_buffers)
from cudnn.linear_attention.common import cost_model as la_cost
from cudnn.linear_attention.common.facts import LinearAttentionFacts, linear_attention_facts
from cudnn.linear_attention.common.cu_seqlens_check import strict_requested
from cudnn.linear_attention.common.port_buffers import PortBuffer, checked_tensors, port_buffers
from cudnn.linear_attention.common.torch_buffers import handle_device_reason, torch_stream

from . import runtime_probe
from .engine_gates import FamilyTraits, decline_reason
from .workspace import carve_scratch

# Graph ports whose kernel operand (kernels/config.py OPERANDS) has another name.
_OPERAND_OF = {"O": "out"}
# Ports the forward kernel reads or writes (w only for GDN-2), q first.
_INPUTS = ("q", "k", "v", "g", "beta", "w", "cu_seqlens", "initial_state")
_OUTPUTS = ("O", "final_state", "state_checkpoints", "values")
# Every kernel operand, absent (None) until a wired port names it.
_NO_OPERANDS = dict.fromkeys(_OPERAND_OF.get(p, p) for p in _INPUTS + _OUTPUTS)
# Forward ports the kernel does not read: serving_adapter.py applies them around it.
_SERVING_INPUTS = ("a_log", "dt_bias", "state_indices")


class FrostLinearAttentionEngine(BaseEngine):
    traits: ClassVar[FamilyTraits]
    behavior_notes = (behavior_note.RUNTIME_COMPILATION,)

    def check_support(self, graph) -> None:
        raise_unless_served(graph, self.name,
                            decline_reason(linear_attention_facts(graph), self.traits, self.name))

    predict_source = f"gdn/kda/gdn2 frost: {la_cost.SOURCE}"

    def predict_time(self, graph, plan: PlanConfig) -> float | None:
        """The H200 time of these kernels scaled by the graph's work (common/cost_model)."""
        return la_cost.predict_seconds(graph, la_cost.FROST_H200)

    def build_plan(self, graph, plan: PlanConfig, ctx=None) -> CompiledPlan:
        self.check_support(graph)
        handle = getattr(ctx, "handle", None)
        handle = graph.handle if handle is None else handle
        device = _build_device(handle, self.name)
        arch = runtime_probe.kernel_arch(device)
        if arch is None:
            raise NotImplementedError(runtime_probe.arch_reason(self.name, device))
        facts = linear_attention_facts(graph)
        if facts.is_backward:
            from .bwd_plan import FrostBackwardPlan
            return FrostBackwardPlan(self.name, self.traits, facts, device, arch)
        return _FrostForwardPlan(self.name, self.traits, facts, device, arch)


class _FrostForwardPlan(CompiledPlan):
    """A forward plan bound to one device; immutable after build."""

    def __init__(self, engine: str, traits: FamilyTraits, facts: LinearAttentionFacts,
                 device: Any, arch: runtime_probe.KernelArch) -> None:
        from .kernels.fwd import frost_workspace_size
        f = facts
        self.engine, self.traits, self.facts = engine, traits, f
        self.device, self.arch = device, arch
        self.ports = _port_buffers(f, traits, _INPUTS + _SERVING_INPUTS)
        wired = {**f.node.inputs, **f.node.outputs}
        # (kernel operand name, uid) of every wired port, for direct_launch
        self._operand_uids = tuple((_OPERAND_OF.get(p.port, p.port), wired[p.port].uid)
                                   for p in self.ports if p.port not in _SERVING_INPUTS)
        from . import serving_adapter
        #: pools, overwrite or fused gates: the kernel runs inside serving_adapter.run
        self._serving = serving_adapter.needed(f)
        self.workspace_size = int(frost_workspace_size(
            total_tokens=f.total_t, num_seqs=f.n_seq, heads_q=f.h_q, heads_k=f.h_k,
            heads_v=f.h_v, head_dim_k=f.d_qk, head_dim_v=f.d_v,
            gate_per_channel=traits.gate_per_channel, beta_per_channel=traits.beta_per_channel))

    def get_workspace_size(self) -> int:
        return self.workspace_size

    def execute(self, graph, data, ctx) -> None:
        if ctx.has_overrides:
            raise ValueError(f"{self.engine}: execute-time shape/stride overrides are not "
                             "supported; the plan runs the graph's declared dims")
        f = self.facts
        node = resolve_node_buffers(graph, data, ctx)[f.node]
        t = checked_tensors(self.engine, self.ports, lambda p: _buffer(node, p), self.device)
        h0, ht = t.get("initial_state"), t.get("final_state")
        if h0 is not None and ht is not None and h0.dtype != ht.dtype:
            raise ValueError(f"{self.engine}: initial_state ({h0.dtype}) and final_state "
                             f"({ht.dtype}) buffers must share one dtype")
        scratch = carve_scratch(self.engine, ctx.workspace, self.workspace_size, self.device)
        extra = {} if scratch is None else {"workspace": scratch}
        from .kernels import fwd as kernels_fwd
        if self._serving:
            from . import serving_adapter
            serving_adapter.run(kernels_fwd.frost_fwd, t, f, self.traits.gate_per_channel,
                                {**self._flags(), **extra},
                                torch_stream(ctx.stream, self.device))
            return
        from .kernels.fwd import frost_fwd
        frost_fwd(q=t["q"], k=t["k"], v=t["v"], g=t["g"], beta=t["beta"], w=t.get("w"),
                  cu_seqlens=t["cu_seqlens"], out=t["O"], initial_state=h0, final_state=ht,
                  state_checkpoints=t.get("state_checkpoints"), values=t.get("values"),
                  stream=torch_stream(ctx.stream, self.device), **self._flags(), **extra)

    def direct_launch(self, graph, data) -> DirectLaunch | None:
        """This call's launch with its checks done once (kernels/fwd.py bind_fwd), for
        buffers laid out like `data`'s; None when a buffer is not a plain torch tensor or
        the plan needs scratch (then every call takes execute)."""
        if self._serving:  # the adapter's torch work runs on every call: execute does it
            return None
        operands = self._uid_operands(data)
        if operands is None or self.workspace_size or strict_requested():
            return None  # strict mode: every call through execute, which checks cu_seqlens
        from .kernels.fwd import bind_fwd
        bound = bind_fwd(**{**_NO_OPERANDS, **operands}, **self._flags())
        if bound is None:  # no sequences: nothing to launch, execute handles it
            return None
        present = tuple((name, uid) for name, uid in self._operand_uids
                        if operands[name] is not None)
        names = tuple(name for name, _ in present)
        by_address = bound.pointer_launch(names)
        launch = by_address or bound.buffer_launch(names)
        return DirectLaunch(
            uids=tuple(uid for _, uid in present),
            alignment=tuple(operands[name].data_ptr() & 15 for name in names),
            launch=lambda buffers, _workspace, stream: launch(buffers, stream),
            takes_addresses=by_address is not None)

    def _flags(self) -> dict:
        """frost_fwd's arguments that come from the graph, not the buffers."""
        f = self.facts
        return dict(scale=float(f.flags.scale), use_l2norm=f.flags.use_qk_l2norm,
                    gate_per_channel=self.traits.gate_per_channel,
                    beta_per_channel=self.traits.beta_per_channel,
                    batch_invariant=f.flags.batch_invariant)

    def _uid_operands(self, data) -> dict | None:
        """{kernel operand: buffer} straight from the uid-keyed variant pack when every
        buffer is a plain torch tensor, else None (execute converts the others)."""
        import torch

        operands = {}
        for name, uid in self._operand_uids:
            buf = data.get(uid)
            if buf is not None and type(buf) is not torch.Tensor:
                return None
            operands[name] = buf
        return operands

    def __repr__(self) -> str:
        return f"_FrostForwardPlan({self.engine}, {self.device}, {self.arch.variant})"


def _port_buffers(f: LinearAttentionFacts, traits: FamilyTraits, inputs=_INPUTS,
                  outputs=_OUTPUTS) -> tuple[PortBuffer, ...]:
    """What each wired port's buffer must be (engines_common's port_buffers with the
    family's dtype table); q first (its dtype is the io dtype)."""
    return port_buffers(f, traits.dtypes, inputs, outputs)


def _buffer(node: Any, p: PortBuffer) -> Any:
    """The caller's buffer of port `p`; ValueError naming it when a required one is absent
    (final_state, state_checkpoints and values are written only when the caller binds a
    buffer)."""
    if p.direction == "input":
        return node.input(p.port)
    if p.port in ("final_state", "state_checkpoints", "values"):
        return node.outputs.get(p.port)
    return node.output(p.port)


def raise_unless_served(graph, engine: str, gate_reason: str | None) -> None:
    """Every FROST engine's support rule: its own gate's reason, then the handle's device,
    then whether the CuTe DSL runtime is usable on it; NotImplementedError with the first."""
    reason = (gate_reason or handle_device_reason(graph, engine)
              or runtime_probe.runtime_reason(engine, _cuda_device_of(graph.handle)))
    if reason:
        raise NotImplementedError(reason)


def _cuda_device_of(handle: Any) -> Any:
    """The handle's CUDA device (None: no handle or no device named: the current one)."""
    device = getattr(handle, "device", None)
    return device if getattr(device, "type", None) == "cuda" else None


def _build_device(handle: Any, engine: str) -> Any:
    """The torch device a plan is built for, with its index resolved."""
    import torch
    named = getattr(handle, "device", None)
    if getattr(named, "type", "cuda") != "cuda":
        raise NotImplementedError(f"{engine}: runs on CUDA devices; the handle is on {named}")
    device = _cuda_device_of(handle)
    if device is not None and device.index is not None:
        return device
    if not torch.cuda.is_available():
        raise NotImplementedError(f"{engine}: no CUDA device is visible")
    return torch.device("cuda", torch.cuda.current_device())
