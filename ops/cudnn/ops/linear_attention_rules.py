"""Shape inference and build-time consistency checks of the linear-attention ops.

Layout is THD: activations `[T, heads, dim]`, `cu_seqlens [N+1]`; HO = max(HQ, HV) is
the head count of O, gates, states and dO (summaries take HO from g.dim[1]; Mamba-2 has
HO = H = v heads). States are V-major `[rows, HO, V, K]`.
GDP (num_householder n) carries k/v/beta either expanded (`[T*n, ...]`) or token-major
(`[T, n, ...]`); q, g, dO, O stay at the T real tokens.

Checks compare only extents that are known and raise OpValueError naming the port; the
cross-argument support rules are linear_attention_requirements.py.
"""
from __future__ import annotations

from collections.abc import Sequence

from cudnn.ops.linear_attention_family import Family, Kind
from cudnn.ops.op_spec import Check, OpCall, ShapeRule
from cudnn.ops.rules import check_dims, check_set_outputs, first_known


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
_TOKEN_PORTS = ("q", "g", "dO", "z", "O_pre", "w", "values")


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
            _check_householder(call, fam, t)
        check_dims(call, "k", _with_rank(call, "k", {-1: k}), "K, the q/k head dim")
        _check_heads(call, ho)
        _check_gates(call, fam, ho, k)
        for port in ("w", "dO", "z", "O_pre", "values"):
            check_dims(call, port, [t, ho, v], "[T, HO, V]")
        pool = None if call.has("state_indices") else n
        check_dims(call, "initial_state", [pool, ho, v, k], "[N, HO, V, K]")
        check_dims(call, "d_final_state", [n, ho, v, k], "[N, HO, V, K]")
        check_dims(call, "state_checkpoints", [None, ho, v, k], "[rows, HO, V, K]")
        for port in ("a_log", "a"):
            check_dims(call, port, [ho], "[HO]")
        check_dims(call, "dt_bias", [ho, k] if fam.per_channel_gate else [ho],
                   "[HO, K]" if fam.per_channel_gate else "[HO]")
        check_dims(call, "d", _with_rank(call, "d", {0: ho, 1: v}), "[HO] or [HO, V]")
        check_dims(call, "state_indices", [n], "[N], one pool row per sequence")
        check_set_outputs(call)
    return check


def _check_gates(call: OpCall, fam: Family, ho: int | None, k: int | None) -> None:
    """g, beta (and w) have one row per token and HO heads; per-channel gates K channels."""
    gate_tail = {1: ho, 2: k} if fam.per_channel_gate else {1: ho}
    check_dims(call, "g", _with_rank(call, "g", gate_tail), "gates have HO heads"
               + (" and K channels" if fam.per_channel_gate else ""))
    if fam.householder:
        return
    beta_tail = {1: ho, 2: k} if fam.per_channel_beta else {1: ho}
    check_dims(call, "beta", _with_rank(call, "beta", beta_tail), "gates have HO heads"
               + (" and K channels" if fam.per_channel_beta else ""))


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


def _check_householder(call: OpCall, fam: Family, t: int | None) -> None:
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
    ho = _heads_out(call, fam, Kind.FWD)
    if beta is not None and ho is not None and beta[-1] != ho:
        raise call.fail("beta", f"last dim HO = {ho}", f"beta.dim {list(beta)}")


def _check_heads(call: OpCall, ho: int | None) -> None:
    """q, k and v heads each divide HO; k shares its heads with q or with v (HK in
    {H, HV}), so every output head reads one k head of its q or v group."""
    if ho is None:
        return
    for port in ("q", "k", "v"):
        dims = call.dim(port)
        if dims is not None and (dims[-2] == 0 or ho % dims[-2] != 0):
            raise call.fail(port, f"a head count dividing HO = {ho}",
                            f"{port}.dim {list(dims)} ({dims[-2]} heads)")
    q, k, v = call.dim("q"), call.dim("k"), call.dim("v")
    if q is not None and k is not None and v is not None and k[-2] not in (q[-2], v[-2]):
        raise call.fail("k", f"a head count HK equal to H = {q[-2]} or HV = {v[-2]}",
                        f"k.dim {list(k)} ({k[-2]} heads)")
