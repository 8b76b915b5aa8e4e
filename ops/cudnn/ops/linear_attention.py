"""OpSpecs of the 20 linear-attention ops (python-engine-only, THD layout).

Five families (GDN, KDA, GDN2, GDP, Mamba-2) x four kinds (forward, backward, span
summary, summary backward). One port/attr catalogue plus a `Family` record
(linear_attention_family.py) generate all twenty, with their shape rules and checks
(linear_attention_rules.py) and support rules (linear_attention_requirements.py).
Call style: ports positionally in declared order, then attrs; `name`,
`compute_data_type`, `out_dims` keyword-only. The builder returns every declared output
in order, None where its presence condition is false.
"""
from __future__ import annotations

import math

from cudnn.ops.data_types import FLOATING, INDEX, data_type
from cudnn.ops.linear_attention_family import (GDN2_FAMILY, GDN_FAMILY, GDP_FAMILY, KDA_FAMILY,
                                               MAMBA2_FAMILY, SUFFIX, Family, Kind,
                                               node_type_of)
from cudnn.ops.linear_attention_requirements import requirements
from cudnn.ops.linear_attention_rules import (infer_checkpoints, infer_final_state, infer_o,
                                              infer_summary_state, infer_transition,
                                              make_check)
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, OpGroup, OpSpec,
                               OutputSpec, PortSpec, ReturnStyle)
from cudnn.ops.rules import all_of, like, when_input, when_positive, when_true

_REQUIRED = frozenset({"q", "k", "v", "g", "beta", "w", "a", "cu_seqlens", "dO"})


def _port(name: str, fam: Family) -> PortSpec:
    ranks = {
        "q": (3,), "k": (3, 4) if fam.householder else (3,),
        "v": (3, 4) if fam.householder else (3,),
        "g": (3,) if fam.per_channel_gate else (2,),
        "beta": (3,) if fam.per_channel_beta else ((2, 3) if fam.householder else (2,)),
        "w": (3,), "cu_seqlens": (1,), "initial_state": (4,), "a_log": (1,),
        "dt_bias": (2,) if fam.per_channel_gate else (1,), "state_indices": (1,),
        "dO": (3,), "state_checkpoints": (4,), "values": (3,), "d_final_state": (4,), "a": (1,),
        "d": (1, 2), "z": (3,), "O_pre": (3,),
    }[name]
    dtypes = {"cu_seqlens": INDEX, "state_indices": frozenset({data_type.INT32})}.get(
        name, FLOATING)
    return PortSpec(name, required=name in _REQUIRED, ranks=ranks, dtypes=dtypes)


def _port_names(fam: Family, kind: Kind) -> tuple[str, ...]:
    if fam.mamba:
        return {
            Kind.FWD: ("q", "k", "v", "g", "a", "cu_seqlens", "initial_state", "dt_bias", "d",
                       "z", "state_indices"),
            Kind.BWD: ("q", "k", "v", "g", "a", "cu_seqlens", "dO", "state_checkpoints",
                       "initial_state", "d_final_state", "dt_bias", "d", "z", "O_pre"),
            Kind.SUMMARY: ("k", "v", "g", "a", "cu_seqlens", "initial_state", "dt_bias"),
            Kind.SUMMARY_BWD: ("q", "k", "g", "a", "cu_seqlens", "dO", "d_final_state",
                               "dt_bias"),
        }[kind]
    w = ("w",) if fam.has_w else ()
    return {
        Kind.FWD: ("q", "k", "v", "g", "beta", *w, "cu_seqlens", "initial_state", "a_log",
                   "dt_bias", "state_indices"),
        Kind.BWD: ("q", "k", "v", "g", "beta", *w, "cu_seqlens", "dO", "state_checkpoints",
                   "initial_state", "d_final_state", "a_log", "dt_bias", *_values(fam)),
        Kind.SUMMARY: ("k", "v", "g", "beta", *w, "cu_seqlens", "initial_state", "a_log",
                       "dt_bias"),
        # the state-gradient recurrence needs neither v nor w
        Kind.SUMMARY_BWD: ("q", "k", "g", "beta", "cu_seqlens", "dO", "d_final_state",
                           "a_log", "dt_bias"),
    }[kind]


def _values(fam: Family) -> tuple[str, ...]:
    """The forward's `values` output / the backward's `values` input (the delta rule's
    corrected values u_t, docs/LINEAR_ATTENTION.md §3.8) where the family has them
    (Family.has_values), last among ports and attributes so positional calls of the older
    signature keep their meaning."""
    return ("values",) if fam.has_values else ()


def _bool(name: str, default: bool = False, doc: str = "") -> AttrSpec:
    return AttrSpec(name, AttrKind.BOOL, default=default, doc=doc)


_ATTRS: dict[str, AttrSpec] = {a.name: a for a in (
    AttrSpec("num_householder", AttrKind.INT, default=1, minimum=1,
             doc="GDP: Householder sub-steps n per real token"),
    AttrSpec("scale", AttrKind.FLOAT, doc="readout scale; None means 1/sqrt(K)"),
    _bool("output_final_state", doc="emit final_state"),
    _bool("output_transition", doc="summaries: emit transition"),
    _bool("use_qk_l2norm", doc="L2-normalize q and k rows in the kernel"),
    AttrSpec("checkpoint_every_n_tokens", AttrKind.INT, default=0, minimum=0,
             doc="state checkpoint cadence; > 0 emits/consumes state_checkpoints"),
    _bool("use_beta_sigmoid", doc="beta holds logits"),
    _bool("allow_neg_eigval", doc="beta_eff = 2 sigmoid(beta); needs use_beta_sigmoid"),
    _bool("beta_guard", doc="GDN2 erase-side safeguard"),
    _bool("safe_gate", doc="g holds raw logits through the family's safe gate"),
    AttrSpec("gate_domain", AttrKind.STR, default="log", choices=("log", "linear"),
             doc="'log': g = ln(alpha); 'linear': g = alpha"),
    AttrSpec("gate_lower_bound", AttrKind.FLOAT,
             doc="safe-gate lower bound (log space); engines use -5.0 when None"),
    _bool("batch_invariant", doc="per-sequence results independent of batch composition"),
    _bool("overwrite_initial_state", doc="final state written into the initial_state buffer"),
    _bool("dt_softplus", default=True, doc="Mamba-2: softplus on dt"),
    AttrSpec("dt_min", AttrKind.FLOAT, default=0.0, doc="Mamba-2: dt clamp low"),
    AttrSpec("dt_max", AttrKind.FLOAT, default=math.inf, doc="Mamba-2: dt clamp high"),
    _bool("output_pre_gate", doc="Mamba-2: emit O_pre (needs z)"),
    _bool("output_values", doc="emit values, u_t per token (needs checkpoint_every_n_tokens > 0)"),
)}


def _attr_names(fam: Family, kind: Kind) -> tuple[str, ...]:
    if fam.mamba:
        dt = ("dt_softplus", "dt_min", "dt_max")
        return {
            Kind.FWD: ("output_final_state", "checkpoint_every_n_tokens", *dt,
                       "output_pre_gate", "batch_invariant", "overwrite_initial_state"),
            Kind.BWD: ("checkpoint_every_n_tokens", *dt, "batch_invariant",
                       "overwrite_initial_state"),
            Kind.SUMMARY: ("output_transition", *dt, "batch_invariant"),
            Kind.SUMMARY_BWD: ("output_transition", *dt, "batch_invariant"),
        }[kind]
    gate = ("use_beta_sigmoid", "allow_neg_eigval", *(("beta_guard",) if fam.beta_guard else ()),
            "safe_gate", "gate_domain", *(("gate_lower_bound",) if fam.lower_bound else ()))
    n = ("num_householder",) if fam.householder else ()
    if kind in (Kind.FWD, Kind.BWD):
        final = ("output_final_state",) if kind is Kind.FWD else ()
        values = tuple(f"output_{v}" for v in _values(fam)) if kind is Kind.FWD else ()
        return (*n, "scale", *final, "use_qk_l2norm", "checkpoint_every_n_tokens", *gate,
                "batch_invariant", "overwrite_initial_state", *values)
    scale = ("scale",) if kind is Kind.SUMMARY_BWD else ()
    return (*n, "output_transition", *scale, "use_qk_l2norm", *gate, "batch_invariant")


def _grad(name: str, primal: str, optional: bool) -> OutputSpec:
    return OutputSpec(name, present=when_input(primal) if optional else None,
                      infer=like(primal), dtype_like=primal if optional else None)


def _outputs(fam: Family, kind: Kind) -> tuple[OutputSpec, ...]:
    transition = OutputSpec("transition", present=when_true("output_transition"),
                            infer=infer_transition(fam))
    if kind is Kind.FWD:
        outs = [OutputSpec("O", infer=infer_o(fam)),
                OutputSpec("final_state", present=when_true("output_final_state"),
                           infer=infer_final_state(fam)),
                OutputSpec("state_checkpoints", present=when_positive("checkpoint_every_n_tokens"),
                           infer=infer_checkpoints(fam))]
        if fam.mamba:
            outs.append(OutputSpec("O_pre", present=all_of(when_true("output_pre_gate"),
                                                           when_input("z")),
                                   infer=infer_o(fam)))
        for name in _values(fam):
            outs.append(OutputSpec(name, present=when_true("output_values"), infer=infer_o(fam)))
        return tuple(outs)
    if kind is Kind.SUMMARY:
        return (OutputSpec("final_state", infer=infer_summary_state("v")), transition)
    if kind is Kind.SUMMARY_BWD:
        return (OutputSpec("d_initial_state", infer=infer_summary_state("dO")), transition)
    grads = [_grad("dQ", "q", False), _grad("dK", "k", False), _grad("dV", "v", False),
             _grad("dG", "g", False)]
    if fam.mamba:
        grads += [OutputSpec("dA", infer=like("a"), dtype_like="a"),
                  _grad("d_initial_state", "initial_state", True),
                  _grad("d_dt_bias", "dt_bias", True), _grad("dD", "d", True),
                  _grad("dZ", "z", True)]
    else:
        grads.append(_grad("dBeta", "beta", False))
        if fam.has_w:
            grads.append(_grad("dW", "w", False))
        grads += [_grad("d_initial_state", "initial_state", True),
                  _grad("d_a_log", "a_log", True), _grad("d_dt_bias", "dt_bias", True)]
    return tuple(grads)


_SUMMARY = {Kind.FWD: "forward", Kind.BWD: "backward", Kind.SUMMARY: "span summary",
            Kind.SUMMARY_BWD: "span summary backward"}


def _spec(fam: Family, kind: Kind) -> OpSpec:
    ports = tuple(_port(p, fam) for p in _port_names(fam, kind))
    attrs = tuple(_ATTRS[a] for a in _attr_names(fam, kind))
    return OpSpec(
        name=fam.prefix + SUFFIX[kind], group=OpGroup.LINEAR_ATTENTION,
        node_type=node_type_of(fam, kind), ports=ports, attrs=attrs,
        outputs=_outputs(fam, kind),
        call=CallStyle(positional=tuple(p.name for p in ports) + tuple(a.name for a in attrs),
                       keyword_only=(BuilderKeyword.NAME.value,
                                     BuilderKeyword.COMPUTE_DATA_TYPE.value,
                                     BuilderKeyword.OUT_DIMS.value)),
        returns=ReturnStyle.LIST, backend_method=None, python_only=True,
        check=make_check(fam, kind), rules=requirements(fam, kind),
        summary=f"{fam.prefix.upper()} {_SUMMARY[kind]} (THD, python-engine-only)")


GDN = _spec(GDN_FAMILY, Kind.FWD)
GDN_BWD = _spec(GDN_FAMILY, Kind.BWD)
GDN_SUMMARY = _spec(GDN_FAMILY, Kind.SUMMARY)
GDN_SUMMARY_BWD = _spec(GDN_FAMILY, Kind.SUMMARY_BWD)
KDA = _spec(KDA_FAMILY, Kind.FWD)
KDA_BWD = _spec(KDA_FAMILY, Kind.BWD)
KDA_SUMMARY = _spec(KDA_FAMILY, Kind.SUMMARY)
KDA_SUMMARY_BWD = _spec(KDA_FAMILY, Kind.SUMMARY_BWD)
GDN2 = _spec(GDN2_FAMILY, Kind.FWD)
GDN2_BWD = _spec(GDN2_FAMILY, Kind.BWD)
GDN2_SUMMARY = _spec(GDN2_FAMILY, Kind.SUMMARY)
GDN2_SUMMARY_BWD = _spec(GDN2_FAMILY, Kind.SUMMARY_BWD)
GDP = _spec(GDP_FAMILY, Kind.FWD)
GDP_BWD = _spec(GDP_FAMILY, Kind.BWD)
GDP_SUMMARY = _spec(GDP_FAMILY, Kind.SUMMARY)
GDP_SUMMARY_BWD = _spec(GDP_FAMILY, Kind.SUMMARY_BWD)
MAMBA2 = _spec(MAMBA2_FAMILY, Kind.FWD)
MAMBA2_BWD = _spec(MAMBA2_FAMILY, Kind.BWD)
MAMBA2_SUMMARY = _spec(MAMBA2_FAMILY, Kind.SUMMARY)
MAMBA2_SUMMARY_BWD = _spec(MAMBA2_FAMILY, Kind.SUMMARY_BWD)

SPECS: tuple[OpSpec, ...] = (
    GDN, GDN_BWD, KDA, KDA_BWD, GDN2, GDN2_BWD,
    GDN_SUMMARY, GDN_SUMMARY_BWD, KDA_SUMMARY, KDA_SUMMARY_BWD,
    GDN2_SUMMARY, GDN2_SUMMARY_BWD, GDP, GDP_BWD, GDP_SUMMARY, GDP_SUMMARY_BWD,
    MAMBA2, MAMBA2_BWD, MAMBA2_SUMMARY, MAMBA2_SUMMARY_BWD,
)


def spec_of(fam: Family, kind: Kind) -> OpSpec:
    """The OpSpec of one (family, kind)."""
    return _BY_NAME[fam.prefix + SUFFIX[kind]]


_BY_NAME = {spec.name: spec for spec in SPECS}
