"""Reference engines that read only kernel dtypes, as the GPU engines do (test-only).

The plain reference engines (reference_engine.py) accept every dtype, so a call through
them never needs converting. These subclasses decline, like FROST and cuTile, any port
whose dtype their kernels would not read (engines/*/engine_gates.py tables), so the CPU
tests see the ops convert to what the planned engine reads:

- `FROST_LIKE`: g, beta, a_log, dt_bias float32 (GDN-2's beta and w in q's dtype),
  cu_seqlens int32, states float32 or bfloat16 (initial and final alike);
- `CUTILE_LIKE`: the same, with states float32 only.

q/k/v may also be float32 here (the references compute in float64 on the CPU).
"""
from __future__ import annotations

from typing import Any

import torch

from cudnn import data_type
from cudnn.engines.base import resolve_node_buffers
from cudnn.engines.facts import linear_attention_facts
from cudnn.engines.port_dtypes import IO, PortDtypes
from tests.torch_ops import reference_engine as ref

FP32, BF16, INT32 = data_type.FLOAT, data_type.BFLOAT16, data_type.INT32
IO_DTYPES = (FP32, BF16, data_type.HALF)


def _rules(states: tuple[data_type, ...], beta_like_q: bool) -> PortDtypes:
    beta = IO if beta_like_q else (FP32,)
    return PortDtypes(IO_DTYPES, {
        "g": (FP32,), "beta": beta, "w": IO, "cu_seqlens": (INT32,),
        "a_log": (FP32,), "dt_bias": (FP32,),
        "initial_state": states, "final_state": states, "d_final_state": states,
        "d_initial_state": states, "O": IO, "dO": IO, "dQ": IO, "dK": IO, "dV": IO,
        "dG": (FP32,), "dBeta": beta, "dW": IO,
    })


class _KernelDtypes:
    """Mixin: decline, as pass-through engines do, dtypes the kernels would not read; and
    record the input buffers each execute received (`seen`: port -> tensor, per call)."""
    port_dtypes: PortDtypes

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, torch.Tensor]] = []

    def execute(self, graph: Any, data: Any, ctx: Any) -> None:
        node = graph.nodes[0]
        self.seen.append(dict(resolve_node_buffers(graph, data)[node].inputs))
        super().execute(graph, data, ctx)  # type: ignore[misc]

    def check_support(self, graph: Any) -> None:
        super().check_support(graph)  # type: ignore[misc]
        facts = linear_attention_facts(graph)
        reason = self.port_dtypes.reason(facts, self.name)  # type: ignore[attr-defined]
        h0, ht = facts.dtype("initial_state"), facts.dtype("final_state")
        if reason is None and h0 is not None and ht is not None and h0 != ht:
            reason = f"{self.name}: initial_state and final_state dtypes differ"  # type: ignore[attr-defined]
        if reason is not None:
            raise NotImplementedError(reason)


def _engines(prefix: str, states: tuple[data_type, ...]) -> dict[str, type]:
    engines = {}
    for family, base in (("gdn", ref.GdnReferenceEngine), ("kda", ref.KdaReferenceEngine),
                         ("gdn2", ref.Gdn2ReferenceEngine)):
        cls = type(f"{family.capitalize()}{prefix}ReferenceEngine", (_KernelDtypes, base),
                   {"name": f"{family}_{prefix.lower()}_reference", "__module__": __name__,
                    "port_dtypes": _rules(states, family == "gdn2")})
        globals()[cls.__name__] = cls  # the manifest imports engines by module and name
        engines[family] = cls
    return engines


#: family -> engine class, for reference_engines_installed(engines=...).
FROST_LIKE = _engines("Frostlike", (FP32, BF16))
CUTILE_LIKE = _engines("Cutilelike", (FP32,))
