"""Shape inference, consistency checks and support rules of the linear-attention ops.

Layout is THD: activations `[T, heads, dim]`, `cu_seqlens [N+1]`; HO = max(HQ, HV) is
the head count of O, gates, states and dO (summaries take HO from g.dim[1]; Mamba-2 has
HO = H = v heads). States are V-major `[rows, HO, V, K]`.
GDP (num_householder n) carries k/v/beta either expanded (`[T*n, ...]`) or token-major
(`[T, n, ...]`); q, g, dO, O stay at the T real tokens.

Build-time checks compare only extents that are known; `support()` lists the
analyzer's consistency rules, reported by validate() as cudnnGraphNotSupportedError.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cudnn.ops.op_spec import Check, OpCall, ShapeRule, Support
from cudnn.ops.rules import check_dims, first_known


class Kind(enum.Enum):
    FWD = "fwd"
    BWD = "bwd"
    SUMMARY = "summary"
    SUMMARY_BWD = "summary_bwd"


@dataclass(frozen=True)
class Family:
    """What distinguishes one linear-attention family from another."""
    prefix: str
    per_channel_gate: bool = False   # g [T, HO, K] (KDA, GDN2) instead of [T, HO]
    per_channel_beta: bool = False   # beta [T, HO, K] (GDN2)
    has_w: bool = False              # write gate w (GDN2)
    householder: bool = False        # num_householder sub-tokens on k/v/beta (GDP)
    mamba: bool = False              # Mamba-2: a, d, z, O_pre; no beta
    lower_bound: bool = False        # gate_lower_bound attr (KDA, GDN2)
    beta_guard: bool = False         # beta_guard attr (GDN2)


# -- extents ------------------------------------------------------------------------
def _tokens(call: OpCall, fam: Family) -> int | None:
    opts = [("q", 0), ("g", 0), ("dO", 0)]
    if not fam.householder:
        opts += [("k", 0), ("v", 0)]
    return first_known(call, opts)


def _key_dim(call: OpCall) -> int | None:
    return first_known(call, [("q", -1), ("k", -1)])


def _value_dim(call: OpCall) -> int | None:
    return first_known(call, [("v", -1), ("dO", -1), ("w", -1), ("z", -1)])


def _n_seq(call: OpCall) -> int | None:
    cu = call.dim("cu_seqlens")
    return None if cu is None else cu[0] - 1


def _heads_out(call: OpCall, fam: Family, kind: Kind) -> int | None:
    if kind in (Kind.SUMMARY, Kind.SUMMARY_BWD):
        return first_known(call, [("g", 1), ("dO", 1)])
    if fam.mamba:
        return first_known(call, [("v", -2), ("g", 1), ("dO", 1)])
    q, v = call.dim("q"), call.dim("v")
    if q is not None and v is not None:
        return max(q[-2], v[-2])
    return first_known(call, [("g", 1), ("dO", 1)])


# -- shape rules --------------------------------------------------------------------
def infer_o(fam: Family) -> ShapeRule:
    def rule(call: OpCall) -> Sequence[int] | None:
        q, v = call.dim("q"), call.dim("v")
        if q is None or v is None:
            return None
        rows = q[0] if fam.householder else (v[0] * v[1] if len(v) == 4 else v[0])
        return (rows, max(q[-2], v[-2]), v[-1])
    return rule


def infer_final_state(fam: Family) -> ShapeRule:
    def rule(call: OpCall) -> Sequence[int] | None:
        n, ho = _n_seq(call), _heads_out(call, fam, Kind.FWD)
        k, v = _key_dim(call), call.dim("v")
        if call.has("state_indices") and call.has("initial_state"):
            init = call.dim("initial_state")
            n = None if init is None else init[0]
        if None in (n, ho, k) or v is None:
            return None
        return (n, ho, v[-1], k)
    return rule


def infer_checkpoints(fam: Family) -> ShapeRule:
    def rule(call: OpCall) -> Sequence[int] | None:
        every = call.param("checkpoint_every_n_tokens") or 0
        q, v = call.dim("q"), call.dim("v")
        n, ho, k = _n_seq(call), _heads_out(call, fam, Kind.FWD), _key_dim(call)
        if every <= 0 or q is None or v is None or None in (n, ho, k):
            return None
        return (max(q[0] // every + n, 1), ho, v[-1], k)
    return rule


def infer_summary_state(value_port: str) -> ShapeRule:
    """[N, g.dim[1], value_port.dim[-1], k.dim[-1]]."""
    def rule(call: OpCall) -> Sequence[int] | None:
        n, g, val, k = _n_seq(call), call.dim("g"), call.dim(value_port), call.dim("k")
        if n is None or g is None or val is None or k is None:
            return None
        return (n, g[1], val[-1], k[-1])
    return rule


def infer_transition(fam: Family) -> ShapeRule:
    def rule(call: OpCall) -> Sequence[int] | None:
        n, g, k = _n_seq(call), call.dim("g"), call.dim("k")
        if n is None or g is None or (k is None and not fam.mamba):
            return None
        return (n, g[1]) if fam.mamba else (n, g[1], k[-1], k[-1])
    return rule


# -- build-time consistency ---------------------------------------------------------
_TOKEN_PORTS = ("q", "g", "dO", "z", "O_pre", "w")


def make_check(fam: Family, kind: Kind) -> Check:
    def check(call: OpCall) -> None:
        t, k, v = _tokens(call, fam), _key_dim(call), _value_dim(call)
        ho, n = _heads_out(call, fam, kind), _n_seq(call)
        cu = call.dim("cu_seqlens")
        if cu is not None and cu[0] < 2:
            raise call.fail("cu_seqlens", "dims [N + 1] with N >= 1 sequences",
                            f"cu_seqlens.dim {list(cu)}")
        token_ports = _TOKEN_PORTS + (() if fam.householder else ("k", "v", "beta"))
        for port in token_ports:
            check_dims(call, port, _with_rank(call, port, {0: t}), "T, the token count")
        if fam.householder:
            _check_householder(call, t)
        check_dims(call, "k", _with_rank(call, "k", {-1: k}), "K, the q/k head dim")
        _check_heads(call, ho)
        gate_tail = {1: ho}
        for port in ("g", "beta") if not fam.householder else ("g",):
            check_dims(call, port, _with_rank(call, port, gate_tail), "gates have HO heads")
        for port in ("w", "dO", "z", "O_pre"):
            check_dims(call, port, [t, ho, v], "[T, HO, V]")
        pool = None if call.has("state_indices") else n
        check_dims(call, "initial_state", [pool, ho, v, k], "[N, HO, V, K]")
        check_dims(call, "d_final_state", [n, ho, v, k], "[N, HO, V, K]")
        check_dims(call, "state_checkpoints", [None, ho, v, k], "[rows, HO, V, K]")
        for port in ("a_log", "a"):
            check_dims(call, port, [ho], "[HO]")
        for port in ("dt_bias", "d"):
            check_dims(call, port, _with_rank(call, port, {0: ho}), "one row per head HO")
        check_dims(call, "state_indices", [n], "[N], one pool row per sequence")
    return check


def _with_rank(call: OpCall, port: str, known: dict[int, int | None]) -> list[int | None]:
    """Expected dims of `port` at its own rank: `known` extents, wildcards elsewhere."""
    dims = call.dim(port)
    if dims is None:
        return []
    out: list[int | None] = [None] * len(dims)
    for axis, value in known.items():
        if -len(dims) <= axis < len(dims):
            out[axis] = value
    return out


def _check_householder(call: OpCall, t: int | None) -> None:
    n = call.param("num_householder") or 1
    for port, expanded_rank in (("k", 3), ("v", 3), ("beta", 2)):
        dims = call.dim(port)
        if dims is None or t is None:
            continue
        ok = dims[0] == t * n if len(dims) == expanded_rank else dims[:2] == (t, n)
        if not ok:
            raise call.fail(port, f"rows T*n = {t * n} (expanded) or leading [T, n] = "
                            f"[{t}, {n}] (token-major), num_householder n = {n}",
                            f"{port}.dim {list(dims)}")
    beta = call.dim("beta")
    ho = _heads_out(call, Family("gdp", householder=True), Kind.FWD)
    if beta is not None and ho is not None and beta[-1] != ho:
        raise call.fail("beta", f"last dim HO = {ho}", f"beta.dim {list(beta)}")


def _check_heads(call: OpCall, ho: int | None) -> None:
    if ho is None:
        return
    for port in ("q", "k", "v"):
        dims = call.dim(port)
        if dims is not None and (dims[-2] == 0 or ho % dims[-2] != 0):
            raise call.fail(port, f"a head count dividing HO = {ho}",
                            f"{port}.dim {list(dims)} ({dims[-2]} heads)")


# -- support rules (validate) -----------------------------------------------------
def make_support(fam: Family, kind: Kind) -> Support:
    def support(call: OpCall) -> Iterable[str]:
        p = call.param
        if not fam.mamba:
            for port in ("a_log", "dt_bias"):
                if call.has(port) and not p("safe_gate"):
                    yield f"{port} requires safe_gate=True"
            if p("gate_domain") == "linear" and p("safe_gate"):
                yield "gate_domain='linear' is incompatible with safe_gate=True"
            if fam.lower_bound and p("gate_lower_bound") is not None and not p("safe_gate"):
                yield "gate_lower_bound requires safe_gate=True"
            if p("allow_neg_eigval") and not p("use_beta_sigmoid"):
                yield "allow_neg_eigval requires use_beta_sigmoid=True"
        if kind is Kind.FWD:
            if call.has("state_indices") and not call.has("initial_state"):
                yield "state_indices requires initial_state"
            if p("overwrite_initial_state") and not (
                    call.has("initial_state") and p("output_final_state")):
                yield "overwrite_initial_state requires initial_state and output_final_state=True"
            if fam.mamba and p("output_pre_gate") and not call.has("z"):
                yield "output_pre_gate requires the z gate input"
        if kind is Kind.BWD:
            if (p("checkpoint_every_n_tokens") or 0) > 0 and not call.has("state_checkpoints"):
                yield "checkpoint_every_n_tokens > 0 requires the state_checkpoints input"
            if p("overwrite_initial_state") and not (
                    call.has("d_final_state") and call.has("initial_state")):
                yield ("overwrite_initial_state requires d_final_state and initial_state "
                       "(so that d_initial_state exists)")
            if fam.mamba and call.has("z") and not call.has("O_pre"):
                yield "the z-gate backward requires O_pre"
        if fam.mamba and p("dt_min") > p("dt_max"):
            yield f"dt_min ({p('dt_min')}) must be <= dt_max ({p('dt_max')})"
    return support
