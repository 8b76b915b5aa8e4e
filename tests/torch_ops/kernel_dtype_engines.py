"""Reference engines that read only kernel dtypes, as the GPU engines do (test-only).

The plain reference engines (reference_engine.py) accept every dtype, so a call through
them never needs converting. These subclasses decline, like FROST and cuTile, any port
whose dtype their kernels would not read (the tables of engines_*/.../engine_gates.py,
restated here), so the CPU tests see the ops convert to what the planned engine reads:

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
from tests.torch_ops import reference_engine as ref

FP32, BF16, INT32 = data_type.FLOAT, data_type.BFLOAT16, data_type.INT32
IO_DTYPES = (FP32, BF16, data_type.HALF)
IO = "io"  # the port takes the q/k/v dtype


def _rules(states: tuple[data_type, ...], beta_like_q: bool) -> dict[str, Any]:
    beta = IO if beta_like_q else (FP32,)
    return {
        "g": (FP32,), "beta": beta, "w": IO, "cu_seqlens": (INT32,),
        "a_log": (FP32,), "dt_bias": (FP32,),
        "initial_state": states, "final_state": states, "d_final_state": states,
        "d_initial_state": states, "O": IO, "dO": IO, "dQ": IO, "dK": IO, "dV": IO,
        "dG": (FP32,), "dBeta": beta, "dW": IO,
    }


def _dtype_reason(facts: Any, rules: dict[str, Any], engine: str) -> str | None:
    """The first port whose dtype the kernels would not read (as engines' PortDtypes)."""
    io = facts.io_dtype
    if io is not None and io not in IO_DTYPES:
        return f"{engine}: q/k/v dtype must be {' or '.join(d.name for d in IO_DTYPES)}, " \
               f"got {io.name}"
    for port, rule in rules.items():
        dt = facts.dtype(port)
        allowed = (io,) if rule == IO else rule
        if dt is not None and dt not in allowed:
            return f"{engine}: '{port}' dtype must be {' or '.join(d.name for d in allowed)}, " \
                   f"got {dt.name}"
    h0, ht = facts.dtype("initial_state"), facts.dtype("final_state")
    if h0 is not None and ht is not None and h0 != ht:
        return f"{engine}: initial_state and final_state dtypes differ"
    return None


class _KernelDtypes:
    """Mixin: decline, as pass-through engines do, dtypes the kernels would not read; and
    record the input buffers each execute received (`seen`: port -> tensor, per call)."""
    port_dtypes: dict[str, Any]

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, torch.Tensor]] = []

    def execute(self, graph: Any, data: Any, ctx: Any) -> None:
        node = graph.nodes[0]
        self.seen.append(dict(resolve_node_buffers(graph, data)[node].inputs))
        super().execute(graph, data, ctx)  # type: ignore[misc]

    def check_support(self, graph: Any) -> None:
        super().check_support(graph)  # type: ignore[misc]
        # the facts record as the reference engines read it (wherever it lives)
        reason = _dtype_reason(ref.linear_attention_facts(graph), self.port_dtypes,
                               self.name)  # type: ignore[attr-defined]
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
