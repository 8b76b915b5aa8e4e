"""Valid calls of the 20 linear-attention builders, with hand-written expected outputs.

Two cases per op: `minimal` (required ports, default attrs: every conditional output
absent) and `full` (every optional port and every flag that turns an output on).
Geometry is random per seed: T tokens in N sequences, HQ/HK/HV heads with
HO = max(HQ, HV), head dims K and V; GDP uses n Householder sub-tokens (expanded rows in
`minimal`, token-major in `full`); Mamba-2 uses G q/k groups and H = HO value heads.
Inputs get pairwise-distinct dtypes where a `dtype_like` output copies one, so a swap
shows up.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import cudnn
from ir_case_types import Built, OpCase

D = cudnn.data_type


@dataclass(frozen=True)
class Geo:
    T: int
    N: int
    HQ: int
    HK: int
    HV: int
    K: int
    V: int
    n: int

    @property
    def HO(self) -> int:  # noqa: N802 - the spec's notation
        return max(self.HQ, self.HV)


def geometry(rng: random.Random, mamba: bool = False) -> Geo:
    base = rng.choice([1, 2])
    hq, hv = base * rng.choice([1, 2]), base * rng.choice([1, 2])
    if mamba:  # q/k carry G groups, v carries H = HO heads, G divides H
        hq = base
        hv = base * rng.choice([1, 2, 3])
    hk = hq if mamba else rng.choice([hq, hv])
    n_seq = rng.randint(1, 3)
    return Geo(T=rng.randint(n_seq, 20), N=n_seq, HQ=hq, HK=hk, HV=hv, K=rng.randint(2, 16),
               V=rng.randint(2, 16), n=rng.randint(1, 3))


FAMILIES = {
    "gdn": {}, "kda": {"g_channels": True}, "gdp": {"householder": True},
    "gdn2": {"g_channels": True, "beta_channels": True, "w": True},
    "mamba2": {"mamba": True},
}
DTYPES = {"q": D.BFLOAT16, "k": D.BFLOAT16, "v": D.BFLOAT16, "g": D.FLOAT, "beta": D.BFLOAT16,
          "w": D.BFLOAT16, "cu_seqlens": D.INT32, "initial_state": D.FLOAT, "a_log": D.HALF,
          "dt_bias": D.BFLOAT16, "state_indices": D.INT32, "dO": D.BFLOAT16,
          "state_checkpoints": D.FLOAT, "d_final_state": D.FLOAT, "a": D.HALF, "d": D.DOUBLE,
          "z": D.BFLOAT16, "O_pre": D.BFLOAT16, "values": D.BFLOAT16}


def _shapes(fam: dict[str, bool], geo: Geo, token_major: bool, pool: int) -> dict[str, tuple]:
    T, N, HO, K, V, n = geo.T, geo.N, geo.HO, geo.K, geo.V, geo.n
    gp = fam.get("householder", False)
    if gp and token_major:
        k, v, beta = (T, n, geo.HK, K), (T, n, geo.HV, V), (T, n, HO)
    elif gp:
        k, v, beta = (T * n, geo.HK, K), (T * n, geo.HV, V), (T * n, HO)
    else:
        k, v = (T, geo.HK, K), (T, geo.HV, V)
        beta = (T, HO, K) if fam.get("beta_channels") else (T, HO)
    return {
        "q": (T, geo.HQ, K), "k": k, "v": v, "beta": beta,
        "g": (T, HO, K) if fam.get("g_channels") else (T, HO), "w": (T, HO, V),
        "cu_seqlens": (N + 1,), "initial_state": (pool, HO, V, K), "a_log": (HO,),
        "dt_bias": (HO, K) if fam.get("g_channels") else (HO,), "state_indices": (N,),
        "dO": (T, HO, V), "state_checkpoints": (T // 4 + N, HO, V, K),
        "d_final_state": (N, HO, V, K), "a": (HO,), "d": (HO, V), "z": (T, HO, V),
        "O_pre": (T, HO, V), "values": (T, HO, V),
    }


def _ports(family: str, kind: str, full: bool) -> list[str]:
    fam = FAMILIES[family]
    gate = ["a"] if fam.get("mamba") else ["beta"]
    w = ["w"] if fam.get("w") and kind in ("fwd", "bwd", "summary") else []
    need = {"fwd": ["q", "k", "v", "g", *gate, *w, "cu_seqlens"],
            "bwd": ["q", "k", "v", "g", *gate, *w, "cu_seqlens", "dO"],
            "summary": ["k", "v", "g", *gate, *w, "cu_seqlens"],
            "summary_bwd": ["q", "k", "g", *gate, "cu_seqlens", "dO"]}[kind]
    if not full:
        return need
    params = ["dt_bias"] + ([] if fam.get("mamba") else ["a_log"])
    extra = {"fwd": ["initial_state", "state_indices", *params],
             "bwd": ["initial_state", "d_final_state", "state_checkpoints", *params],
             "summary": ["initial_state", *params],
             "summary_bwd": ["d_final_state", *params]}[kind]
    if fam.get("mamba") and kind in ("fwd", "bwd"):
        extra += ["d", "z"] + (["O_pre"] if kind == "bwd" else [])
    if kind == "bwd" and _has_values(family):
        extra.append("values")
    return need + extra


def _has_values(family: str) -> bool:
    """The families whose forward emits `values` and whose backward reads them."""
    return not (FAMILIES[family].get("mamba") or FAMILIES[family].get("householder"))


def _attrs(family: str, kind: str, full: bool) -> dict[str, Any]:
    # GDP always names its sub-token count: the k/v/beta rows depend on it
    householder = {"num_householder": None} if family == "gdp" else {}
    if not full:
        return householder
    mamba = FAMILIES[family].get("mamba")
    attrs: dict[str, Any] = {} if mamba else {"safe_gate": True}
    if kind == "fwd":
        attrs.update(output_final_state=True, checkpoint_every_n_tokens=4)
        if mamba:
            attrs["output_pre_gate"] = True
        if _has_values(family):
            attrs["output_values"] = True
    elif kind == "bwd":
        attrs["checkpoint_every_n_tokens"] = 4
    else:
        attrs["output_transition"] = True
    return {**householder, **attrs}


def _expected(family: str, kind: str, full: bool, geo: Geo, shapes: dict[str, tuple],
              ports: list[str], pool: int) -> tuple[dict, dict]:
    T, N, HO, K, V = geo.T, geo.N, geo.HO, geo.K, geo.V
    mamba = FAMILIES[family].get("mamba")
    dims: dict[str, tuple | None] = {}
    dtypes: dict[str, Any] = {}
    if kind == "fwd":
        dims["O"] = (T, HO, V)
        dims["final_state"] = (pool, HO, V, K) if full else None
        dims["state_checkpoints"] = (max(T // 4 + N, 1), HO, V, K) if full else None
        if mamba:
            dims["O_pre"] = (T, HO, V) if full else None
        if _has_values(family):
            dims["values"] = (T, HO, V) if full else None
    elif kind in ("summary", "summary_bwd"):
        key = "final_state" if kind == "summary" else "d_initial_state"
        dims[key] = (N, HO, V, K)
        dims["transition"] = ((N, HO) if mamba else (N, HO, K, K)) if full else None
    else:
        grads = [("dQ", "q"), ("dK", "k"), ("dV", "v"), ("dG", "g")]
        grads += [("dA", "a")] if mamba else [("dBeta", "beta")]
        grads += [("dW", "w")] if FAMILIES[family].get("w") else []
        for out, src in grads:
            dims[out] = shapes[src]
        optional = [("d_initial_state", "initial_state"), ("d_dt_bias", "dt_bias")]
        optional += [("dD", "d"), ("dZ", "z")] if mamba else [("d_a_log", "a_log")]
        for out, src in optional:
            dims[out] = shapes[src] if src in ports else None
            if src in ports:
                dtypes[out] = DTYPES[src]
        if mamba:
            dtypes["dA"] = DTYPES["a"]
    for out in dims:
        dtypes.setdefault(out, None)
    return dims, dtypes


def _case(family: str, kind: str, full: bool) -> OpCase:
    op = family + {"fwd": "", "bwd": "_bwd", "summary": "_summary",
                   "summary_bwd": "_summary_bwd"}[kind]

    def make(g: cudnn.pygraph, rng: random.Random) -> Built:
        geo = geometry(rng, mamba=bool(FAMILIES[family].get("mamba")))
        pool = geo.N + 2 if full and kind == "fwd" else geo.N
        shapes = _shapes(FAMILIES[family], geo, token_major=full, pool=pool)
        ports = _ports(family, kind, full)
        kwargs = {p: g.tensor(list(shapes[p]), data_type=DTYPES[p], name=p) for p in ports}
        attrs = _attrs(family, kind, full)
        if "num_householder" in attrs:
            attrs["num_householder"] = geo.n
        kwargs.update(attrs)
        dims, dtypes = _expected(family, kind, full, geo, shapes, ports, pool)
        return Built((), kwargs, dims, dtypes)

    return OpCase(op, "full" if full else "minimal", make)


CASES: list[OpCase] = [_case(family, kind, full) for family in FAMILIES
                       for kind in ("fwd", "bwd", "summary", "summary_bwd")
                       for full in (False, True)]
