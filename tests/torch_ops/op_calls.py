"""Calling the torch ops on `tests.reference.inputs.Inputs`, and comparing with the
float64 references: shared by the CPU (reference-engine) and GPU op tests.

`call_op(inputs, requires_grad=...)` runs the family's public function with every flag the
input config carries (the reference spelling mapped to the op spelling) and
`output_final_state=True`; `leaves(inputs)` gives differentiable copies of the primals.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from cudnn.linear_attention import ops
from tests.reference.compare import rel_err
from tests.reference.inputs import Inputs
from tests.reference.preprocess import Family

FUNCTIONS = {Family.GDN: ops.gated_delta_net, Family.KDA: ops.kimi_delta_attention,
             Family.GDN2: ops.gated_delta_net_v2}
#: primals that receive gradients, in LinearAttentionGrads naming.
GRAD_FIELDS = {"q": "dq", "k": "dk", "v": "dv", "g": "dg", "beta": "dbeta", "w": "dw",
               "initial_state": "d_initial_state", "a_log": "d_a_log", "dt_bias": "d_dt_bias"}


def leaves(inputs: Inputs) -> Inputs:
    """A copy whose floating primals are fresh leaves that require grad."""
    def leaf(t: torch.Tensor | None) -> torch.Tensor | None:
        if t is None or not t.is_floating_point():
            return t
        return t.detach().clone().requires_grad_(True)

    fields = {f.name: leaf(getattr(inputs, f.name)) for f in dataclasses.fields(inputs)
              if f.name != "config"}
    return Inputs(config=inputs.config, **fields)


def op_kwargs(inputs: Inputs, **extra: Any) -> dict[str, Any]:
    c = inputs.config
    kwargs = dict(scale=c.scale, initial_state=inputs.initial_state, output_final_state=True,
                  use_qk_l2norm_in_kernel=c.use_qk_l2norm,
                  use_beta_sigmoid_in_kernel=c.use_beta_sigmoid,
                  allow_neg_eigval=c.allow_neg_eigval, safe_gate=c.safe_gate,
                  gate_domain=c.gate_domain, a_log=inputs.a_log, dt_bias=inputs.dt_bias)
    if c.family is not Family.GDN:
        kwargs["gate_lower_bound"] = c.gate_lower_bound
    kwargs.update(extra)
    return kwargs


def call_op(inputs: Inputs, **extra: Any) -> tuple[torch.Tensor, ...]:
    return FUNCTIONS[inputs.config.family](*inputs.args(), **op_kwargs(inputs, **extra))


def train_step(inputs: Inputs, dO: torch.Tensor, d_final: torch.Tensor, training: bool = False) -> None:
    """call_op, then autograd's backward of (o, final_state) against (dO, d_final), with the
    opt-in training checkpoints set to `training` for the forward (and restored after)."""
    previous = ops.set_training_checkpoints(training)
    try:
        o, final = call_op(inputs)
    finally:
        ops.set_training_checkpoints(previous)
    torch.autograd.backward([o, final], [dO, d_final])


def grads_of(inputs: Inputs) -> dict[str, torch.Tensor]:
    """{LinearAttentionGrads field: .grad} of every leaf primal (None where none arrived)."""
    return {field: getattr(inputs, name).grad for name, field in GRAD_FIELDS.items()
            if getattr(inputs, name) is not None}


def worst_errors(actual: dict[str, torch.Tensor], expected: Any) -> dict[str, float]:
    """rel_err per gradient name (expected: a LinearAttentionGrads)."""
    return {name: rel_err(value, getattr(expected, name)) for name, value in actual.items()}
