"""What one linear-attention family tells the op factory: its ports, dtype rules and flags.

A `Family` is data: the graph builders of its forward and backward nodes, its gate ports
(g, beta and, for GDN-2, w) with their THD dims and dtype rules, the order of its gate
flags in the op signatures (spec §6.3), and the chunk its backward can reuse forward
checkpoints at. Everything the families share (q, k, v, states, dO, ...) is here too, so
gdn.py, kda.py and gdn2.py hold only what differs.

Dims are written in the spec's symbols: T tokens, N sequences, H / HK / HV heads of
q / k / v, HO = max(H, HV), K = q/k head dim, V = v head dim.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from cudnn.linear_attention.ops._signature import OpSignature

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INDEX_DTYPES = (torch.int32, torch.int64)


class DtypeRule(enum.Enum):
    """Which dtypes a port accepts; the op never converts (callers convert)."""
    FLOAT = "a floating dtype (float16, bfloat16, float32 or float64)"
    LIKE_Q = "q's dtype"
    FP32_OR_Q = "float32 or q's dtype"
    LIKE_STATE = "the state dtype (initial_state's, float32 without one)"
    INDEX = "int32 or int64"

    def allowed(self, q_dtype: torch.dtype, state_dtype: torch.dtype) -> tuple[torch.dtype, ...]:
        if self is DtypeRule.FLOAT:
            return FLOAT_DTYPES
        if self is DtypeRule.LIKE_Q:
            return (q_dtype,)
        if self is DtypeRule.FP32_OR_Q:
            return (torch.float32, q_dtype)
        if self is DtypeRule.LIKE_STATE:
            return (state_dtype,)
        return INDEX_DTYPES

    def describe(self, q_dtype: torch.dtype, state_dtype: torch.dtype) -> str:
        if self in (DtypeRule.FLOAT, DtypeRule.INDEX):
            return self.value
        names = sorted({str(d).removeprefix("torch.") for d in self.allowed(q_dtype, state_dtype)})
        return f"{self.value} ({' or '.join(names)})"


@dataclass(frozen=True)
class PortRule:
    name: str
    dims: tuple[str, ...]
    dtype: DtypeRule


#: Ports every family shares (cu_seqlens is checked on its own: [N + 1]).
SHARED_PORTS: Mapping[str, PortRule] = {p.name: p for p in (
    PortRule("q", ("T", "H", "K"), DtypeRule.FLOAT),
    PortRule("k", ("T", "HK", "K"), DtypeRule.LIKE_Q),
    PortRule("v", ("T", "HV", "V"), DtypeRule.LIKE_Q),
    PortRule("initial_state", ("N", "HO", "V", "K"), DtypeRule.FLOAT),
    PortRule("a_log", ("HO",), DtypeRule.FLOAT),
    PortRule("dO", ("T", "HO", "V"), DtypeRule.LIKE_Q),
    PortRule("d_final_state", ("N", "HO", "V", "K"), DtypeRule.LIKE_STATE),
    PortRule("state_checkpoints", ("rows", "HO", "V", "K"), DtypeRule.FP32_OR_Q),
)}

#: op argument -> graph attribute, where the spellings differ (spec §6.2 vs §1.3).
GRAPH_ATTR_NAMES: Mapping[str, str] = {
    "use_qk_l2norm_in_kernel": "use_qk_l2norm",
    "use_beta_sigmoid_in_kernel": "use_beta_sigmoid",
}

FORWARD_RESULTS = ("o", "final_state", "state_checkpoints")
#: forward result -> graph output port.
FORWARD_PORTS: Mapping[str, str] = {"o": "O", "final_state": "final_state",
                                    "state_checkpoints": "state_checkpoints"}
#: gradient result -> (graph output port, primal argument).
GRADIENTS: Mapping[str, tuple[str, str]] = {
    "dq": ("dQ", "q"), "dk": ("dK", "k"), "dv": ("dV", "v"), "dg": ("dG", "g"),
    "dbeta": ("dBeta", "beta"), "dw": ("dW", "w"),
    "d_initial_state": ("d_initial_state", "initial_state"),
    "d_a_log": ("d_a_log", "a_log"), "d_dt_bias": ("d_dt_bias", "dt_bias"),
}


@dataclass(frozen=True)
class Family:
    #: public function name; the custom ops are cudnn::<name>_fwd / _bwd.
    name: str
    #: the pygraph builder methods of the forward and backward nodes.
    graph_forward: Callable[..., Any]
    graph_backward: Callable[..., Any]
    #: g, beta (and w), in port order.
    gates: tuple[PortRule, ...]
    dt_bias_dims: tuple[str, ...]
    #: the family's gate flags, in the order its op signatures take them.
    gate_flags: tuple[str, ...]
    #: forward checkpoints are reused by the backward when their cadence is a multiple.
    checkpoint_chunk: int
    ports: Mapping[str, PortRule] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ports = dict(SHARED_PORTS)
        ports.update((p.name, p) for p in self.gates)
        ports["dt_bias"] = PortRule("dt_bias", self.dt_bias_dims, DtypeRule.FLOAT)
        object.__setattr__(self, "ports", ports)

    @property
    def gate_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.gates)

    @property
    def gradient_results(self) -> tuple[str, ...]:
        gates = tuple(f"d{name}" for name in self.gate_names)
        return ("dq", "dk", "dv", *gates, "d_initial_state", "d_a_log", "d_dt_bias")

    def forward_signature(self) -> OpSignature:
        return OpSignature(
            ("q", "k", "v", *self.gate_names, "cu_seqlens", "scale", "initial_state",
             "output_final_state", "use_qk_l2norm_in_kernel", "batch_invariant",
             *self.gate_flags, "a_log", "dt_bias", "checkpoint_every_n_tokens",
             "checkpoint_dtype", "plan_name"),
            FORWARD_RESULTS)

    def backward_signature(self) -> OpSignature:
        return OpSignature(
            ("dO", "q", "k", "v", *self.gate_names, "cu_seqlens", "scale", "initial_state",
             "d_final_state", "state_checkpoints", "checkpoint_every_n_tokens",
             "use_qk_l2norm_in_kernel", "batch_invariant", *self.gate_flags, "a_log",
             "dt_bias", "plan_name"),
            self.gradient_results)
