"""OpSpecs of the six captured SDPA variants (group "sdpa").

Call style: the variant's core tensors positionally (`POSITIONAL`), every other argument
keyword-only. `_KWARGS` is the keyword matrix of docs/GRAPH_IR.md §1: one row per
keyword (a port or an attr) with the variants that accept it, in the matrix's order.
Spellings differ per variant on purpose (band bounds, sliding window, score-mod callback).
Out-direction keywords (dBias, rng_dump, score_max, ...) are caller tensors the node
writes. Python-only keywords (softmax_precision, attn_scale_prefolded, kv_mask, sf_o,
mxfp8 scale_o) make the graph python-engine-only and are never lowered.

Outputs (always returned as a list of the full arity): forward O = q dims with the last
extent of v, Stats = q dims with last 1 (FLOAT), Amax_* = [1, 1, 1, 1]; backward dQ/dK/dV
like q/k/v. Stats exists iff generate_stats is truthy, or (generate_stats not given)
iff is_inference was given as False. sdpa_mxfp8_backward infers nothing.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cudnn.ops.data_types import ANY_FLOATING, INDEX, INTEGER, data_type
from cudnn.ops.enums import attention_implementation, diagonal_alignment
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, Condition,
                               Direction, OpCall, OpGroup, OpSpec, OutputSpec, PortKind, PortSpec,
                               ReturnStyle, ShapeRule, Support)
from cudnn.ops.rules import fixed, like

F, B, F8, B8, M, MB = "sdpa", "sdpa_backward", "sdpa_fp8", "sdpa_fp8_backward", "sdpa_mxfp8", \
    "sdpa_mxfp8_backward"
ALL = (F, B, F8, B8, M, MB)

POSITIONAL: dict[str, tuple[str, ...]] = {
    F: ("q", "k", "v"),
    B: ("q", "k", "v", "o", "dO", "stats"),
    F8: ("q", "k", "v", "descale_q", "descale_k", "descale_v", "descale_s", "scale_s",
         "scale_o"),
    B8: ("q", "k", "v", "o", "dO", "stats", "descale_q", "descale_k", "descale_v", "descale_o",
         "descale_dO", "descale_s", "descale_dP", "scale_s", "scale_dQ", "scale_dK", "scale_dV",
         "scale_dP"),
    M: ("q", "k", "v", "descale_q", "descale_k", "descale_v"),
    MB: ("q", "q_T", "k", "k_T", "v", "o_f16", "dO_f16", "dO", "dO_T", "stats", "descale_q",
         "descale_q_T", "descale_k", "descale_k_T", "descale_v", "descale_dO", "descale_dO_T"),
}
_RANK4 = {"q", "k", "v", "o", "dO", "stats", "q_T", "k_T", "dO_T", "o_f16", "dO_f16"}


@dataclass(frozen=True)
class _Kwarg:
    variants: tuple[str, ...]
    port: PortSpec | None = None
    attr: AttrSpec | None = None
    #: variants whose binding requires this keyword
    required_in: tuple[str, ...] = ()

    def attr_for(self, variant: str) -> AttrSpec | None:
        if self.attr is None or variant not in self.required_in:
            return self.attr
        return replace(self.attr, required=True)

    @property
    def name(self) -> str:
        spec = self.port if self.port is not None else self.attr
        assert spec is not None
        return spec.name


def _tensor(name: str, variants: Iterable[str], **kw) -> _Kwarg:
    return _Kwarg(tuple(variants), port=PortSpec(name, **kw))


def _out(name: str, variants: Iterable[str], python_only: bool = False) -> _Kwarg:
    return _Kwarg(tuple(variants), port=PortSpec(name, direction=Direction.OUT,
                                                 python_only=python_only))


def _attr(name: str, kind: AttrKind, variants: Iterable[str], **kw) -> _Kwarg:
    return _Kwarg(tuple(variants), attr=AttrSpec(name, kind, **kw))


def _bool(name: str, variants: Iterable[str], default: bool | None = False) -> _Kwarg:
    return _attr(name, AttrKind.BOOL, variants, default=default)


def _int(name: str, variants: Iterable[str], minimum: int | None = None) -> _Kwarg:
    return _attr(name, AttrKind.INT, variants, minimum=minimum)


_NOT_BOOL = ANY_FLOATING | INTEGER
_KWARGS: tuple[_Kwarg, ...] = (
    _Kwarg(ALL, port=PortSpec("attn_scale", kind=PortKind.TENSOR_OR_SCALAR)),
    _bool("is_inference", (F, F8), default=None),
    _Kwarg((F, F8, M), attr=AttrSpec("generate_stats", AttrKind.BOOL), required_in=(M,)),
    _bool("stats_use_log2", (F, F8)),
    _attr("implementation", AttrKind.ENUM, (F, F8, M), default=attention_implementation.AUTO,
          enum_type=attention_implementation),
    _bool("unfuse_fma", (F, F8, M)),
    _bool("use_deterministic_algorithm", (B, B8, MB)),
    _tensor("bias", (F, B, F8), dtypes=_NOT_BOOL),
    _out("dBias", (B,)),
    _tensor("block_mask", (F,)),
    _bool("use_alibi_mask", (F, B, F8)),
    _bool("use_causal_mask", ALL),
    _bool("use_causal_mask_bottom_right", ALL),
    _int("sliding_window_length", (F, B), minimum=0),
    _int("sliding_window", (F8,), minimum=0),
    _attr("diagonal_alignment", AttrKind.ENUM, ALL, default=diagonal_alignment.TOP_LEFT,
          enum_type=diagonal_alignment),
    _int("diagonal_band_left_bound", (F, B, M), minimum=0),
    _int("diagonal_band_right_bound", (F, B, M), minimum=0),
    _int("left_bound", (F8, B8, MB), minimum=0),
    _int("right_bound", (F8, B8, MB), minimum=0),
    _bool("use_padding_mask", ALL),
    _tensor("seq_len_q", ALL, ranks=(1, 4), dtypes=INDEX),
    _tensor("seq_len_kv", ALL, ranks=(1, 4), dtypes=INDEX),
    _tensor("cu_seq_len_q", (F, F8, M), ranks=(1, 4), dtypes=INDEX),
    _tensor("cu_seq_len_kv", (F, F8, M), ranks=(1, 4), dtypes=INDEX),
    _int("max_total_seq_len_q", ALL, minimum=1),
    _int("max_total_seq_len_kv", ALL, minimum=1),
    _Kwarg((F, B, F8, B8, MB), port=PortSpec("dropout", kind=PortKind.MIXED_TUPLE)),
    _out("rng_dump", (F, B, F8)),
    _tensor("paged_attention_k_table", (F, F8, M)),
    _tensor("paged_attention_v_table", (F, F8, M)),
    _int("paged_attention_max_seq_len_kv", (F, F8, M), minimum=1),
    _attr("score_mod", AttrKind.CALLABLE, (F, B)),
    _attr("score_mod_bprop", AttrKind.CALLABLE, (B,)),
    _attr("fn", AttrKind.CALLABLE, (F8,)),
    _out("score_max", (F, F8)),
    _out("score_sum_exp", (F, F8)),
    _tensor("sink_token", ALL),
    _out("dSink_token", (B, B8, MB)),
    _attr("softmax_precision", AttrKind.DATA_TYPE, ALL, python_only=True,
          choices=(data_type.FLOAT, data_type.HALF),
          doc="softmax accumulator type of the python engines (FLOAT = f32 pipeline)"),
    _attr("attn_scale_prefolded", AttrKind.BOOL, ALL, default=False, python_only=True,
          doc="q was pre-multiplied by attn_scale * log2(e); attn_scale stays unset"),
    _tensor("kv_mask", (F,), python_only=True, doc="per-key mask (1 or B, 1, 1, S_kv)"),
    _out("sf_o", (F8, M), python_only=True),
    _tensor("scale_o", (M,), python_only=True, doc="mxfp8: FLOAT scale of an FP4 O"),
)


# -- outputs -----------------------------------------------------------------------
def _o_dims(call: OpCall) -> Sequence[int] | None:
    q, v = call.dim("q"), call.dim("v")
    return None if q is None or v is None else (*q[:-1], v[-1])


def _stats_dims(call: OpCall) -> Sequence[int] | None:
    q = call.dim("q")
    return None if q is None else (*q[:-1], 1)


def _stats_present(call: OpCall) -> bool:
    if call.params.get("generate_stats") is not None:
        return bool(call.params["generate_stats"])
    return call.params.get("is_inference") is False


_STATS = OutputSpec("Stats", present=Condition(
    "generate_stats, or (generate_stats not given) is_inference=False", _stats_present),
    infer=_stats_dims, fill_dtype=data_type.FLOAT)
_AMAX: ShapeRule = fixed(1, 1, 1, 1)
_GRADS = (OutputSpec("dQ", infer=like("q")), OutputSpec("dK", infer=like("k")),
          OutputSpec("dV", infer=like("v")))
OUTPUTS: dict[str, tuple[OutputSpec, ...]] = {
    F: (OutputSpec("O", infer=_o_dims), _STATS),
    B: _GRADS,
    F8: (OutputSpec("O", infer=_o_dims), _STATS, OutputSpec("Amax_S", infer=_AMAX),
         OutputSpec("Amax_O", infer=_AMAX)),
    B8: _GRADS + tuple(OutputSpec(f"amax_{n}", infer=_AMAX) for n in ("dQ", "dK", "dV", "dP")),
    M: (OutputSpec("O", infer=_o_dims), _STATS, OutputSpec("Amax_O", infer=_AMAX)),
    MB: tuple(OutputSpec(n) for n in ("dQ", "dK", "dV", "amax_dQ", "amax_dK", "amax_dV")),
}


# -- checks ----------------------------------------------------------------------------
def _check(call: OpCall) -> None:
    q, k, v = call.dim("q"), call.dim("k"), call.dim("v")
    if q is not None and k is not None:
        if k[0] != q[0]:
            raise call.fail("k", f"batch k.dim[0] == q.dim[0] = {q[0]}", f"k.dim {list(k)}")
        if k[-1] != q[-1]:
            raise call.fail("k", f"head dim k.dim[3] == q.dim[3] = {q[3]}", f"k.dim {list(k)}")
    if k is not None and v is not None and (v[0] != k[0] or v[2] != k[2]):
        raise call.fail("v", f"batch and S_kv equal to k's [{k[0]}, *, {k[2]}, *]",
                        f"v.dim {list(v)}")
    for port in ("k", "v"):
        dims = call.dim(port)
        if q is not None and dims is not None and (dims[1] == 0 or q[1] % dims[1]):
            raise call.fail(port, f"a head count dividing H_q = {q[1]} (GQA)",
                            f"{port}.dim {list(dims)}")
    if q is not None and v is not None:
        o_dims = (*q[:-1], v[-1])
        for port in ("o", "dO"):
            dims = call.dim(port)
            if dims is not None and dims != o_dims:
                raise call.fail(port, f"dims {list(o_dims)} (q with v's head dim)",
                                f"{port}.dim {list(dims)}")
    stats = call.dim("stats")
    if q is not None and stats is not None and stats != (*q[:-1], 1):
        raise call.fail("stats", f"dims {[*q[:-1], 1]}", f"stats.dim {list(stats)}")
    _check_dropout(call)


def _check_dropout(call: OpCall) -> None:
    scalars = call.params.get("dropout")
    if scalars is None:
        return
    count = len(scalars)
    items = ["tensor" if v is None else v for v in scalars]
    probability = count == 3 and isinstance(items[0], numbers.Real) and \
        items[1] == items[2] == "tensor"
    mask = count in (2, 3) and all(i == "tensor" for i in items)
    if not (probability or mask):
        raise call.fail("dropout", "(probability, seed, offset) or (mask, scale) tensors",
                        f"a {count}-tuple of {[type(i).__name__ for i in items]}")
    if probability and not 0.0 <= items[0] < 1.0:
        raise call.fail("dropout", "a probability in [0, 1)", f"{items[0]}")


def _support(variant: str) -> Support:
    def support(call: OpCall) -> Iterable[str]:
        p, has = call.params, call.has
        if variant == F8 and has("bias"):
            yield "bias is not supported on sdpa_fp8"
        if call.has_out("dSink_token") and not has("sink_token"):
            yield "dSink_token requires sink_token"
        if has("seq_len_q") != has("seq_len_kv"):
            yield "seq_len_q and seq_len_kv must be given together"
        for side in ("q", "kv"):
            if has(f"seq_len_{side}") and has(f"cu_seq_len_{side}"):
                yield f"seq_len_{side} and cu_seq_len_{side} are mutually exclusive"
        lengths = any(has(n) for n in ("seq_len_q", "seq_len_kv", "cu_seq_len_q",
                                       "cu_seq_len_kv"))
        callback = p.get("score_mod") is not None or p.get("fn") is not None
        if lengths and not p.get("use_padding_mask") and not callback:
            yield "sequence-length tensors require use_padding_mask=True"
        if p.get("paged_attention_max_seq_len_kv") is not None and not (
                has("paged_attention_k_table") and has("paged_attention_v_table")):
            yield "paged_attention_max_seq_len_kv requires both page tables"
        if p.get("use_causal_mask") and p.get("use_causal_mask_bottom_right"):
            yield "use_causal_mask and use_causal_mask_bottom_right are exclusive"
        if p.get("attn_scale_prefolded") and ("attn_scale" in p or has("attn_scale")):
            yield "attn_scale_prefolded=True requires attn_scale to stay unset"
        if variant == M and has("scale_o") and not call.has_out("sf_o"):
            yield "scale_o requires the sf_o output"
    return support


def _spec(variant: str, node_type: NodeType) -> OpSpec:
    rows = [row for row in _KWARGS if variant in row.variants]
    positional_ports = tuple(
        PortSpec(n, required=True, ranks=(4,) if n in _RANK4 else ())
        for n in POSITIONAL[variant])
    return OpSpec(
        name=variant, group=OpGroup.SDPA, node_type=node_type,
        ports=positional_ports + tuple(r.port for r in rows if r.port is not None),
        attrs=tuple(a for a in (r.attr_for(variant) for r in rows) if a is not None),
        outputs=OUTPUTS[variant],
        call=CallStyle(positional=POSITIONAL[variant],
                       keyword_only=tuple(r.name for r in rows) + (
                           BuilderKeyword.NAME.value, BuilderKeyword.COMPUTE_DATA_TYPE.value,
                           BuilderKeyword.OUT_DIMS.value)),
        returns=ReturnStyle.LIST, backend_method=variant, check=_check,
        support=_support(variant), summary=f"scaled dot-product attention ({variant})")


SDPA = _spec(F, NodeType.SDPA)
SDPA_BACKWARD = _spec(B, NodeType.SDPA_BWD)
SDPA_FP8 = _spec(F8, NodeType.SDPA_FP8)
SDPA_FP8_BACKWARD = _spec(B8, NodeType.SDPA_FP8_BWD)
SDPA_MXFP8 = _spec(M, NodeType.SDPA_MXFP8)
SDPA_MXFP8_BACKWARD = _spec(MB, NodeType.SDPA_MXFP8_BWD)

SPECS: tuple[OpSpec, ...] = (SDPA, SDPA_BACKWARD, SDPA_FP8, SDPA_FP8_BACKWARD, SDPA_MXFP8,
                             SDPA_MXFP8_BACKWARD)
