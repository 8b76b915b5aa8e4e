"""The torch side of one linear-attention family: what the op factory needs beyond the op
spec.

An `OpFamily` wraps the family record of cudnn.ops (`Family`: gate shapes, extra ports)
with what only the torch ops have: the public function's name, the dtype contract of the
op's tensor arguments (the ops never convert; docs/LINEAR_ATTENTION.md §5), the order of the family's gate
flags in the op signatures (docs/LINEAR_ATTENTION.md §5) and the chunk its backward can reuse forward
checkpoints at. Ports, shapes and flag rules are the OpSpecs' (`forward_spec`,
`backward_spec`): the ops check calls against them (_checks.py) and build their graphs
with the matching pygraph builders, so gdn.py, kda.py and gdn2.py hold only what differs.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

import cudnn
from cudnn.linear_attention.ops._signature import OpSignature
from cudnn.ops.linear_attention import spec_of
from cudnn.ops.linear_attention_family import Family, Kind
from cudnn.ops.op_spec import OpSpec


class DtypeRule(enum.Enum):
    """Which dtype an argument must have relative to the others (beyond the op spec's
    "a floating dtype"); the op never converts (callers convert)."""
    LIKE_Q = "q's dtype"
    FP32_OR_Q = "float32 or q's dtype"
    LIKE_STATE = "the state dtype (initial_state's, float32 without one)"

    def allowed(self, q_dtype: torch.dtype, state_dtype: torch.dtype) -> tuple[torch.dtype, ...]:
        if self is DtypeRule.LIKE_Q:
            return (q_dtype,)
        if self is DtypeRule.FP32_OR_Q:
            return (torch.float32, q_dtype)
        return (state_dtype,)

    def describe(self, q_dtype: torch.dtype, state_dtype: torch.dtype) -> str:
        names = sorted({str(d).removeprefix("torch.") for d in self.allowed(q_dtype, state_dtype)})
        return f"{self.value} ({' or '.join(names)})"


#: The op's dtype contract for the arguments every family shares.
SHARED_DTYPES: Mapping[str, DtypeRule] = {
    "k": DtypeRule.LIKE_Q, "v": DtypeRule.LIKE_Q, "dO": DtypeRule.LIKE_Q,
    "d_final_state": DtypeRule.LIKE_STATE, "state_checkpoints": DtypeRule.FP32_OR_Q,
    "values": DtypeRule.LIKE_Q,
}

#: op argument -> graph attribute, where the spellings differ (docs/LINEAR_ATTENTION.md §5 vs §1.3).
GRAPH_ATTR_NAMES: Mapping[str, str] = {
    "use_qk_l2norm_in_kernel": "use_qk_l2norm",
    "use_beta_sigmoid_in_kernel": "use_beta_sigmoid",
}
#: op arguments that steer the op itself rather than describe the graph's node.
NOT_GRAPH_ATTRS = frozenset({"checkpoint_dtype", "plan_name"})

#: "values" (u_t per token, the graph's values output) is written only for the training
#: path's backward (_op_factory.py, "Training checkpoints"); the public functions never
#: return it.
FORWARD_RESULTS = ("o", "final_state", "state_checkpoints", "values")
#: forward result -> graph output port.
FORWARD_PORTS: Mapping[str, str] = {"o": "O", "final_state": "final_state",
                                    "state_checkpoints": "state_checkpoints", "values": "values"}
#: gradient result -> (graph output port, primal argument).
GRADIENTS: Mapping[str, tuple[str, str]] = {
    "dq": ("dQ", "q"), "dk": ("dK", "k"), "dv": ("dV", "v"), "dg": ("dG", "g"),
    "dbeta": ("dBeta", "beta"), "dw": ("dW", "w"),
    "d_initial_state": ("d_initial_state", "initial_state"),
    "d_a_log": ("d_a_log", "a_log"), "d_dt_bias": ("d_dt_bias", "dt_bias"),
}
_GATE_PORTS = ("g", "beta", "w")


@dataclass(frozen=True)
class OpFamily:
    """The torch ops of one ops `Family`."""
    family: Family
    #: public function name; the custom ops are cudnn::<name>_fwd / _bwd.
    name: str
    #: the op's dtype contract for the family's gates (g is the spec's "floating" only).
    gate_dtypes: Mapping[str, DtypeRule]
    #: the family's gate flags, in the order its op signatures take them.
    gate_flags: tuple[str, ...]
    #: forward checkpoints are reused by the backward when their cadence is a multiple.
    checkpoint_chunk: int

    @property
    def forward_spec(self) -> OpSpec:
        return spec_of(self.family, Kind.FWD)

    @property
    def backward_spec(self) -> OpSpec:
        return spec_of(self.family, Kind.BWD)

    def builder(self, spec: OpSpec) -> Callable[..., Any]:
        """The pygraph builder method of `spec`'s node."""
        return getattr(cudnn.pygraph, spec.name)

    @property
    def gate_names(self) -> tuple[str, ...]:
        ports = {p.name for p in self.forward_spec.ports}
        return tuple(p for p in _GATE_PORTS if p in ports)

    def dtype_rule(self, port: str) -> DtypeRule | None:
        return self.gate_dtypes.get(port) or SHARED_DTYPES.get(port)

    @property
    def gradient_results(self) -> tuple[str, ...]:
        gates = tuple(f"d{name}" for name in self.gate_names)
        return ("dq", "dk", "dv", *gates, "d_initial_state", "d_a_log", "d_dt_bias")

    def forward_signature(self) -> OpSignature:
        return OpSignature(
            ("q", "k", "v", *self.gate_names, "cu_seqlens", "scale", "initial_state",
             "output_final_state", "use_qk_l2norm_in_kernel", "batch_invariant",
             *self.gate_flags, "a_log", "dt_bias", "checkpoint_every_n_tokens",
             "checkpoint_dtype", "plan_name", "output_values"),
            FORWARD_RESULTS)

    def serve_signature(self) -> OpSignature:
        """The serving forward (inference only): the forward's arguments plus the state
        pool's; it writes the pool (initial_state) in place under overwrite_initial_state."""
        return OpSignature((*self.forward_signature().names, "overwrite_initial_state",
                            "state_indices"), FORWARD_RESULTS, mutated=("initial_state",))

    def backward_signature(self) -> OpSignature:
        return OpSignature(
            ("dO", "q", "k", "v", *self.gate_names, "cu_seqlens", "scale", "initial_state",
             "d_final_state", "state_checkpoints", "values", "checkpoint_every_n_tokens",
             "use_qk_l2norm_in_kernel", "batch_invariant", *self.gate_flags, "a_log",
             "dt_bias", "plan_name"),
            self.gradient_results)
