"""L0: the wgmma Gram epilogue's index math (kernels/fwd_v3_gram.py) in float64, plain Python.

fwd_v3_gram builds M and P as four m64n16 column blocks per warpgroup; each thread holds
eight accumulator values per block at the (row, column) of the wgmma accumulator layout
(the PTX table, checked against CuTe by frost_wgmma_fragments_test), loads a row's gate and
beta once per distinct row (wgmma_fragments.shared_coordinate), and stores only what the
chain reads: warp w the blocks (w, bj) with bj <= w, -M off the diagonal (bf16 tile mneg),
M_ww in fp32 (md, the inverse's input), P everywhere on and below the diagonal (the blocks
above stay v3's zeros). This emulates that per thread and value, with the kernel's
conditions, and compares what lands in mneg, md and P with v1's Gram (the mma.sync stage's
definition) on every element the chain and the inverse read; every such element must be
written exactly once, and nothing above P's diagonal blocks.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels.wgmma_fragments import fragment_coords, shared_coordinate  # noqa: E402

C, SUB, GRAM_N = 64, 16, 16
BLOCKS = C // GRAM_N
WGMMA_C16 = ((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512))  # CuTe's m64n16 accumulator


def reference(q, k, g, beta, scale):
    """v1's Gram: M strictly lower (beta_t k_t.k_u e^min(g_t - g_u, 0)), P lower incl. diagonal."""
    f = np.exp(np.minimum(g[:, None] - g[None, :], 0.0))
    t, u = np.indices((C, C))
    m = np.where(u < t, beta[:, None] * (k @ k.T) * f, 0.0)
    p = np.where(u <= t, scale * (q @ k.T) * f, 0.0)
    return m, p


def emulate(q, k, g, beta, scale, stores_from=lambda wl, bj: wl >= bj):
    """fwd_v3_gram.stage_gram per warpgroup thread and value; returns (mneg, md, p, writes):
    the three tiles (NaN where never written) and the write count per (tile, t, u)."""
    row_rep, col_rep = shared_coordinate(WGMMA_C16, C, 0), shared_coordinate(WGMMA_C16, C, 1)
    mneg = np.full((C, C), np.nan)
    md = np.full((BLOCKS, SUB, SUB), np.nan)
    p = np.full((C, C), np.nan)
    writes = {}
    for prod, a in ((0, k), (1, q)):
        for thread in range(128):
            wl = thread // 32
            crd = [fragment_coords(*WGMMA_C16, C, thread, v) for v in range(8)]
            g_row = [g[crd[row_rep[v]][0]] for v in range(8)]
            b_row = [beta[crd[row_rep[v]][0]] for v in range(8)]
            for bj in range(BLOCKS):
                acc = [a[crd[v][0]] @ k[bj * GRAM_N + crd[v][1]] for v in range(8)]  # the SS wgmma
                if not stores_from(wl, bj):
                    continue
                g_col = [g[bj * GRAM_N + crd[col_rep[v]][1]] for v in range(8)]
                for v in range(8):
                    t, ul = crd[v]
                    u = bj * GRAM_N + ul
                    f = np.exp(min(g_row[v] - g_col[v], 0.0))
                    if prod == 0:
                        mval = 0.0 if u >= t else acc[v] * f * b_row[v]
                        if wl == bj:
                            md[bj, t - bj * SUB, ul] = mval
                            key = ("md", t, u)
                        else:
                            mneg[t, u] = -mval
                            key = ("mneg", t, u)
                    else:
                        p[t, u] = 0.0 if u > t else acc[v] * scale * f
                        key = ("p", t, u)
                    writes[key] = writes.get(key, 0) + 1
    return mneg, md, p, writes


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


@pytest.mark.parametrize("seed", [0, 1])
def test_epilogue_writes_v1s_gram_once_where_the_chain_reads(seed):
    q, k, g, beta, scale = _inputs(seed)
    m_ref, p_ref = reference(q, k, g, beta, scale)
    mneg, md, p, writes = emulate(q, k, g, beta, scale)
    read = _read_by_the_chain()
    assert all(writes.get(key) == 1 for key in read), [key for key in read if writes.get(key) != 1][:5]
    assert set(writes) == set(read)  # nothing else is stored (P's upper blocks keep their zeros)
    for t in range(C):
        for u in range(C):
            bi, bj = t // SUB, u // SUB
            if bj < bi:
                assert -mneg[t, u] == pytest.approx(m_ref[t, u], rel=1e-12, abs=1e-12)
            if bj == bi:
                assert md[bi, t % SUB, u % SUB] == pytest.approx(m_ref[t, u], rel=1e-12, abs=1e-12)
            if bj <= bi:
                assert p[t, u] == pytest.approx(p_ref[t, u], rel=1e-12, abs=1e-12)


def test_a_wrong_block_filter_is_caught():
    """The check can fail: storing only strictly below the diagonal (wl > bj) leaves the
    diagonal blocks (md and P's) unwritten."""
    q, k, g, beta, scale = _inputs(2)
    _, _, _, writes = emulate(q, k, g, beta, scale, stores_from=lambda wl, bj: wl > bj)
    assert any(writes.get(key) != 1 for key in _read_by_the_chain())


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
