"""What the FROST recurrent (decode) kernel serves, and where the planner ranks it.

`decline_reason(facts, traits, engine)` returns None when kernels/decode.py can run the
forward node exactly as described: any THD batch of GDN, KDA or GDN-2 with K, V in
{64, 128}, state pools (state_indices), overwrite_initial_state, state checkpoints at any
cadence (io dtype or float32), the fused gates (safe_gate with a_log / dt_bias,
use_beta_sigmoid, allow_neg_eigval, gate_domain="linear") and in-kernel L2 norm; it
declines backward and summary nodes and GDN-2's beta_guard. Pure and cheap.

Ranking (`predict_seconds`): the kernel walks each sequence token by token, so its time
grows with the longest sequence while the chunked kernels' grows with the total work.
Up to DECODE_TOKENS_PER_SEQUENCE tokens per sequence on average (T <= 16 N: decode steps
and speculative decoding, read off the node's dims on the host, no synchronisation) it
is predicted faster than the chunked forward, beyond that slower; the figure itself is
the state-traffic floor plus a per-token step.
"""
from __future__ import annotations

from cudnn import data_type
from cudnn.linear_attention.common import cost_model as la_cost
from cudnn.linear_attention.common.facts import LinearAttentionFacts
from cudnn.linear_attention.common.port_dtypes import PortDtypes

from .engine_gates import HEAD_DIMS, INDEX_LIMIT, FamilyTraits

FP32, BF16, HALF, INT32 = data_type.FLOAT, data_type.BFLOAT16, data_type.HALF, data_type.INT32
#: average tokens per sequence up to which the recurrent kernel is ranked first
DECODE_TOKENS_PER_SEQUENCE = 16
#: H200 HBM3e bandwidth the state-traffic floor divides by (bytes / s)
HBM_BYTES_PER_S = 4.3e12
#: one token step of one sequence (a reduction round over the state rows, the gates), seconds
TOKEN_STEP_S = 0.4e-6


def decode_dtypes(traits: FamilyTraits) -> PortDtypes:
    """The chunked kernels' dtype table plus the serving ports (fp32 gate parameters, int32
    slots, checkpoints in the io dtype or float32: the launcher checks which io dtype)."""
    return PortDtypes(traits.dtypes.io_dtypes, {
        **traits.dtypes.ports, "a_log": (FP32,), "dt_bias": (FP32,), "state_indices": (INT32,),
        "state_checkpoints": (FP32, BF16, HALF)})


def decline_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    """Why `engine` cannot serve the graph described by facts `f`, or None."""
    if not f.valid:
        return f"{engine}: {f.invalid_reason}"
    if f.family != traits.family:
        return f"{engine}: serves {traits.family} nodes, not {f.family}"
    if f.is_summary or f.is_backward:
        return (f"{engine}: serves the forward node only (the recurrent kernel has no "
                f"backward; kind {f.kind.name})")
    for what, dim in (("K", f.d_qk), ("V", f.d_v)):
        if dim not in HEAD_DIMS:
            return f"{engine}: head dim {what} = {dim} is not one of {HEAD_DIMS}"
    rows = max(f.state_rows or 0, f.n_seq)
    largest = max(f.total_t * f.h_o * max(f.d_qk, f.d_v), rows * f.h_o * f.d_v * f.d_qk)
    if largest >= INDEX_LIMIT:
        return (f"{engine}: operands of {largest} elements need 64-bit offsets; the kernel "
                "uses 32-bit ones")
    if f.flags.beta_guard:
        return f"{engine}: beta_guard=True is not implemented in the recurrent kernel"
    if f.flags.output_values:
        return (f"{engine}: output_values=True is not implemented in the recurrent kernel "
                "(the chunked engine writes values with its checkpoints)")
    if f.flags.use_qk_l2norm and not traits.qk_l2norm:
        return f"{engine}: use_qk_l2norm=True is not implemented for {f.family}"
    ck = f.dtype("state_checkpoints")
    if ck is not None and f.io_dtype is not None and ck not in (FP32, f.io_dtype):
        return (f"{engine}: 'state_checkpoints' dtype must be FLOAT or the io dtype "
                f"{f.io_dtype.name}, got {ck.name}")
    reason = decode_dtypes(traits).reason(f, engine)
    if reason is None and not f.state_pair_match:
        return (f"{engine}: initial_state ({f.dtype('initial_state').name}) and final_state "
                f"({f.dtype('final_state').name}) must share one dtype")
    return reason


def predict_seconds(f: LinearAttentionFacts, chunked_seconds: float | None) -> float:
    """Predicted time of one call (see the module docstring); `chunked_seconds`: the
    chunked FROST forward's prediction for the same graph."""
    state = 4 if f.dtype("initial_state") in (None, FP32) else 2
    moved = f.h_o * f.d_v * f.d_qk * state * f.n_seq * (
        int(f.has_input("initial_state")) + int(f.has_output("final_state")))
    per_seq = -(-f.total_t // f.n_seq)
    own = la_cost.LAUNCH_S + moved / HBM_BYTES_PER_S + per_seq * TOKEN_STEP_S
    if chunked_seconds is None:
        return own
    if f.total_t <= DECODE_TOKENS_PER_SEQUENCE * f.n_seq:
        return min(own, 0.5 * chunked_seconds)
    return max(own, 2.0 * chunked_seconds)
