"""Custom-op signatures as data: one typed catalogue of arguments, ordered per op.

An `OpSignature` is an ordered tuple of `OpArg`s plus the names of its results. It renders
the `torch.library` schema text, and `bind()` turns what the dispatcher hands a kernel
(positional values in schema order; it leaves out trailing arguments still at their
default) into a complete `{name: value}` mapping. Families pick argument names from
`ARGS`, so one argument has one type and one default in every op that takes it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class _Required:
    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class OpArg:
    name: str
    #: torch schema type: Tensor, Tensor?, float, float?, bool, int, str, str?, ScalarType?
    schema_type: str
    default: Any = REQUIRED

    @property
    def is_tensor(self) -> bool:
        return self.schema_type.startswith("Tensor")

    def schema(self) -> str:
        text = f"{self.schema_type} {self.name}"
        if self.default is REQUIRED:
            return text
        return f"{text}={_schema_literal(self.default)}"


def _schema_literal(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _tensor(name: str) -> OpArg:
    return OpArg(name, "Tensor")


def _optional_tensor(name: str) -> OpArg:
    return OpArg(name, "Tensor?", None)


def _flag(name: str) -> OpArg:
    return OpArg(name, "bool", False)


#: Every argument of the linear-attention ops (docs/LINEAR_ATTENTION.md §5), by name.
ARGS: Mapping[str, OpArg] = {a.name: a for a in (
    *(_tensor(n) for n in ("dO", "q", "k", "v", "g", "beta", "w", "cu_seqlens")),
    OpArg("scale", "float"),
    *(_optional_tensor(n) for n in ("initial_state", "d_final_state", "state_checkpoints", "values",
                                    "a_log", "dt_bias", "state_indices")),
    _flag("output_final_state"),
    _flag("use_qk_l2norm_in_kernel"),
    _flag("batch_invariant"),
    _flag("use_beta_sigmoid_in_kernel"),
    _flag("allow_neg_eigval"),
    _flag("beta_guard"),
    _flag("safe_gate"),
    OpArg("gate_domain", "str", "log"),
    OpArg("gate_lower_bound", "float?", None),
    OpArg("checkpoint_every_n_tokens", "int", 0),
    OpArg("checkpoint_dtype", "ScalarType?", None),
    OpArg("plan_name", "str?", None),
    _flag("overwrite_initial_state"),
    _flag("output_values"),
)}


class OpSignature:
    """The ordered arguments and result names of one custom op."""

    def __init__(self, arg_names: Iterable[str], results: Sequence[str],
                 mutated: Iterable[str] = ()) -> None:
        self.args: tuple[OpArg, ...] = tuple(ARGS[name] for name in arg_names)
        #: tensor arguments the op writes in place (schema alias annotation "(a!)").
        self.mutated: tuple[str, ...] = tuple(mutated)
        self.names: tuple[str, ...] = tuple(a.name for a in self.args)
        self.results: tuple[str, ...] = tuple(results)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate argument names in {self.names}")
        self._defaults = tuple(a.default for a in self.args)
        #: positions without a default: the only ones `complete` can find missing.
        self._required = tuple(i for i, d in enumerate(self._defaults) if d is REQUIRED)
        self.tensor_names: tuple[str, ...] = tuple(a.name for a in self.args if a.is_tensor)

    def schema(self) -> str:
        args = ", ".join(map(self._annotated, self.args))
        results = ", ".join("Tensor" for _ in self.results)
        return f"({args}) -> ({results})"

    def _annotated(self, arg: OpArg) -> str:
        """The argument's schema text, with an alias annotation when the op writes it."""
        if arg.name not in self.mutated:
            return arg.schema()
        alias = "abcdefgh"[self.mutated.index(arg.name)]
        return arg.schema().replace("Tensor", f"Tensor({alias}!)", 1)

    def complete(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
                 ) -> tuple[Any, ...]:
        """All values in schema order (trailing defaults filled in, kwargs placed)."""
        values = tuple(args) + self._defaults[len(args):]
        if kwargs:
            values = list(values)
            for name, value in kwargs.items():
                values[self.names.index(name)] = value
            values = tuple(values)
        missing = [self.names[i] for i in self._required if values[i] is REQUIRED]
        if missing:
            raise TypeError(f"missing required arguments {missing}")
        return values

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
             ) -> dict[str, Any]:
        return dict(zip(self.names, self.complete(args, kwargs)))

    def positional(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """Values for every argument, in schema order, from a mapping (defaults filled)."""
        return tuple(map(values.get, self.names, self._defaults))
