"""What the FROST summary engines serve, read off the graph's facts record.

`summary_decline_reason(facts, traits, engine)` is None when kernels/summary.py can run
the gdn/kda/gdn2 `_summary` or `_summary_bwd` node exactly as described, else a message
naming the engine, the property that fails and its value. The summaries run the FROST
forward and backward kernels, so their limits are those kernels' (engine_gates.py): THD,
K and V in {64, 128}, log-domain gates, bf16/fp16 activations, fp32 gates (GDN-2's beta
and w in the io dtype), fp32 or bf16 states, in-kernel l2norm; no beta sigmoid, negative
eigenvalues, safe gate, a_log/dt_bias or beta_guard yet. Pure: no torch, no device query.
"""
from __future__ import annotations

from cudnn import data_type
from cudnn.linear_attention.common.facts import LinearAttentionFacts
from cudnn.linear_attention.common.feature_gates import unsupported_feature_reason
from cudnn.linear_attention.common.port_dtypes import IO, PortDtypes

from .engine_gates import HEAD_DIMS, INDEX_LIMIT, IO_DTYPES, STATE_DTYPES, FamilyTraits

_FP32, _INT32 = data_type.FLOAT, data_type.INT32
_UNSUPPORTED_FLAGS = ("use_beta_sigmoid", "allow_neg_eigval", "safe_gate", "beta_guard")
_UNSUPPORTED_INPUTS = ("a_log", "dt_bias")
_NOT_YET = "is not implemented by the FROST summaries in this version"
_STATE_PORTS = ("initial_state", "final_state", "d_final_state", "d_initial_state",
                "transition")


def summary_dtypes(traits: FamilyTraits) -> PortDtypes:
    """The dtype each summary port's buffer must hold (the kernels read them as they are)."""
    return PortDtypes(IO_DTYPES, {
        "q": IO, "k": IO, "v": IO, "dO": IO, "w": IO, "g": (_FP32,), "cu_seqlens": (_INT32,),
        "beta": IO if traits.beta_per_channel else (_FP32,),
        **dict.fromkeys(_STATE_PORTS, STATE_DTYPES)})


def summary_decline_reason(f: LinearAttentionFacts, traits: FamilyTraits,
                           engine: str) -> str | None:
    if not f.valid:
        return f"{engine}: {f.invalid_reason}"
    if f.family != traits.family or not f.is_summary:
        kind = f"{f.family} {f.kind.value}" if f.kind is not None else str(f.family)
        return (f"{engine}: serves {traits.family}_summary and {traits.family}_summary_bwd "
                f"nodes, not {kind}")
    return (_layout_reason(f, traits, engine)
            or unsupported_feature_reason(f, engine, flags=_UNSUPPORTED_FLAGS,
                                          inputs=_UNSUPPORTED_INPUTS, not_done=_NOT_YET)
            or _dtype_reason(f, traits, engine))


def _layout_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    """What the kernels add to the op spec (a valid facts record already guarantees THD
    ranks, gates at HO heads and K channels, and the state dims)."""
    HO, K, V, T, N = f.h_o, f.d_qk, f.d_v, f.total_t, f.n_seq
    other_name, other = ("q", f.h_q) if f.kind.value == "summary_bwd" else ("v", f.h_v)
    if f.h_k != other and max(f.h_k, other) != HO:
        # the absent q (forward) or v (backward) gets a stand-in only when this holds
        return (f"{engine}: k heads ({f.h_k}) and {other_name} heads ({other}) differ, so one "
                f"of them must have HO = {HO} heads (HK in {{H, HV}}, HO = max(H, HV))")
    for what, dim in (("K", K), ("V", V)):
        if dim not in HEAD_DIMS:
            return f"{engine}: head dim {what} = {dim} is not one of {HEAD_DIMS}"
    largest = max(T * HO * max(K, V), N * HO * max(K, V) * K)
    if largest >= INDEX_LIMIT:
        return (f"{engine}: operands of {largest} elements need 64-bit offsets (T = {T}, "
                f"N = {N}, HO = {HO}); the kernels use 32-bit ones")
    return None


def _dtype_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    reason = summary_dtypes(traits).reason(f, engine)
    if reason is None:
        h0, ht = f.dtype("initial_state"), f.dtype("final_state")
        if h0 is not None and ht is not None and h0 != ht:
            return (f"{engine}: initial_state ({h0.name}) and final_state ({ht.name}) must "
                    "share one dtype")
    return reason
