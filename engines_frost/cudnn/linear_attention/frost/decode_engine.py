"""`gdn_frost_decode`, `kda_frost_decode`, `gdn2_frost_decode`: the recurrent kernel
(kernels/decode.py) as the serving engine of each family's forward node.

Serves any THD batch (decode_gates.py says what it declines) and is ranked first for
decode-shaped graphs (T <= 16 N). State pools: the graph's initial_state is the pool
[S, HO, V, K] and state_indices [N] picks each sequence's row; under
overwrite_initial_state the final state goes back into the initial_state buffer (a
final_state buffer, when bound, must be that same memory). A slot outside [0, S) skips its
sequence (zero output rows, no state row touched).
- execute: the caller's buffers are checked against the graph and go to `frost_decode`;
- direct_launch: the same checks once (`bind_decode`); the DirectLaunch then passes base
  addresses to the compiled kernel and nothing else: no synchronisation, no allocation,
  which is what a CUDA-graph capture of the torch op needs.
"""
from __future__ import annotations

import operator
from typing import Any, ClassVar

from cudnn import behavior_note
from cudnn.engines.base import BaseEngine, CompiledPlan, DirectLaunch, PlanConfig, resolve_node_buffers
from cudnn.linear_attention.common import cost_model as la_cost
from cudnn.linear_attention.common.facts import LinearAttentionFacts, linear_attention_facts
from cudnn.linear_attention.common.torch_buffers import torch_stream

from . import runtime_probe
from .decode_gates import decline_reason, decode_dtypes, predict_seconds
from .engine_gates import GDN, GDN2, KDA, FamilyTraits
from .la_engine import _build_device, _port_buffers, raise_unless_served
from cudnn.linear_attention.common.port_buffers import checked_tensors

_INPUTS = ("q", "k", "v", "g", "beta", "w", "cu_seqlens", "initial_state", "a_log", "dt_bias",
           "state_indices")
_OUTPUTS = ("O", "final_state", "state_checkpoints")
#: graph port -> the launcher's operand name, where they differ
_OPERAND_OF = {"O": "out", "state_checkpoints": "checkpoints"}


class FrostDecodeEngine(BaseEngine):
    traits: ClassVar[FamilyTraits]
    behavior_notes = (behavior_note.RUNTIME_COMPILATION,)
    predict_source = "frost decode: state traffic at 4.3 TB/s + a step per token; ranked " \
                     "first for T <= 16 N (decode_gates.py)"

    def check_support(self, graph) -> None:
        raise_unless_served(graph, self.name,
                            decline_reason(linear_attention_facts(graph), self.traits, self.name))

    def predict_time(self, graph, plan: PlanConfig) -> float | None:
        f = linear_attention_facts(graph)
        if decline_reason(f, self.traits, self.name):
            return None
        chunked = [t for t in (la_cost.predict_seconds(graph, la_cost.FROST_H200),
                               la_cost.predict_seconds(graph, la_cost.CUTILE_H200))
                   if t is not None]
        return predict_seconds(f, min(chunked) if chunked else None)

    def build_plan(self, graph, plan: PlanConfig, ctx=None) -> CompiledPlan:
        self.check_support(graph)
        handle = getattr(ctx, "handle", None)
        device = _build_device(graph.handle if handle is None else handle, self.name)
        arch = runtime_probe.kernel_arch(device)
        if arch is None:
            raise NotImplementedError(runtime_probe.arch_reason(self.name, device))
        return _DecodePlan(self.name, self.traits, linear_attention_facts(graph), device)


class _DecodePlan(CompiledPlan):
    """The recurrent kernel bound to one device; immutable after build."""

    def __init__(self, engine: str, traits: FamilyTraits, facts: LinearAttentionFacts,
                 device: Any) -> None:
        self.engine, self.traits, self.facts, self.device = engine, traits, facts, device
        dtypes = decode_dtypes(traits)
        self.ports = _port_buffers(facts, _WithDtypes(traits, dtypes), _INPUTS, _OUTPUTS)
        wired = {**facts.node.inputs, **facts.node.outputs}
        self._uids = {p.port: wired[p.port].uid for p in self.ports}

    def execute(self, graph, data, ctx) -> None:
        if ctx.has_overrides:
            raise ValueError(f"{self.engine}: execute-time shape/stride overrides are not "
                             "supported; the plan runs the graph's declared dims")
        node = resolve_node_buffers(graph, data)[self.facts.node]
        t = checked_tensors(self.engine, self.ports, lambda p: _buffer(node, p), self.device)
        from .kernels.decode import frost_decode
        frost_decode(**self._operands(t), **self._flags(), scale=float(self.facts.flags.scale),
                     stream=torch_stream(ctx.stream, self.device))

    def direct_launch(self, graph, data) -> DirectLaunch | None:
        import torch

        buffers = {}
        for port, uid in self._uids.items():
            buf = data.get(uid)
            if buf is not None and type(buf) is not torch.Tensor:
                return None
            buffers[port] = buf
        operands = self._operands(buffers)
        from .kernels.decode import DECODE_OPERANDS, bind_decode
        bound = bind_decode(**operands, **self._flags())
        present = [(port, uid) for port, uid in self._uids.items() if buffers[port] is not None]
        # ABI slot -> position of its address in the launch's list (len(present): absent,
        # the 0 appended below); under overwrite the final state slot takes the pool's
        given = {_OPERAND_OF.get(port, port): i for i, (port, _) in enumerate(present)}
        overwrite = self._overwrite_slot()
        if overwrite is not None:
            given[DECODE_OPERANDS[overwrite[1]]] = given[DECODE_OPERANDS[overwrite[0]]]
        take = operator.itemgetter(*[given.get(name, len(present)) for name in DECODE_OPERANDS])
        run = bound.with_scale(float(self.facts.flags.scale))

        def launch(addresses, _workspace, stream: int) -> None:
            run(take((*addresses, 0)), stream)
        return DirectLaunch(uids=tuple(uid for _, uid in present),
                            alignment=tuple(buffers[p].data_ptr() & 15 for p, _ in present),
                            launch=launch, takes_addresses=True)

    def _overwrite_slot(self) -> tuple[int, int] | None:
        if not self.facts.flags.overwrite_initial_state:
            return None
        from .kernels.decode import DECODE_OPERANDS
        return DECODE_OPERANDS.index("initial_state"), DECODE_OPERANDS.index("final_state")

    def _operands(self, t: dict) -> dict:
        """The launcher's operands from {graph port: tensor}; under overwrite_initial_state
        the final state is written into the initial_state buffer."""
        ops = {_OPERAND_OF.get(p, p): t.get(p) for p in _INPUTS + _OUTPUTS}
        if self.facts.flags.overwrite_initial_state:
            h0, ht = ops["initial_state"], ops["final_state"]
            if ht is not None and h0 is not None and ht.data_ptr() != h0.data_ptr():
                raise ValueError(f"{self.engine}: overwrite_initial_state=True writes the final "
                                 "state into the initial_state buffer; the final_state buffer "
                                 "bound must be that same memory (or left unbound)")
            ops["final_state"] = h0
        return ops

    def _flags(self) -> dict:
        f = self.facts.flags
        return dict(family=self.traits.family.prefix, use_l2norm=f.use_qk_l2norm,
                    checkpoint_every=f.checkpoint_every_n_tokens, beta_sigmoid=f.use_beta_sigmoid,
                    neg_eigval=f.allow_neg_eigval, safe_gate=f.safe_gate,
                    gate_lower_bound=-5.0 if f.gate_lower_bound is None else f.gate_lower_bound,
                    linear_gate=f.gate_domain == "linear")

    def __repr__(self) -> str:
        return f"_DecodePlan({self.engine}, {self.device})"


class _WithDtypes:
    """FamilyTraits with the decode kernel's dtype table (for la_engine._port_buffers)."""

    def __init__(self, traits: FamilyTraits, dtypes) -> None:
        self.family, self.dtypes = traits.family, dtypes


def _buffer(node: Any, p) -> Any:
    """The caller's buffer of port `p` (final_state only when bound: overwrite may leave it)."""
    if p.direction == "input":
        return node.input(p.port)
    return node.outputs.get(p.port) if p.port == "final_state" else node.output(p.port)


class GdnFrostDecodeEngine(FrostDecodeEngine):
    name = "gdn_frost_decode"
    traits = GDN


class KdaFrostDecodeEngine(FrostDecodeEngine):
    name = "kda_frost_decode"
    traits = KDA


class Gdn2FrostDecodeEngine(FrostDecodeEngine):
    name = "gdn2_frost_decode"
    traits = GDN2
