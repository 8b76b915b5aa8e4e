"""Backward stage 4 (per chunk, per output head): the WY adjoint, dv, dbeta, dk and dg.

FLA's prepare_wy_repr_bwd plus the reverse chunk-local cumsum (formulas:
tests/reference/chunk_bwd.py).  With T = (I + A)^-1 kept by the recompute pass, dw,
dk', dG' from stage 3 (bwd_dqkwg) and dv_new from stage 2:
    dT = dv_new (beta v)^T + dw (beta k E)^T,   dA = -T^T dT T^T  (j < i)
    d(beta v) = T^T dv_new,   d(beta k E) = T^T dw,   gram adjoint of dA through (beta k, k)
    dv = beta d(beta v),   dbeta = sum k d(beta k) + sum v d(beta v)
    dk = dk' + beta d(beta k) + gram_y(dA),   dG = dG' + (beta k E) d(beta k E) + gram_G(dA)
    dg = reverse cumsum of dG within the chunk (fp32)
then the l2norm adjoint of dk when enabled.  Grouped heads write per-output-head
partial dk / dv into fp32 scratch that head_group_sum reduces.

Grid: (NT_bound, HO), same tiers as bwd_dqkwg.  Two entry points with one body: GDN's
la_bwd_wy_kernel and KDA's la_bwd_wy_kda_kernel differ only in their compiler hints.
"""
import cuda.tile as ct

from .bwd_dqkwg import chunk_live, gram_bwd_gdn, tier_serves
from .decay_gram import gram_bwd
from .tile_math import (L2NORM_EPS, fast_exp, l2_row_factor, mma_dtype, row_col_index,
                        split_hi_lo)
from .tile_io import ZERO, load_rows, load_rows_raw, store_rows
from .wy_fwd import load_column, load_gate_cumsum

BC = 16


@ct.kernel(occupancy=1)
def la_bwd_wy_kernel(k, v, g, beta, cu_seqlens, table, reroute, tinv, dv_new, dw, dk_part,
                     dg_part, dk, dv, dg, dbeta,
                     GROUP_QK: ct.Constant[int], GROUP_V: ct.Constant[int],
                     BT: ct.Constant[int], BK: ct.Constant[int], BV: ct.Constant[int],
                     GW: ct.Constant[int], KDA: ct.Constant[bool],
                     USE_L2NORM: ct.Constant[bool], TIER: ct.Constant[int],
                     SLICE_TMA: ct.Constant[bool]):
    """GDN's launch, and fp32-staged (fp16) KDA's (see chunked_bwd); tileiras
    warp-specialises it: 384 threads, 168 registers."""
    _bwd_wy(k, v, g, beta, cu_seqlens, table, reroute, tinv, dv_new, dw, dk_part, dg_part,
            dk, dv, dg, dbeta, GROUP_QK, GROUP_V, BT, BK, BV, KDA, USE_L2NORM, TIER,
            SLICE_TMA)


@ct.kernel(occupancy=1, num_worker_warps=8)
def la_bwd_wy_kda_kernel(k, v, g, beta, cu_seqlens, table, reroute, tinv, dv_new, dw,
                         dk_part, dg_part, dk, dv, dg, dbeta,
                         GROUP_QK: ct.Constant[int], GROUP_V: ct.Constant[int],
                         BT: ct.Constant[int], BK: ct.Constant[int], BV: ct.Constant[int],
                         GW: ct.Constant[int], KDA: ct.Constant[bool],
                         USE_L2NORM: ct.Constant[bool], TIER: ct.Constant[int],
                         SLICE_TMA: ct.Constant[bool]):
    """KDA's launch: the same body on 8 compute warps without warp specialisation, so a
    [64, 128] fp32 tile costs 32 registers a thread (tier 1, sm_90: 255 registers, 32 B
    stack, 6760 SASS; under the default hint 168 registers, 1.1 KB stack, 9584 SASS)."""
    _bwd_wy(k, v, g, beta, cu_seqlens, table, reroute, tinv, dv_new, dw, dk_part, dg_part,
            dk, dv, dg, dbeta, GROUP_QK, GROUP_V, BT, BK, BV, KDA, USE_L2NORM, TIER,
            SLICE_TMA)


def _bwd_wy(k, v, g, beta, cu_seqlens, table, reroute, tinv, dv_new, dw, dk_part, dg_part,
            dk, dv, dg, dbeta, GROUP_QK: int, GROUP_V: int, BT: int, BK: int, BV: int,
            KDA: bool, USE_L2NORM: bool, TIER: int, SLICE_TMA: bool):
    row = ct.bid(0)
    h = ct.bid(1)
    if tier_serves(reroute, row, h, KDA, TIER):
        live, chunk, bos, eos = chunk_live(table, cu_seqlens, row, BT)
        if live:
            if KDA:
                _adjoint_kda(k, v, g, beta, tinv, dv_new, dw, dk_part, dg_part, dk, dv, dg,
                             dbeta, chunk, bos, eos, h, GROUP_QK, GROUP_V, BT, BK, BV,
                             USE_L2NORM, TIER, SLICE_TMA)
            else:
                _adjoint_gdn(k, v, g, beta, tinv, dv_new, dw, dk_part, dg_part, dk, dv, dg,
                             dbeta, chunk, bos, eos, h, GROUP_QK, GROUP_V, BT, BK, BV,
                             USE_L2NORM, SLICE_TMA)

def _adjoint_gdn(k, v, g, beta, tinv, dv_new, dw, dk_part, dg_part, dk, dv, dg, dbeta,
                 chunk, bos, eos, h, GROUP_QK: int, GROUP_V: int, BT: int, BK: int, BV: int,
                 USE_L2NORM: bool, SLICE_TMA: bool):
    """GDN chunk: scalar gates, so the decays are row / column scales of raw-key products."""
    kr = load_rows(k.slice(axis=0, start=bos, stop=eos), chunk, h // GROUP_QK, BT, BK, SLICE_TMA)
    rk = ct.full((BT, 1), 1.0, ct.float32)
    if USE_L2NORM:
        rk = ct.rsqrt(ct.sum(kr * kr, axis=1, keepdims=True) + L2NORM_EPS)
    kt = kr * rk
    b = ct.astype(ct.load(beta.slice(axis=0, start=bos, stop=eos), (chunk, h),
                          shape=(BT, 1), padding_mode=ZERO, allow_tma=SLICE_TMA), ct.float32)
    gc, _ = load_gate_cumsum(g.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK, False,
                             SLICE_TMA)
    e_g = ct.exp(gc)
    r, c = row_col_index(BT)
    # tensor-core products in the io dtype `mt` (bf16 / fp16; fp32 when staged) with
    # fp32 accumulation: T^T and v rounded once (as the forward's WY products), the
    # fp32 gradients dv_new, dw and the GDN Gram adjoint as hi + lo (one bf16
    # rounding of them lifts the correlated-key errors to ~1e-2).  No fp32 copy of
    # an operand stays live for a TF32 product.
    mt = mma_dtype(k.dtype)
    t_t = ct.astype(ct.transpose(load_rows(tinv.slice(axis=0, start=bos, stop=eos),
                                           chunk, h, BT, BT, SLICE_TMA)), mt)
    dvn_hi, dvn_lo = split_hi_lo(load_rows(dv_new.slice(axis=0, start=bos,
                                                     stop=eos), chunk, h, BT, BV, SLICE_TMA), mt)
    vr = ct.astype(load_rows_raw(v.slice(axis=0, start=bos, stop=eos), chunk,
                                 h // GROUP_V, BT, BV, SLICE_TMA), mt)
    d_bv = ct.mma(t_t, dvn_lo, mm16(t_t, dvn_hi, BT, BV))
    store_rows(dv.slice(axis=0, start=bos, stop=eos), chunk, h, b * d_bv, BT, BV, SLICE_TMA)
    d_beta = ct.sum(ct.astype(vr, ct.float32) * d_bv, axis=1, keepdims=True)
    v_t = ct.transpose(vr)
    d_t = ct.mma(dvn_lo, v_t, mm16(dvn_hi, v_t, BT, BT)) * ct.transpose(b)
    dw_hi, dw_lo = split_hi_lo(load_rows(dw.slice(axis=0, start=bos, stop=eos), chunk,
                                         h, BT, BK, SLICE_TMA), mt)
    kbe = kt * (b * e_g)
    kbe_t = ct.transpose(ct.astype(kbe, mt))
    d_t = ct.mma(dw_lo, kbe_t, ct.mma(dw_hi, kbe_t, d_t))
    t_dt = ct.astype(mm16(t_t, ct.astype(d_t, mt), BT, BT), mt)
    d_a = ct.where(r > c, -mm16(t_dt, t_t, BT, BT), 0.0)
    d_kbe = ct.mma(t_t, dw_lo, mm16(t_t, dw_hi, BT, BK))
    dkb_x, dk_a, dg_a = gram_bwd_gdn(d_a, kr, b * rk, kr, rk, gc, mt, BT, BK)
    d_kb = d_kbe * e_g + dkb_x
    d_beta = d_beta + ct.sum(kt * d_kb, axis=1, keepdims=True)
    ct.store(dbeta.slice(axis=0, start=bos, stop=eos), (chunk, h),
             tile=ct.astype(d_beta, dbeta.dtype), allow_tma=SLICE_TMA)

    d_k = load_rows(dk_part.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK, SLICE_TMA) + \
        b * d_kb + dk_a
    if USE_L2NORM:
        d_k = (d_k - kt * ct.sum(kt * d_k, axis=1, keepdims=True)) * rk
    store_rows(dk.slice(axis=0, start=bos, stop=eos), chunk, h, d_k, BT, BK, SLICE_TMA)

    dgt = load_rows(dg_part.slice(axis=0, start=bos, stop=eos), chunk, h, BT, 1, SLICE_TMA) + \
        dg_a + ct.sum(kbe * d_kbe, axis=1, keepdims=True)
    dg_rows = ct.cumsum(dgt, axis=0, reverse=True)
    ct.store(dg.slice(axis=0, start=bos, stop=eos), (chunk, h),
             tile=ct.astype(dg_rows, dg.dtype), allow_tma=SLICE_TMA)



def _adjoint_kda(k, v, g, beta, tinv, dv_new, dw, dk_part, dg_part, dk, dv, dg, dbeta,
                 chunk, bos, eos, h, GROUP_QK: int, GROUP_V: int, BT: int, BK: int, BV: int,
                 USE_L2NORM: bool, TIER: int, SLICE_TMA: bool):
    """KDA chunk: every decay is a [BT, BK] tile, so the kernel's cost is how many fp32
    [BT, BK] tiles stay live (64 registers each at 128 threads).  Besides gc, at most two
    do: d(beta k) and the Gram's dk, because
        (beta k E) d(beta k E) + gram_G = k (beta d(beta k) - dk_gram)
    (x = beta k, y = k in the Gram adjoint, d(beta k) = d(beta k E) E + dx) folds every
    dG term into one product, and k stays in the io dtype with its l2norm factor as a row
    scale.  Exponentials on the SFU (`fast_exp`), as in the forward."""
    mt = mma_dtype(k.dtype)
    b = load_column(beta.slice(axis=0, start=bos, stop=eos), chunk, h, BT, SLICE_TMA)
    t_t = ct.astype(ct.transpose(load_rows(tinv.slice(axis=0, start=bos, stop=eos), chunk, h,
                                           BT, BT, SLICE_TMA)), mt)
    # the v side first (dv, its dbeta and dT terms), so its tiles die before k's
    dvn_hi, dvn_lo = split_hi_lo(load_rows(dv_new.slice(axis=0, start=bos, stop=eos), chunk,
                                           h, BT, BV, SLICE_TMA), mt)
    vr = ct.astype(load_rows_raw(v.slice(axis=0, start=bos, stop=eos), chunk, h // GROUP_V,
                                 BT, BV, SLICE_TMA), mt)
    d_bv = ct.mma(t_t, dvn_lo, mm16(t_t, dvn_hi, BT, BV))
    store_rows(dv.slice(axis=0, start=bos, stop=eos), chunk, h, b * d_bv, BT, BV, SLICE_TMA)
    d_beta = ct.sum(ct.astype(vr, ct.float32) * d_bv, axis=1, keepdims=True)
    v_t = ct.transpose(vr)
    d_t = ct.mma(dvn_lo, v_t, mm16(dvn_hi, v_t, BT, BT)) * ct.transpose(b)

    kraw = load_rows_raw(k.slice(axis=0, start=bos, stop=eos), chunk, h // GROUP_QK, BT, BK,
                         SLICE_TMA)
    rk = ct.full((BT, 1), 1.0, ct.float32)
    if USE_L2NORM:
        rk = l2_row_factor(kraw)
    gc, _ = load_gate_cumsum(g.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK, True,
                             SLICE_TMA)
    dw_hi, dw_lo = split_hi_lo(load_rows(dw.slice(axis=0, start=bos, stop=eos), chunk, h,
                                         BT, BK, SLICE_TMA), mt)
    kbe_t = ct.transpose(ct.astype(ct.astype(kraw, ct.float32) * (rk * b) * fast_exp(gc), mt))
    d_t = ct.mma(dw_lo, kbe_t, ct.mma(dw_hi, kbe_t, d_t))
    r, c = row_col_index(BT)
    t_dt = ct.astype(mm16(t_t, ct.astype(d_t, mt), BT, BT), mt)
    d_a = ct.where(r > c, -mm16(t_dt, t_t, BT, BT), 0.0)
    d_kb = ct.mma(t_t, dw_lo, mm16(t_t, dw_hi, BT, BK)) * fast_exp(gc)
    kt = ct.astype(kraw, ct.float32) * rk
    dkb_x, dk_a = gram_bwd(d_a, kt * b, kt, gc, BT, BC, BK, TIER)
    d_kb = d_kb + dkb_x
    d_beta = d_beta + ct.sum(kt * d_kb, axis=1, keepdims=True)
    ct.store(dbeta.slice(axis=0, start=bos, stop=eos), (chunk, h),
             tile=ct.astype(d_beta, dbeta.dtype), allow_tma=SLICE_TMA)
    u = b * d_kb
    dgt = load_rows(dg_part.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK, SLICE_TMA) + \
        kt * (u - dk_a)
    # reverse cumsum along the second axis of the transpose (cheaper, see load_gate_cumsum)
    store_rows(dg.slice(axis=0, start=bos, stop=eos), chunk, h,
               ct.transpose(ct.cumsum(ct.transpose(dgt), axis=1, reverse=True)), BT, BK, SLICE_TMA)
    d_k = load_rows(dk_part.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK,
                    SLICE_TMA) + u + dk_a
    if USE_L2NORM:
        d_k = (d_k - kt * ct.sum(kt * d_k, axis=1, keepdims=True)) * rk
    store_rows(dk.slice(axis=0, start=bos, stop=eos), chunk, h, d_k, BT, BK, SLICE_TMA)

def mm16(a, b, M: int, N: int):
    """a @ b of two 16-bit (or fp32) tiles, fp32 result."""
    return ct.mma(a, b, ct.zeros((M, N), dtype=ct.float32))
