"""CPU reference engines for the linear-attention ops (test-only, never shipped).

`GdnReferenceEngine`, `KdaReferenceEngine` and `Gdn2ReferenceEngine` serve single-node
gdn / gdn_bwd, kda / kda_bwd and gdn2 (forward only, as the shipped engines: no gdn2_bwd
engine exists yet) graphs whose buffers live on the CPU, through the float64 references of
tests/reference, writing results into the caller's buffers in their dtype. Forward runs
the token-by-token recurrence; backward runs the chunked algebra's explicit backward (an
op kernel runs below autograd, so the recurrent reference's autograd backward cannot run
inside it), which the tests then check against the recurrent reference's gradients.
With them installed, the whole op path (checks, graph cache, planning, execute, autograd
through the backward graph, torch.compile) runs on a CPU in CI.

`reference_engines_installed()` puts them into the router's manifest as the last slot of
each family block (a test-only override: the shipped manifest never holds them) and clears
the loaded-engine and graph caches on the way in and out.

Forward nodes with state pools, overwrite_initial_state or state checkpoints run the
serving reference (tests/reference/serving.py), writing the pool rows in place. They
decline beta_guard, checkpoints on a backward node and graphs whose handle is not on the
CPU: the ops give every graph a handle naming the device of the call's tensors. Each engine records what it executed in `calls`.
With `offers_direct_launch` set, its plans answer `direct_launch` (engine contract) by
running the same execute on the buffers they are handed, counted in `direct_calls`: the
op's launch lane runs on a CPU in CI.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, Callable

import torch

from cudnn.engines import manifest
from cudnn.engines.base import (BaseEngine, CompiledPlan, DirectLaunch, ExecutionContext,
                                PlanConfig, resolve_node_buffers)
from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.linear_attention.ops import clear_graph_caches
from cudnn.ops.linear_attention_family import Kind
from tests.reference import preprocess as pp
from tests.reference.delta_rule import Primals
from tests.reference.gdn import naive_chunk_gdn_bwd, naive_recurrent_gdn
from tests.reference.gdn2 import naive_recurrent_gdn2
from tests.reference.kda import naive_chunk_kda_bwd, naive_recurrent_kda
from tests.reference.serving import run_serving

#: The slot the reference engines take in each family block: the last one, which the
#: shipped manifest leaves free (slots fill from 0 up).
REFERENCE_SLOT = 99
#: Bytes of workspace the reference plans ask for, so the op's workspace path is used.
WORKSPACE_BYTES = 256
#: Chunk of the chunked backward: small, so the short test sequences span several chunks.
BACKWARD_CHUNK = 8
_GRADIENT_PORTS = {"dQ": "dq", "dK": "dk", "dV": "dv", "dG": "dg", "dBeta": "dbeta",
                   "dW": "dw", "d_initial_state": "d_initial_state", "d_a_log": "d_a_log",
                   "d_dt_bias": "d_dt_bias"}


class _ReferenceEngine(BaseEngine):
    family: str = ""
    forward: Callable[..., Any]
    backward: Callable[..., Any] | None = None

    def __init__(self) -> None:
        #: (kind, dtype of q, workspace bytes) per execute, in call order.
        self.calls: list[tuple[str, torch.dtype, int]] = []
        #: whether built plans offer a DirectLaunch, and how often one ran.
        self.offers_direct_launch = False
        self.direct_calls = 0

    def build_plan(self, graph: Any, plan: PlanConfig,
                   ctx: ExecutionContext | None = None) -> CompiledPlan:
        return _ReferencePlan(self)

    def check_support(self, graph: Any) -> None:
        facts = linear_attention_facts(graph)
        facts.require_valid(self.name)
        if facts.family.prefix != self.family or facts.kind not in self._kinds():
            raise NotImplementedError(f"{self.name}: serves {self.family} "
                                      f"{[k.value for k in self._kinds()]}, not "
                                      f"{facts.family} {facts.kind}")
        device = getattr(graph.handle, "device", None)
        if device is None or torch.device(device).type != "cpu":
            raise NotImplementedError(f"{self.name}: runs on CPU tensors only (the graph's "
                                      f"handle names device {device})")
        flags = facts.flags
        backward_checkpoints = facts.kind is Kind.BWD and flags.checkpoint_every_n_tokens > 0
        values = flags.output_values or facts.has_input("values")
        for what, used in (("checkpoints on a backward node", backward_checkpoints),
                           ("beta_guard", flags.beta_guard), ("the forward's values", values)):
            if used:
                raise NotImplementedError(f"{self.name}: the reference does not model {what}")

    def _kinds(self) -> tuple[Kind, ...]:
        return (Kind.FWD,) if self.backward is None else (Kind.FWD, Kind.BWD)

    def get_workspace_size(self) -> int:
        return WORKSPACE_BYTES

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        workspace = ctx.workspace
        if not isinstance(workspace, torch.Tensor) or workspace.dtype != torch.uint8 \
                or workspace.numel() < WORKSPACE_BYTES:
            raise ValueError(f"{self.name}: needs a uint8 workspace of {WORKSPACE_BYTES} "
                             f"bytes, got {workspace!r}")
        facts = linear_attention_facts(graph)
        node = graph.nodes[0]
        buffers = resolve_node_buffers(graph, data)[node]
        args = [buffers.input(p) for p in ("q", "k", "v", "g", "beta")]
        if "w" in buffers.inputs:
            args.append(buffers.input("w"))
        args.append(buffers.input("cu_seqlens"))
        options = self._options(facts, buffers.inputs)
        self.calls.append((facts.kind.value, args[0].dtype, workspace.numel()))
        if facts.kind is Kind.FWD and _serving(facts):
            self._serve(facts, buffers, args)
            return
        if facts.kind is Kind.FWD:
            o, final = self.forward(*args, output_final_state="final_state" in buffers.outputs,
                                    **options)
            buffers.output("O").copy_(o)
            if final is not None:
                buffers.output("final_state").copy_(final)
            return
        grads = self.backward(*args, buffers.input("dO"),
                              d_final_state=buffers.inputs.get("d_final_state"),
                              chunk_size=BACKWARD_CHUNK, **options)
        for port, out in buffers.outputs.items():
            out.copy_(getattr(grads, _GRADIENT_PORTS[port]))

    def _serve(self, facts: Any, buffers: Any, args: list[Any]) -> None:
        """A forward with a state pool, overwrite or checkpoints, by the serving reference;
        results written into the caller's buffers (pool rows in place)."""
        inputs, flags = buffers.inputs, facts.flags
        options = self._options(facts, inputs)
        pool = options.pop("initial_state")
        family = pp.Family(self.family)
        opts = pp.Options(**{k: options[k] for k in ("scale", "use_qk_l2norm", "use_beta_sigmoid",
                                                      "allow_neg_eigval", "safe_gate",
                                                      "gate_domain")},
                          gate_lower_bound=options.get("gate_lower_bound"))
        gates = args[3:-1]
        x = Primals(*args[:3], gates[0], gates[1], args[-1], w=gates[2] if len(gates) > 2 else None,
                    initial_state=pool, a_log=options["a_log"], dt_bias=options["dt_bias"])
        result = run_serving(self.name, family, opts, x, state_indices=inputs.get("state_indices"),
                             output_final_state="final_state" in buffers.outputs,
                             checkpoint_every_n_tokens=flags.checkpoint_every_n_tokens)
        buffers.output("O").copy_(result.o)
        target = pool if flags.overwrite_initial_state else buffers.outputs.get("final_state")
        for row, state in result.written.items():
            target[row].copy_(state)
        if result.checkpoints is not None:
            buffers.output("state_checkpoints").copy_(result.checkpoints)

    def _options(self, facts: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
        flags = facts.flags
        options = dict(scale=flags.scale, initial_state=inputs.get("initial_state"),
                       use_qk_l2norm=flags.use_qk_l2norm,
                       use_beta_sigmoid=flags.use_beta_sigmoid,
                       allow_neg_eigval=flags.allow_neg_eigval, safe_gate=flags.safe_gate,
                       gate_domain=flags.gate_domain, a_log=inputs.get("a_log"),
                       dt_bias=inputs.get("dt_bias"))
        if self.family != "gdn":
            options["gate_lower_bound"] = flags.gate_lower_bound
        return options


class _ReferencePlan(CompiledPlan):
    def __init__(self, engine: _ReferenceEngine) -> None:
        self.engine = engine

    def get_workspace_size(self) -> int:
        return self.engine.get_workspace_size()

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        self.engine.execute(graph, data, ctx)

    def direct_launch(self, graph: Any, data: Mapping[int, Any]) -> DirectLaunch | None:
        engine = self.engine
        if not engine.offers_direct_launch:
            return None
        uids = tuple(sorted(data))

        def launch(buffers: Any, workspace: Any, stream: int) -> None:
            engine.direct_calls += 1
            engine.execute(graph, dict(zip(uids, buffers)), ExecutionContext(
                workspace=workspace))
        return DirectLaunch(uids, tuple(data[uid].data_ptr() & 15 for uid in uids), launch)


class GdnReferenceEngine(_ReferenceEngine):
    name = "gdn_reference"
    family = "gdn"
    forward = staticmethod(naive_recurrent_gdn)
    backward = staticmethod(naive_chunk_gdn_bwd)


class KdaReferenceEngine(_ReferenceEngine):
    name = "kda_reference"
    family = "kda"
    forward = staticmethod(naive_recurrent_kda)
    backward = staticmethod(naive_chunk_kda_bwd)


class Gdn2ReferenceEngine(_ReferenceEngine):
    name = "gdn2_reference"
    family = "gdn2"
    forward = staticmethod(naive_recurrent_gdn2)


def _serving(facts: Any) -> bool:
    flags = facts.flags
    return (facts.uses_state_pool or flags.overwrite_initial_state
            or flags.checkpoint_every_n_tokens > 0)


_ENGINES = {"gdn": GdnReferenceEngine, "kda": KdaReferenceEngine, "gdn2": Gdn2ReferenceEngine}


@contextlib.contextmanager
def reference_engines_installed(engines: Mapping[str, type[_ReferenceEngine]] | None = None
                                ) -> Iterator[None]:
    """The manifest with each family's reference engine (`engines`: family -> class, these
    by default) in slot REFERENCE_SLOT."""
    engines = _ENGINES if engines is None else engines
    shipped = manifest.MANIFEST
    patched = []
    for family in shipped:
        cls = engines.get(family.name)
        if cls is not None:
            slot = manifest.EngineSlot(cls.name, REFERENCE_SLOT, cls.__module__, cls.__name__)
            family = dataclasses.replace(family, engine_slots=(*family.engine_slots, slot))
        patched.append(family)
    manifest.check_manifest(patched)
    manifest.MANIFEST = tuple(patched)
    manifest.clear_engine_cache()
    clear_graph_caches()
    try:
        yield
    finally:
        manifest.MANIFEST = shipped
        manifest.clear_engine_cache()
        clear_graph_caches()


def reference_engine(family: str) -> _ReferenceEngine:
    """The loaded reference engine instance of `family` (inside the context above)."""
    fam = next(f for f in manifest.MANIFEST if f.name == family)
    slot = fam.engine_slots[-1]  # the reference engine is appended last
    engine = manifest.load_engine(fam, slot)
    if not isinstance(engine, _ReferenceEngine):
        raise RuntimeError(f"the {family} reference engine did not load: {engine}")
    return engine
