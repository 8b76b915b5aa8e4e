"""What the span-summary ops of one family take: ports, dtype rules and argument order.

A summary maps the state entering a span affinely to the state leaving it (docs/CONTEXT_PARALLEL.md):
`<family>_summary` returns the leaving state (from initial_state, or zero) and the span's
transition; `<family>_summary_bwd` returns the gradient w.r.t. the entering state and,
optionally, the transition in backward orientation. Context parallelism composes them
across ranks (cudnn.linear_attention.context_parallel).

`SummaryFamily` is data: the pygraph builders, the gate ports with their THD dims, the
order of the gate flags in the op schemas (docs/CONTEXT_PARALLEL.md) and both schemas, so summary.py
only names what differs per family. Dims in the spec's symbols: T tokens, N sequences,
HO output heads (= g.shape[1]: summaries have no q or no v to derive it from), K, V.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: (schema type, default) of every argument the summary ops take; REQUIRED has none.
REQUIRED = object()
_ARG_TYPES: dict[str, tuple[str, Any]] = {
    **{name: ("Tensor", REQUIRED) for name in ("dO", "q", "k", "v", "g", "beta", "w",
                                               "cu_seqlens")},
    "scale": ("float", REQUIRED),
    **{name: ("Tensor?", None) for name in ("initial_state", "d_final_state", "a_log",
                                            "dt_bias")},
    **{name: ("bool", False) for name in ("output_transition", "use_qk_l2norm_in_kernel",
                                          "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
                                          "beta_guard", "safe_gate", "batch_invariant")},
    "gate_lower_bound": ("float?", None),
    "gate_domain": ("str", "log"),
    "plan_name": ("str?", None),
}

#: op argument -> graph attribute where the spellings differ.
GRAPH_ATTR_NAMES = {"use_qk_l2norm_in_kernel": "use_qk_l2norm",
                    "use_beta_sigmoid_in_kernel": "use_beta_sigmoid"}
#: op arguments that steer the op, not the node.
NOT_GRAPH_ATTRS = frozenset({"plan_name"})


@dataclass(frozen=True)
class SummarySignature:
    """The ordered arguments of one summary op."""
    names: tuple[str, ...]

    @property
    def tensor_names(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if _ARG_TYPES[n][0].startswith("Tensor"))

    def schema(self) -> str:
        def one(name: str) -> str:
            kind, default = _ARG_TYPES[name]
            if default is REQUIRED:
                return f"{kind} {name}"
            literal = f'"{default}"' if isinstance(default, str) else str(default)
            return f"{kind} {name}={literal}"
        return f"({', '.join(map(one, self.names))}) -> (Tensor, Tensor)"

    def arranger(self, fixed: dict[str, Any]
                 ) -> tuple[tuple[str, ...], Callable[[Sequence[Any]], tuple[Any, ...]]]:
        """(the other arguments' names, `arrange(others)`): every value in schema order,
        the `fixed` ones as given here and the others from `others` (values in the order
        of those names), for a caller that makes the same kind of call many times (the
        positions are resolved here once; no defaults are filled in)."""
        unknown = sorted(set(fixed) - set(self.names))
        if unknown:
            raise TypeError(f"unknown arguments {unknown}")
        constant = tuple(fixed.get(n) for n in self.names)
        asked = tuple(i for i, n in enumerate(self.names) if n not in fixed)

        def arrange(others: Sequence[Any]) -> tuple[Any, ...]:
            values = list(constant)
            for i, value in zip(asked, others):
                values[i] = value
            return tuple(values)
        return tuple(self.names[i] for i in asked), arrange

    def complete(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """All values in schema order (defaults filled in, keywords placed)."""
        values = list(args) + [_ARG_TYPES[n][1] for n in self.names[len(args):]]
        for name, value in kwargs.items():
            values[self.names.index(name)] = value
        missing = [n for n, v in zip(self.names, values) if v is REQUIRED]
        if missing:
            raise TypeError(f"missing required arguments {missing}")
        return tuple(values)


@dataclass(frozen=True)
class SummaryFamily:
    #: the forward op's name stem: the ops are cudnn::<name>_summary / _summary_bwd.
    name: str
    graph_summary: Callable[..., Any]
    graph_summary_bwd: Callable[..., Any]
    #: gate port -> its dims; beta's dtype rule ("fp32_or_io" or "io").
    gate_dims: dict[str, tuple[str, ...]]
    beta_rule: str
    dt_bias_dims: tuple[str, ...]
    #: the family's gate flags in schema order (between the l2norm flag and gate_domain).
    gate_flags: tuple[str, ...]

    @property
    def gate_names(self) -> tuple[str, ...]:
        return tuple(self.gate_dims)

    def summary_signature(self) -> SummarySignature:
        return SummarySignature((
            "k", "v", *self.gate_names, "cu_seqlens", "initial_state", "output_transition",
            "use_qk_l2norm_in_kernel", *self.gate_flags, "gate_domain", "a_log", "dt_bias",
            "batch_invariant", "plan_name"))

    def summary_bwd_signature(self) -> SummarySignature:
        gates = tuple(n for n in self.gate_names if n != "w")  # the state gradient needs no w
        return SummarySignature((
            "dO", "q", "k", *gates, "cu_seqlens", "scale", "d_final_state",
            "output_transition", "use_qk_l2norm_in_kernel", *self.gate_flags, "gate_domain",
            "a_log", "dt_bias", "batch_invariant", "plan_name"))
