"""CPU reference engines for the span summaries and GDN-2's backward (test-only).

`<family>_summary_reference` serves the `<family>_summary` and `<family>_summary_bwd`
nodes of GDN, KDA and GDN-2 through the float64 references of tests/reference/summary.py
(explicit per-token transition matrices); `gdn2_bwd_reference` serves `gdn2_bwd` through
the hand-written recurrent backward (tests/reference/recurrent_bwd.py: an engine runs
below autograd, so it cannot differentiate the recurrence with autograd). Results are
written into the caller's buffers in their dtype.

`cp_reference_engines_installed()` installs them next to reference_engine.py's engines
(slots SUMMARY_SLOT and BACKWARD_SLOT of each family block, test-only: the shipped
manifest never holds them), so the summary ops and context parallelism run end to end
on a CPU. They decline graphs whose handle is not on the CPU and what the references do
not model (beta_guard).
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from cudnn.engines import manifest
from cudnn.engines.base import (BaseEngine, CompiledPlan, ExecutionContext, PlanConfig,
                                resolve_node_buffers)
from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.linear_attention.ops import clear_graph_caches
from cudnn.ops.linear_attention_family import Kind
from tests.reference.delta_rule import Primals
from tests.reference.preprocess import Family, Options
from tests.reference.recurrent_bwd import explicit_recurrent_grads
from tests.reference.summary import summary_bwd_reference, summary_reference
from tests.torch_ops.reference_engine import reference_engines_installed

SUMMARY_SLOT = 98
BACKWARD_SLOT = 97
_GRADIENT_PORTS = {"dQ": "dq", "dK": "dk", "dV": "dv", "dG": "dg", "dBeta": "dbeta",
                   "dW": "dw", "d_initial_state": "d_initial_state", "d_a_log": "d_a_log",
                   "d_dt_bias": "d_dt_bias"}


class _CpuReferenceEngine(BaseEngine):
    family: str = ""
    kinds: tuple[Kind, ...] = ()

    def __init__(self) -> None:
        #: the node kinds executed, in call order.
        self.calls: list[str] = []

    def check_support(self, graph: Any) -> None:
        facts = linear_attention_facts(graph)
        facts.require_valid(self.name)
        if facts.family.prefix != self.family or facts.kind not in self.kinds:
            raise NotImplementedError(f"{self.name}: serves {self.family} "
                                      f"{[k.value for k in self.kinds]}, not "
                                      f"{facts.family} {facts.kind}")
        device = getattr(graph.handle, "device", None)
        if device is None or torch.device(device).type != "cpu":
            raise NotImplementedError(f"{self.name}: runs on CPU tensors only (the graph's "
                                      f"handle names device {device})")
        if facts.flags.beta_guard:
            raise NotImplementedError(f"{self.name}: the reference does not model beta_guard")

    def build_plan(self, graph: Any, plan: PlanConfig,
                   ctx: ExecutionContext | None = None) -> CompiledPlan:
        return _Plan(self)

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        facts = linear_attention_facts(graph)
        buffers = resolve_node_buffers(graph, data)[graph.nodes[0]]
        self.calls.append(facts.kind.value)
        self.run(facts, buffers)

    def run(self, facts: Any, buffers: Any) -> None:
        raise NotImplementedError

    @staticmethod
    def options(facts: Any) -> Options:
        f = facts.flags
        return Options(scale=f.scale, use_qk_l2norm=f.use_qk_l2norm,
                       use_beta_sigmoid=f.use_beta_sigmoid, allow_neg_eigval=f.allow_neg_eigval,
                       safe_gate=f.safe_gate, gate_domain=f.gate_domain,
                       gate_lower_bound=f.gate_lower_bound if facts.family.prefix != "gdn" else None)


class _Plan(CompiledPlan):
    def __init__(self, engine: _CpuReferenceEngine) -> None:
        self.engine = engine

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        self.engine.execute(graph, data, ctx)


class _SummaryReferenceEngine(_CpuReferenceEngine):
    kinds = (Kind.SUMMARY, Kind.SUMMARY_BWD)

    def run(self, facts: Any, buffers: Any) -> None:
        family, ins = Family(self.family), buffers.inputs
        common = dict(opts=self.options(facts), a_log=ins.get("a_log"),
                      dt_bias=ins.get("dt_bias"))
        if facts.kind is Kind.SUMMARY:
            state, transition = summary_reference(
                family, ins["k"], ins["v"], ins["g"], ins["beta"], ins["cu_seqlens"],
                w=ins.get("w"), initial_state=ins.get("initial_state"), **common)
            state_port = "final_state"
        else:
            state, transition = summary_bwd_reference(
                family, ins["q"], ins["k"], ins["g"], ins["beta"], ins["cu_seqlens"],
                ins["dO"], d_final_state=ins.get("d_final_state"), **common)
            state_port = "d_initial_state"
        buffers.output(state_port).copy_(state)
        if "transition" in buffers.outputs:
            buffers.output("transition").copy_(transition)


class GdnSummaryReferenceEngine(_SummaryReferenceEngine):
    name = "gdn_summary_reference"
    family = "gdn"


class KdaSummaryReferenceEngine(_SummaryReferenceEngine):
    name = "kda_summary_reference"
    family = "kda"


class Gdn2SummaryReferenceEngine(_SummaryReferenceEngine):
    name = "gdn2_summary_reference"
    family = "gdn2"


class Gdn2BackwardReferenceEngine(_CpuReferenceEngine):
    name = "gdn2_bwd_reference"
    family = "gdn2"
    kinds = (Kind.BWD,)

    def run(self, facts: Any, buffers: Any) -> None:
        ins = buffers.inputs
        if facts.flags.checkpoint_every_n_tokens:
            raise NotImplementedError(f"{self.name}: the reference does not read checkpoints")
        x = Primals(ins["q"], ins["k"], ins["v"], ins["g"], ins["beta"], ins["cu_seqlens"],
                    w=ins["w"], initial_state=ins.get("initial_state"), a_log=ins.get("a_log"),
                    dt_bias=ins.get("dt_bias"))
        grads = explicit_recurrent_grads(self.name, Family.GDN2, self.options(facts), x,
                                         ins["dO"], ins.get("d_final_state"))
        for port, out in buffers.outputs.items():
            out.copy_(getattr(grads, _GRADIENT_PORTS[port]))


_SUMMARY = {"gdn": GdnSummaryReferenceEngine, "kda": KdaSummaryReferenceEngine,
            "gdn2": Gdn2SummaryReferenceEngine}


@contextlib.contextmanager
def cp_reference_engines_installed() -> Iterator[None]:
    """reference_engine.py's engines plus the summary engines and GDN-2's backward."""
    with reference_engines_installed():
        installed = manifest.MANIFEST
        patched = []
        for family in installed:
            extra = []
            if family.name in _SUMMARY:
                cls = _SUMMARY[family.name]
                extra.append(manifest.EngineSlot(cls.name, SUMMARY_SLOT, __name__, cls.__name__))
            if family.name == "gdn2":
                extra.append(manifest.EngineSlot(Gdn2BackwardReferenceEngine.name, BACKWARD_SLOT,
                                                 __name__, Gdn2BackwardReferenceEngine.__name__))
            patched.append(dataclasses.replace(family,
                                               engine_slots=(*family.engine_slots, *extra)))
        manifest.check_manifest(patched)
        manifest.MANIFEST = tuple(patched)
        manifest.clear_engine_cache()
        clear_graph_caches()
        try:
            yield
        finally:
            manifest.MANIFEST = installed
            manifest.clear_engine_cache()
            clear_graph_caches()


def loaded_engine(family: str, name: str) -> _CpuReferenceEngine:
    """The loaded instance of engine `name` of `family` (inside the context above)."""
    fam = next(f for f in manifest.MANIFEST if f.name == family)
    engine = manifest.load_engine(fam, fam.slots[name])
    if not isinstance(engine, _CpuReferenceEngine):
        raise RuntimeError(f"engine {name} did not load: {engine}")
    return engine
