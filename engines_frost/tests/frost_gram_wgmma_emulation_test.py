"""L0: the wgmma Gram epilogue's index math (kernels/fwd_wgmma_gram.py) in float64, plain Python.

fwd_wgmma_gram builds M and P as m64nN column blocks per warpgroup (N = 16, 32 or 64); each
thread holds N / 2 accumulator values per block at the (row, column) of the wgmma layout
(the PTX table, checked against CuTe by frost_wgmma_fragments_test), loads a row's gate and
beta once per distinct row (wgmma_fragments.shared_coordinate), and stores only what the
chain reads: warp w the blocks (w, bj) with bj <= w, -M off the diagonal (bf16 tile mneg),
M_ww in fp32 (md, the inverse's input), P everywhere on and below the diagonal (the blocks
above stay the wgmma layer's zeros). With gram_p_transposed (the four-role forward: both products on
one warpgroup) P is built as P^T = k q^T and stored back transposed, warp w storing P's
blocks (c, w) with c >= w, so that every warp stores five blocks of the two products.
This emulates that per thread and value, with the kernel's
conditions, and compares what lands in mneg, md and P with the mma layer's Gram (the mma.sync stage's
definition) on every element the chain and the inverse read; every such element must be
written exactly once, and nothing above P's diagonal blocks.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels.wgmma_fragments import fragment_coords, shared_coordinate  # noqa: E402

C, SUB = 64, 16
NBLK = C // SUB
WIDTHS = (16, 32, 64)


def wgmma_c(n):
    """CuTe's wgmma m64nNk16 fp32 accumulator layout (thread, value) -> 64 x N col-major."""
    return ((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512))


def reference(q, k, g, beta, scale):
    """The mma layer's Gram: M strictly lower (beta_t k_t.k_u e^min(g_t - g_u, 0)), P lower incl. diagonal."""
    f = np.exp(np.minimum(g[:, None] - g[None, :], 0.0))
    t, u = np.indices((C, C))
    m = np.where(u < t, beta[:, None] * (k @ k.T) * f, 0.0)
    p = np.where(u <= t, scale * (q @ k.T) * f, 0.0)
    return m, p


def emulate(q, k, g, beta, scale, n=32, stores_from=lambda wl, c: wl >= c, p_transposed=False,
            p_stores_from=lambda wl, c: wl <= c):
    """fwd_wgmma_gram.stage_gram per warpgroup thread and value at width n; returns (mneg, md,
    p, writes, blocks): the three tiles (NaN where never written), the write count per (tile,
    t, u) and the 16 x 16 blocks each warp's epilogue ran (both products)."""
    tv, nval = wgmma_c(n), n // 2
    row_rep, col_rep = shared_coordinate(tv, C, 0), shared_coordinate(tv, C, 1)
    sub = [fragment_coords(*tv, C, 0, v)[1] // SUB for v in range(nval)]  # the kernel's trace-time map
    mneg = np.full((C, C), np.nan)
    md = np.full((NBLK, SUB, SUB), np.nan)
    p = np.full((C, C), np.nan)
    writes = {}
    blocks = [0] * 4
    for prod, a, b in ((0, k, k), (1, k, q) if p_transposed else (1, q, k)):
        tr = prod == 1 and p_transposed
        for thread in range(128):
            wl = thread // 32
            crd = [fragment_coords(*tv, C, thread, v) for v in range(nval)]
            g_row = [g[crd[row_rep[v]][0]] for v in range(nval)]
            b_row = [beta[crd[row_rep[v]][0]] for v in range(nval)]
            for bj in range(C // n):
                acc = [a[crd[v][0]] @ b[bj * n + crd[v][1]] for v in range(nval)]  # the SS wgmma
                for sb in range(n // SUB):
                    c = bj * (n // SUB) + sb
                    if not (p_stores_from if tr else stores_from)(wl, c):
                        continue
                    blocks[wl] += thread % 32 == 0
                    vals = [v for v in range(nval) if sub[v] == sb]
                    g_col = {v: g[bj * n + crd[col_rep[v]][1]] for v in vals}
                    for v in vals:
                        emulate_value(prod, wl, c, crd[v], bj * n, acc[v], g_row[v], g_col[v], b_row[v], scale,
                                      mneg, md, p, writes, tr)
    return mneg, md, p, writes, blocks


def emulate_value(prod, wl, c, tu, u0, acc, g_t, g_u, b_t, scale, mneg, md, p, writes, tr=False):
    """One value's epilogue, as fwd_wgmma_gram.stage_gram's inner loop (tr: a value of P^T,
    whose row is the earlier position)."""
    t, u = tu[0], u0 + tu[1]
    if tr:
        p[u, t] = 0.0 if u < t else acc * scale * np.exp(min(g_u - g_t, 0.0))
        key = ("p", u, t)
        writes[key] = writes.get(key, 0) + 1
        return
    f = np.exp(min(g_t - g_u, 0.0))
    if prod == 0:
        mval = 0.0 if u >= t else acc * f * b_t
        if wl == c:
            md[c, t - c * SUB, u - c * SUB] = mval
            key = ("md", t, u)
        else:
            mneg[t, u] = -mval
            key = ("mneg", t, u)
    else:
        p[t, u] = 0.0 if u > t else acc * scale * f
        key = ("p", t, u)
    writes[key] = writes.get(key, 0) + 1


def _inputs(seed):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((C, 128)), rng.standard_normal((C, 128))
    g = np.cumsum(-rng.uniform(0.0, 0.3, C))
    beta = rng.uniform(0.1, 1.0, C)
    return q, k, g, beta, 128 ** -0.5


def _read_by_the_chain():
    """(tile, t, u) the solve, the inverse and the P U product read."""
    out = []
    for t in range(C):
        for u in range(C):
            bi, bj = t // SUB, u // SUB
            if bj < bi:
                out.append(("mneg", t, u))
            if bj == bi:
                out.append(("md", t, u))
            if bj <= bi:
                out.append(("p", t, u))
    return out


def problems(seed, n, stores_from=lambda wl, c: wl >= c, **transposed):
    """What is wrong with the emulated epilogue's stores against the mma layer's Gram (empty: nothing)."""
    q, k, g, beta, scale = _inputs(seed)
    m_ref, p_ref = reference(q, k, g, beta, scale)
    mneg, md, p, writes, _ = emulate(q, k, g, beta, scale, n, stores_from, **transposed)
    read = _read_by_the_chain()
    out = [("count", key) for key in read if writes.get(key) != 1]
    out += [("extra", key) for key in set(writes) - set(read)]  # P's upper blocks keep their zeros
    got = {"mneg": lambda t, u: -mneg[t, u], "md": lambda t, u: md[t // SUB, t % SUB, u % SUB],
           "p": lambda t, u: p[t, u]}
    for tile, t, u in read:
        want = p_ref[t, u] if tile == "p" else m_ref[t, u]
        if not abs(got[tile](t, u) - want) <= 1e-12 * (1 + abs(want)):  # NaN (unwritten) fails too
            out.append(("value", (tile, t, u)))
    return out


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("seed", [0, 1])
def test_epilogue_writes_mma_gram_once_where_the_chain_reads(seed, n):
    assert problems(seed, n) == []


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("seed", [0, 1])
def test_transposed_p_writes_the_same_tiles(seed, n):
    assert problems(seed, n, p_transposed=True) == []


@pytest.mark.parametrize("p_transposed", [False, True])
def test_blocks_per_warp(p_transposed):
    """What gram_p_transposed is for: with both products on one warpgroup, warp w runs w + 1
    blocks of M and w + 1 of P (warp 3 eight, warp 0 two), or 4 - w of P^T (five each)."""
    _, _, _, _, blocks = emulate(*_inputs(4), 64, p_transposed=p_transposed)
    assert blocks == ([5] * 4 if p_transposed else [2 * (w + 1) for w in range(4)])


@pytest.mark.parametrize("n", WIDTHS)
def test_transposed_p_with_p_block_filter_is_caught(n):
    """P^T's stores filtered as P's (warp w on blocks c <= w) leave P's blocks above the
    warp's row block unwritten and write P above the diagonal: the filter must flip."""
    assert problems(5, n, p_transposed=True, p_stores_from=lambda wl, c: wl >= c)


@pytest.mark.parametrize("n", WIDTHS)
def test_a_wrong_block_filter_is_caught(n):
    """The check can fail: storing only strictly below the diagonal (w > c) leaves the
    diagonal blocks (md and P's) unwritten."""
    assert problems(2, n, stores_from=lambda wl, c: wl > c)


@pytest.mark.parametrize("n", [32, 64])
def test_a_block_filter_on_the_wide_block_is_caught(n):
    """Filtering on the n-wide block instead of each 16-column sub-block stores P above the
    diagonal blocks (and M_ww as -M): the sub-block map matters."""
    per = n // SUB
    assert problems(3, n, stores_from=lambda wl, c: wl >= c - c % per)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
