"""What the FROST forward kernels serve, read off the graph's facts record.

`decline_reason(facts, traits, engine)` returns None when `kernels.fwd.frost_fwd` can run
the node exactly as described, else a message naming the engine, the property that fails
and its value. Pure and cheap: no torch, no cutlass, no device query (that is
runtime_probe.py).

The kernels implement: the forward (kernels/fwd.py) and the backward (kernels/bwd.py); THD; one recurrence per (sequence, output
head) with HO = max(H, HV), q/k heads grouped over output heads (HK in {H, HV}, H and
HV equal or one an exact multiple of the other); K, V in {64, 128}; log-domain gates:
scalar [T, HO] (GDN) or per key channel [T, HO, K] (KDA, GDN-2); scalar beta [T, HO]
(GDN, KDA) or erase gate [T, HO, K] plus write gate w [T, HO, V] (GDN-2); in-kernel q/k
L2 norm for KDA and GDN-2; optional initial/final state. Pure pass-through: every port
must already hold the dtype the kernel reads (FAMILY_TRAITS' tables).
"""
from __future__ import annotations

from dataclasses import dataclass

from cudnn import data_type
from cudnn.engines.facts import LinearAttentionFacts
from cudnn.engines.la_feature_gates import unsupported_feature_reason
from cudnn.engines.port_dtypes import IO, PortDtypes

BF16, FP32, INT32 = data_type.BFLOAT16, data_type.FLOAT, data_type.INT32
IO_DTYPES = (BF16, data_type.HALF)
STATE_DTYPES = (FP32, BF16)         # the kernel keeps the state in fp32 registers
HEAD_DIMS = (64, 128)               # the tile shapes the kernels are instantiated for
INDEX_LIMIT = 2**31                 # the kernels address operands with 32-bit offsets

_COMMON_DTYPES = {"g": (FP32,), "cu_seqlens": (INT32,), "O": IO,
                  "initial_state": STATE_DTYPES, "final_state": STATE_DTYPES,
                  # backward nodes: gradients in their primal's dtype, state gradients as states
                  "dO": IO, "dQ": IO, "dK": IO, "dV": IO, "dG": (FP32,),
                  "d_final_state": STATE_DTYPES, "d_initial_state": STATE_DTYPES}


@dataclass(frozen=True)
class FamilyTraits:
    """How one family maps onto the one forward kernel."""
    family: str                 # facts.family
    gate_per_channel: bool      # g [T, HO, K] (else [T, HO])
    beta_per_channel: bool      # beta [T, HO, K] and w [T, HO, V] (GDN-2), else beta [T, HO]
    qk_l2norm: bool             # the kernel can normalise q/k rows itself
    dtypes: PortDtypes
    backward: bool              # kernels/bwd.py serves the family's _bwd node


GDN = FamilyTraits("gdn", gate_per_channel=False, beta_per_channel=False, qk_l2norm=True,
                   dtypes=PortDtypes(IO_DTYPES, {**_COMMON_DTYPES, "beta": (FP32,), "dBeta": (FP32,)}),
                   backward=True)
KDA = FamilyTraits("kda", gate_per_channel=True, beta_per_channel=False, qk_l2norm=True,
                   dtypes=PortDtypes(IO_DTYPES, {**_COMMON_DTYPES, "beta": (FP32,), "dBeta": (FP32,)}),
                   backward=True)
GDN2 = FamilyTraits("gdn2", gate_per_channel=True, beta_per_channel=True, qk_l2norm=True,
                    dtypes=PortDtypes(IO_DTYPES, {**_COMMON_DTYPES, "beta": IO, "w": IO, "dBeta": IO,
                                                  "dW": IO}),
                    backward=True)

# Features of the op surface the v0 kernels do not implement (each declines by name).
_UNSUPPORTED_FLAGS = ("use_beta_sigmoid", "allow_neg_eigval", "safe_gate", "beta_guard",
                      "overwrite_initial_state")
_UNSUPPORTED_INPUTS = ("state_indices", "state_checkpoints", "a_log", "dt_bias")
_NOT_YET = "is not implemented in this version"


def decline_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    """Why `engine` cannot serve the graph described by facts `f`, or None."""
    if not f.valid:
        return f"{engine}: {f.invalid_reason}"
    if f.family != traits.family:
        return f"{engine}: serves {traits.family} nodes, not {f.family}"
    if f.is_summary:
        return f"{engine}: summary nodes are not implemented (kind {f.kind.name})"
    if f.is_backward:
        if not traits.backward:
            return f"{engine}: {f.family}_bwd {_NOT_YET} (forward only)"
        if f.has_input("initial_state") != f.has_output("d_initial_state"):
            return (f"{engine}: the backward computes d_initial_state exactly when an "
                    "initial_state is given")
    return (_layout_reason(f, traits, engine) or _feature_reason(f, traits, engine)
            or _dtype_reason(f, traits, engine))


def _layout_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    if not f.thd_layout:
        return f"{engine}: needs the THD layout (rank-3 q/k/v/O)"
    if not f.gates_at_ho:
        return f"{engine}: gates must have HO = {f.h_o} heads"
    if f.h_k not in (f.h_q, f.h_v):
        return f"{engine}: k heads ({f.h_k}) must equal q heads ({f.h_q}) or v heads ({f.h_v})"
    lo, hi = sorted((f.h_q, f.h_v))
    if hi % lo:
        return (f"{engine}: q heads ({f.h_q}) and v heads ({f.h_v}) must be equal or one an "
                "exact multiple of the other")
    for what, dim in (("K", f.d_qk), ("V", f.d_v)):
        if dim not in HEAD_DIMS:
            return f"{engine}: head dim {what} = {dim} is not one of {HEAD_DIMS}"
    largest = max(f.total_t * f.h_o * max(f.d_qk, f.d_v), f.n_seq * f.h_o * f.d_v * f.d_qk)
    if largest >= INDEX_LIMIT:
        return (f"{engine}: operands of {largest} elements need 64-bit offsets (T = "
                f"{f.total_t}, N = {f.n_seq}, HO = {f.h_o}); the kernels use 32-bit ones")
    return _port_dims_reason(f, traits, engine)


def _port_dims_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    """The kernel reads every port at exactly these dims (the builders leave some free)."""
    T, HO, K, V, N = f.total_t, f.h_o, f.d_qk, f.d_v, f.n_seq
    want = {
        "g": (T, HO, K) if traits.gate_per_channel else (T, HO),
        "beta": (T, HO, K) if traits.beta_per_channel else (T, HO),
        "w": (T, HO, V), "O": (T, HO, V), "initial_state": (N, HO, V, K),
        "final_state": (N, HO, V, K), "dO": (T, HO, V), "d_final_state": (N, HO, V, K),
        "d_initial_state": (N, HO, V, K),
        "dG": (T, HO, K) if traits.gate_per_channel else (T, HO),
        "dBeta": (T, HO, K) if traits.beta_per_channel else (T, HO), "dW": (T, HO, V),
    }
    if traits.gate_per_channel and f.gate_channels != K:
        return f"{engine}: gate channels ({f.gate_channels}) must equal K ({K})"
    ports = {**f.node.inputs, **f.node.outputs}
    for port, dims in want.items():
        t = ports.get(port)
        if t is not None and tuple(t.dim) != dims:
            return f"{engine}: '{port}' must have dims {list(dims)}, got {list(t.dim)}"
    return None


def _feature_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    if f.flags.use_qk_l2norm and not traits.qk_l2norm:
        return (f"{engine}: use_qk_l2norm=True {_NOT_YET} (normalise q and k before the "
                "node, or use another engine)")
    return unsupported_feature_reason(f, engine, flags=_UNSUPPORTED_FLAGS,
                                      inputs=_UNSUPPORTED_INPUTS, not_done=_NOT_YET)


def _dtype_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    reason = traits.dtypes.reason(f, engine)
    h0, ht = f.dtype("initial_state"), f.dtype("final_state")
    # Unset is "the engine's choice" (spec 1.2); only two set, different dtypes conflict.
    if reason is None and h0 is not None and ht is not None and h0 != ht:
        return (f"{engine}: initial_state ({h0.name}) and final_state ({ht.name}) must share "
                "one dtype")
    return reason
