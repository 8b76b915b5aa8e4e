"""What the FROST forward kernels serve, read off the graph's facts record.

`decline_reason(facts, traits, engine)` returns None when `kernels.fwd.frost_fwd` can run
the node exactly as described, else a message naming the engine, the property that fails
and its value. Pure and cheap: no torch, no cutlass, no device query (that is
runtime_probe.py).

A valid facts record already guarantees what the op spec says: THD ranks, HK in
{H, HV} and q/v heads dividing HO (so H and HV are equal or one a multiple of the
other), gates with HO heads (and K channels for vector gates), states [N, HO, V, K],
outputs at the dims the op writes. On top of that the kernels (kernels/fwd.py forward,
kernels/bwd.py backward) need: K, V in {64, 128}; 32-bit offsets; no beta_guard; state
checkpoints only at the kernels' chunk cadence of 64 tokens, in bf16, and not with the
serving features (kernels/checkpoints.py: the forward writes them, the backward reads
them instead of recomputing the states), the values output (u_t per token, bf16) with
them, which the backward reads so that it runs neither its states nor its values kernel;
for the backward, log-domain gates without the
safe gate or beta sigmoid, no pools; every port already in the dtype the kernel reads
(FAMILY_TRAITS' tables). The forward serves state pools, overwrite_initial_state and the
fused gates (safe gate, beta sigmoid, linear domain) through serving_adapter.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from cudnn import data_type
from cudnn.linear_attention.common.facts import LinearAttentionFacts
from cudnn.linear_attention.common.feature_gates import unsupported_feature_reason
from cudnn.linear_attention.common.port_dtypes import IO, PortDtypes
from cudnn.ops.linear_attention_family import GDN2_FAMILY, GDN_FAMILY, KDA_FAMILY, Family

BF16, FP32, INT32 = data_type.BFLOAT16, data_type.FLOAT, data_type.INT32
IO_DTYPES = (BF16, data_type.HALF)
STATE_DTYPES = (FP32, BF16)         # the kernel keeps the state in fp32 registers
HEAD_DIMS = (64, 128)               # the tile shapes the kernels are instantiated for
INDEX_LIMIT = 2**31                 # the kernels address operands with 32-bit offsets
CHECKPOINT_CADENCE = 64             # tokens between state checkpoints: the kernels' chunk

_COMMON_DTYPES = {"g": (FP32,), "cu_seqlens": (INT32,), "O": IO, "a_log": (FP32,),
                  "dt_bias": (FP32,), "state_indices": (INT32,),
                  "initial_state": STATE_DTYPES, "final_state": STATE_DTYPES,
                  # backward nodes: gradients in their primal's dtype, state gradients as states
                  "dO": IO, "dQ": IO, "dK": IO, "dV": IO, "dG": (FP32,),
                  "d_final_state": STATE_DTYPES, "d_initial_state": STATE_DTYPES,
                  # forward output / backward input: written and read as bf16 (checkpoints.py)
                  "state_checkpoints": (BF16,),
                  # forward output / backward input with the checkpoints: u_t per token, bf16
                  "values": (BF16,)}


@dataclass(frozen=True)
class FamilyTraits:
    """What the one forward kernel does for one op family (the family's shapes come from
    its ops Family record; the kernel adds its dtypes and features)."""
    family: Family
    qk_l2norm: bool             # the kernel can normalise q/k rows itself
    dtypes: PortDtypes
    backward: bool              # kernels/bwd.py serves the family's _bwd node

    @property
    def gate_per_channel(self) -> bool:     # g [T, HO, K] (else [T, HO])
        return self.family.per_channel_gate

    @property
    def beta_per_channel(self) -> bool:     # beta [T, HO, K] and w [T, HO, V] (GDN-2)
        return self.family.per_channel_beta


GDN = FamilyTraits(GDN_FAMILY, qk_l2norm=True,
                   dtypes=PortDtypes(IO_DTYPES, {**_COMMON_DTYPES, "beta": (FP32,), "dBeta": (FP32,)}),
                   backward=True)
KDA = FamilyTraits(KDA_FAMILY, qk_l2norm=True,
                   dtypes=PortDtypes(IO_DTYPES, {**_COMMON_DTYPES, "beta": (FP32,), "dBeta": (FP32,)}),
                   backward=True)
GDN2 = FamilyTraits(GDN2_FAMILY, qk_l2norm=True,
                    dtypes=PortDtypes(IO_DTYPES, {**_COMMON_DTYPES, "beta": IO, "w": IO, "dBeta": IO,
                                                  "dW": IO}),
                    backward=True)

# Features of the op surface the kernels do not implement (each declines by name). The
# forward serves pools, overwrite and the fused gates through serving_adapter.py (torch
# around the kernel); the backward computes no gradient for them.
_UNSUPPORTED_FLAGS = ("use_beta_sigmoid", "allow_neg_eigval", "safe_gate", "beta_guard",
                      "overwrite_initial_state")
_UNSUPPORTED_INPUTS = ("state_indices", "a_log", "dt_bias")
_FORWARD_UNSUPPORTED_FLAGS = ("beta_guard",)
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
    return (_layout_reason(f, engine) or _feature_reason(f, traits, engine)
            or _dtype_reason(f, traits, engine))


def _layout_reason(f: LinearAttentionFacts, engine: str) -> str | None:
    for what, dim in (("K", f.d_qk), ("V", f.d_v)):
        if dim not in HEAD_DIMS:
            return f"{engine}: head dim {what} = {dim} is not one of {HEAD_DIMS}"
    rows = max(f.n_seq, f.state_rows or 0)  # a state pool may have more rows than sequences
    largest = max(f.total_t * f.h_o * max(f.d_qk, f.d_v), rows * f.h_o * f.d_v * f.d_qk)
    if largest >= INDEX_LIMIT:
        return (f"{engine}: operands of {largest} elements need 64-bit offsets (T = "
                f"{f.total_t}, N = {f.n_seq}, HO = {f.h_o}); the kernels use 32-bit ones")
    return None


def _feature_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    if f.flags.use_qk_l2norm and not traits.qk_l2norm:
        return (f"{engine}: use_qk_l2norm=True {_NOT_YET} (normalise q and k before the "
                "node, or use another engine)")
    if f.is_backward:
        return (unsupported_feature_reason(f, engine, flags=_UNSUPPORTED_FLAGS,
                                           inputs=_UNSUPPORTED_INPUTS, not_done=_NOT_YET,
                                           checkpoints=True, values=True)
                or _checkpoint_reason(f, engine))
    for name in _FORWARD_UNSUPPORTED_FLAGS:
        if getattr(f.flags, name):
            return f"{engine}: {name}=True {_NOT_YET}"
    return _checkpoint_reason(f, engine)


def _checkpoint_reason(f: LinearAttentionFacts, engine: str) -> str | None:
    """State checkpoints: the forward writes them and the backward reads them at a cadence
    of exactly one 64-token chunk (the layout of kernels/checkpoints.py), on the plain
    kernel path (not around serving_adapter.py)."""
    every = f.flags.checkpoint_every_n_tokens
    if not every:
        return None
    if every != CHECKPOINT_CADENCE:
        return (f"{engine}: state checkpoints (checkpoint_every_n_tokens={every}) {_NOT_YET}: "
                f"the kernels write and read them every {CHECKPOINT_CADENCE} tokens (one chunk; "
                "the recurrent engine *_frost_decode writes any cadence)")
    if not f.is_backward:
        from . import serving_adapter
        if serving_adapter.needed(f):
            return (f"{engine}: state checkpoints with a state pool, overwrite_initial_state "
                    f"or fused gates {_NOT_YET} (the recurrent engine *_frost_decode writes them)")
    return None


def _dtype_reason(f: LinearAttentionFacts, traits: FamilyTraits, engine: str) -> str | None:
    reason = traits.dtypes.reason(f, engine)
    # the kernel keeps one state dtype; unset is "the engine's choice" (state_pair_match)
    if reason is None and not f.state_pair_match:
        return (f"{engine}: initial_state ({f.dtype('initial_state').name}) and final_state "
                f"({f.dtype('final_state').name}) must share one dtype")
    return reason
