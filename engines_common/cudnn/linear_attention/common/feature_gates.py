"""Feature declines shared by the linear-attention engines, read off the facts record.

`unsupported_feature_reason(facts, engine, flags=..., inputs=...)` names the first
feature of the node that an engine's kernels do not implement: a wired optional input
from `inputs`, a boolean attribute from `flags` set to True, a gate domain other than
'log', state checkpoints, or the forward's `values` (output_values, the backward's
`values` input) unless the engine says it serves them. Inputs come first: a_log/dt_bias are only valid together
with safe_gate, so checking them first keeps their own message reachable.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudnn.linear_attention.common.facts import LinearAttentionFacts


def unsupported_feature_reason(f: LinearAttentionFacts, engine: str, *, flags: Sequence[str],
                               inputs: Sequence[str],
                               not_done: str = "is not implemented",
                               checkpoints: bool = False, values: bool = False) -> str | None:
    """`engine: <feature> <not_done>` for the first unsupported feature, or None.
    `checkpoints`: the engine gates state checkpoints itself (cadence, dtype), so a
    checkpoint_every_n_tokens > 0 is not declined here; `values` likewise for the
    forward's values output and the backward's values input."""
    for port in inputs:
        if f.has_input(port):
            return f"{engine}: input '{port}' {not_done}"
    for name in flags:
        if getattr(f.flags, name):
            return f"{engine}: {name}=True {not_done}"
    if f.flags.gate_domain != "log":
        return f"{engine}: gate_domain={f.flags.gate_domain!r} {not_done} (only 'log')"
    if f.flags.checkpoint_every_n_tokens and not checkpoints:
        return (f"{engine}: state checkpoints (checkpoint_every_n_tokens="
                f"{f.flags.checkpoint_every_n_tokens}) {not_done}")
    if not values and (f.flags.output_values or f.has_input("values")):
        what = "output_values=True" if f.flags.output_values else "input 'values'"
        return f"{engine}: {what} (the forward's u_t per token) {not_done}"
    return None


__all__ = ["unsupported_feature_reason"]
