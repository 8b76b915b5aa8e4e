"""Cross-argument support rules of the linear-attention ops, as data (`Rule`s).

Each rule names the argument it constrains and says what that argument needs; a node
that breaks one is valid input no engine can run: validate() raises
cudnnGraphNotSupportedError with the reason, the facts record the engines gate on is
invalid with it, and the torch ops raise ValueError naming the argument. This table is
the only statement of these rules.
"""
from __future__ import annotations

from collections.abc import Callable

from cudnn.ops.linear_attention_family import Family, Kind
from cudnn.ops.op_spec import OpCall, Rule

_Test = Callable[[OpCall], bool]


def _requires(subject: str, needs: str, when: _Test, holds: _Test,
              label: str | None = None) -> Rule:
    """`subject` (set as `when` says; `label` in the reason) requires `needs` (`holds`)."""
    reason = f"{label or subject} requires {needs}"
    return Rule(subject, lambda call: when(call) and not holds(call), lambda call: reason)


def _given(port: str) -> _Test:
    return lambda call: call.has(port)


def _flag(attr: str) -> _Test:
    return lambda call: bool(call.param(attr))


def _safe_gate_rules(fam: Family) -> tuple[Rule, ...]:
    safe = _flag("safe_gate")
    rules = [_requires("a_log", "safe_gate=True", _given("a_log"), safe),
             _requires("dt_bias", "safe_gate=True", _given("dt_bias"), safe),
             Rule("gate_domain",
                  lambda call: call.param("gate_domain") == "linear" and bool(safe(call)),
                  lambda call: "gate_domain='linear' is incompatible with safe_gate=True")]
    if fam.lower_bound:
        rules.append(_requires("gate_lower_bound", "safe_gate=True",
                               lambda call: call.param("gate_lower_bound") is not None, safe))
    rules.append(_requires("allow_neg_eigval", "use_beta_sigmoid=True",
                           _flag("allow_neg_eigval"), _flag("use_beta_sigmoid")))
    return tuple(rules)


def _cadence(call: OpCall) -> bool:
    return (call.param("checkpoint_every_n_tokens") or 0) > 0


def _forward_rules(fam: Family) -> tuple[Rule, ...]:
    rules = [_requires("state_indices", "initial_state", _given("state_indices"),
                       _given("initial_state")),
             _requires("overwrite_initial_state", "initial_state and output_final_state=True",
                       _flag("overwrite_initial_state"),
                       lambda call: call.has("initial_state")
                       and bool(call.param("output_final_state")))]
    if fam.mamba:
        rules.append(_requires("output_pre_gate", "the z gate input", _flag("output_pre_gate"),
                               _given("z")))
    if fam.has_values:  # values are read back only together with the states they came from
        rules.append(_requires("output_values", "checkpoint_every_n_tokens > 0 (values are read "
                               "with the state checkpoints)", _flag("output_values"), _cadence))
    return tuple(rules)


def _backward_rules(fam: Family) -> tuple[Rule, ...]:
    rules = [_requires("checkpoint_every_n_tokens", "the state_checkpoints input", _cadence,
                       _given("state_checkpoints"), label="checkpoint_every_n_tokens > 0"),
             _requires("state_checkpoints", "checkpoint_every_n_tokens > 0 (their cadence)",
                       _given("state_checkpoints"), _cadence),
             _requires("overwrite_initial_state",
                       "d_final_state and initial_state (so that d_initial_state exists)",
                       _flag("overwrite_initial_state"),
                       lambda call: call.has("d_final_state") and call.has("initial_state"))]
    if fam.mamba:
        rules.append(_requires("z", "O_pre", _given("z"), _given("O_pre"),
                               label="the z-gate backward"))
    if fam.has_values:
        rules.append(_requires("values", "the state_checkpoints input (values are read with "
                               "the states they came from)", _given("values"),
                               _given("state_checkpoints")))
    return tuple(rules)


def _dt_range() -> Rule:
    return Rule("dt_min", lambda call: call.param("dt_min") > call.param("dt_max"),
                lambda call: f"dt_min ({call.param('dt_min')}) must be <= dt_max "
                             f"({call.param('dt_max')})")


def requirements(fam: Family, kind: Kind) -> tuple[Rule, ...]:
    """Every support rule of the (family, kind) op."""
    rules = () if fam.mamba else _safe_gate_rules(fam)
    if kind is Kind.FWD:
        rules += _forward_rules(fam)
    elif kind is Kind.BWD:
        rules += _backward_rules(fam)
    if fam.mamba:
        rules += (_dt_range(),)
    return rules
