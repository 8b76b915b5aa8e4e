"""Float64 reference of the MoE grouped matmul in modes NONE, GATHER and SCATTER, and the
routings that feed it (numpy only, so the CPU tests and the GPU probe share it).

What the modes compute (docs/OP_SURFACE.md, "MoE grouped matmul modes"): the R routed rows
are grouped by expert, expert e owning rows [first_token_offset[e], first_token_offset[e+1])
(the last expert up to R), and each routed row is multiplied by its expert's [K, N] matrix.
- NONE: the token rows are the routed rows.
- GATHER: routed row r is token row token_index[r] (tokens stay in token order, S rows).
- SCATTER: the token rows are the routed rows, and routed row r's product is written to
  output row token_index[r] * top_k + token_ks[r] (back in token order, R = S * top_k).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODES = ("NONE", "GATHER", "SCATTER")


def expert_of_rows(first_token_offset: np.ndarray, rows: int) -> np.ndarray:
    """The expert that owns each of `rows` routed rows."""
    starts = np.asarray(first_token_offset, dtype=np.int64).reshape(-1)
    ends = np.append(starts[1:], rows)
    if starts[0] != 0 or np.any(ends < starts) or ends[-1] != rows:
        raise ValueError(f"first_token_offset {starts.tolist()} does not split {rows} rows "
                         "into ascending expert ranges starting at 0")
    return np.repeat(np.arange(len(starts)), ends - starts)


def moe_grouped_matmul(token: np.ndarray, weight: np.ndarray, first_token_offset: np.ndarray,
                       mode: str = "NONE", token_index: np.ndarray | None = None,
                       token_ks: np.ndarray | None = None, top_k: int = 0) -> np.ndarray:
    """OUT_0 [1, R, N] in float64. Inputs as the graph holds them: token [1, rows, K], weight
    [E, K, N], first_token_offset [E] (any shape of E entries), token_index / token_ks
    [1, R, 1]. SCATTER rows no routed row writes are NaN (a complete routing writes all)."""
    rows = np.asarray(token, dtype=np.float64).reshape(token.shape[-2:])
    w = np.asarray(weight, dtype=np.float64)
    index = None if token_index is None else np.asarray(token_index).reshape(-1).astype(np.int64)
    if mode == "GATHER":
        if index is None or index.min(initial=0) < 0 or index.max(initial=-1) >= len(rows):
            raise ValueError(f"GATHER needs token_index in [0, {len(rows)})")
        rows = rows[index]
    elif mode not in ("NONE", "SCATTER"):
        raise ValueError(f"mode {mode!r}: expected one of {MODES}")
    experts = expert_of_rows(first_token_offset, len(rows))
    products = np.einsum("rk,rkn->rn", rows, w[experts])
    if mode != "SCATTER":
        return products[None]
    if index is None or token_ks is None or top_k <= 0:
        raise ValueError("SCATTER needs token_index, token_ks and top_k > 0")
    ks = np.asarray(token_ks).reshape(-1).astype(np.int64)
    slots = index * top_k + ks
    if np.any(ks < 0) or np.any(ks >= top_k) or np.any(slots >= len(rows)) or \
            len(np.unique(slots)) != len(slots):
        raise ValueError("SCATTER slots token_index * top_k + token_ks must be distinct rows "
                         f"of the {len(rows)} outputs")
    out = np.full_like(products, np.nan)
    out[slots] = products
    return out[None]


@dataclass(frozen=True)
class Routing:
    """Top-k routing of `tokens` tokens to `experts` experts, rows sorted by expert."""
    tokens: int
    experts: int
    top_k: int
    choices: np.ndarray        # [S, top_k]: the expert of each token's k-th choice
    first_token_offset: np.ndarray  # [E] int32
    token_index: np.ndarray    # [R] int32: the token of each routed row
    token_ks: np.ndarray       # [R] int32: which of its token's choices the row is

    @property
    def rows(self) -> int:
        return self.tokens * self.top_k

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(self.choices.reshape(-1), minlength=self.experts)


def random_routing(rng: np.random.Generator, tokens: int, experts: int, top_k: int,
                   idle: tuple[int, ...] = ()) -> Routing:
    """Every token picks `top_k` distinct experts at random, never one of `idle` (experts
    that get no rows); routed rows go in expert order, tokens ascending within an expert."""
    allowed = np.array([e for e in range(experts) if e not in idle])
    if len(allowed) < top_k:
        raise ValueError(f"top_k {top_k} > the {len(allowed)} experts that take tokens")
    choices = np.stack([rng.choice(allowed, top_k, replace=False) for _ in range(tokens)])
    expert = choices.reshape(-1)
    token = np.repeat(np.arange(tokens), top_k)
    k = np.tile(np.arange(top_k), tokens)
    order = np.lexsort((token, expert))  # by expert, then token
    counts = np.bincount(expert, minlength=experts)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return Routing(tokens, experts, top_k, choices, offsets.astype(np.int32),
                   token[order].astype(np.int32), k[order].astype(np.int32))


def per_choice_products(token: np.ndarray, weight: np.ndarray, routing: Routing) -> np.ndarray:
    """[S * top_k, N]: row s * top_k + k is token s times its k-th expert's matrix, computed
    from the choices directly (what GATHER followed by SCATTER must give)."""
    rows = np.asarray(token, dtype=np.float64).reshape(token.shape[-2:])
    w = np.asarray(weight, dtype=np.float64)
    return np.stack([rows[s] @ w[routing.choices[s, k]]
                     for s in range(routing.tokens) for k in range(routing.top_k)])
