"""Backward stage 2: the reverse state-gradient recurrence (FLA's chunk_bwd_dhu).

One CTA owns one (sequence, output head, V block) and walks its chunks from the last
to the first with dS = dL/d(state leaving the chunk) on chip (K x BV, fp32), starting
from d_final_state (or zeros).  With the forward-stage-1 scratch of the chunk (P, qg,
kd, w, decay; see wy_fwd) and dO:
    dv_new = P^T @ dO + kd @ dS                               [BT, BV]
    dS     = decay^T * dS + qg^T @ dO - w^T @ dv_new
Writes dS (the gradient of the state leaving every chunk, `dstates` [rows, HO, K, V],
io dtype), dv_new ([T, HO, V], fp32) and, for a given initial state, the gradient of
the state entering the sequence (`d_initial_state`, V-major [N, HO, V, K], fp32).

Grid: (N, HO, ceil(V / BV)).
"""
import cuda.tile as ct

from .tile_io import ZERO, load_rows_raw, load_state_vmajor, store_state_vmajor
from .tile_math import mma_dtype


@ct.kernel(occupancy=2)
def la_chunk_bwd_dhu_kernel(w, p, qg, kd, decay, d_out, cu_seqlens, chunk_offsets,
                            d_final_state, d_initial_state, dstates, dv_new_out,
                            BT: ct.Constant[int], BK: ct.Constant[int], BV: ct.Constant[int],
                            GW: ct.Constant[int], HAS_D_FINAL: ct.Constant[bool],
                            STORE_D_INITIAL: ct.Constant[bool],
                            SLICE_TMA: ct.Constant[bool]):
    n = ct.bid(0)
    h = ct.bid(1)
    vb = ct.bid(2)
    bos = ct.load(cu_seqlens, (n,), shape=())
    eos = ct.load(cu_seqlens, (n + 1,), shape=())
    if HAS_D_FINAL:
        ds = load_state_vmajor(d_final_state, n, h, vb, BK, BV)
    else:
        ds = ct.zeros((BK, BV), dtype=ct.float32)

    if eos > bos:
        first_row = ct.load(chunk_offsets, (n,), shape=())
        ws = w.slice(axis=0, start=bos, stop=eos)
        ps = p.slice(axis=0, start=bos, stop=eos)
        qs = qg.slice(axis=0, start=bos, stop=eos)
        ks = kd.slice(axis=0, start=bos, stop=eos)
        dos = d_out.slice(axis=0, start=bos, stop=eos)
        dvs = dv_new_out.slice(axis=0, start=bos, stop=eos)
        n_chunks = ct.cdiv(eos - bos, BT)
        mt = mma_dtype(w.dtype)   # the scratch dtype; TF32 when staged in fp32
        for step in range(n_chunks):
            chunk = n_chunks - 1 - step
            ct.store(dstates, (first_row + chunk, h, 0, vb),
                     tile=ct.reshape(ct.astype(ds, dstates.dtype), (1, 1, BK, BV)))
            ds_lo = ct.astype(ds, mt)
            dot = ct.reshape(ct.load(dos, (chunk, h, vb), shape=(BT, 1, BV), padding_mode=ZERO,
                                     allow_tma=SLICE_TMA), (BT, BV))
            dot = ct.astype(dot, mt)
            dv = ct.mma(ct.transpose(ct.astype(load_rows_raw(ps, chunk, h, BT, BT, SLICE_TMA),
                                               mt)), dot,
                        ct.zeros((BT, BV), dtype=ct.float32))
            dv = ct.mma(ct.astype(load_rows_raw(ks, chunk, h, BT, BK, SLICE_TMA), mt), ds_lo, dv)
            ct.store(dvs, (chunk, h, vb), tile=ct.reshape(ct.astype(dv, dv_new_out.dtype),
                                                         (BT, 1, BV)), allow_tma=SLICE_TMA)
            dec = ct.reshape(ct.load(decay, (first_row + chunk, h, 0), shape=(1, 1, GW),
                                     padding_mode=ZERO), (1, GW))
            ds = ds * ct.transpose(dec)
            ds = ct.mma(ct.transpose(ct.astype(load_rows_raw(qs, chunk, h, BT, BK, SLICE_TMA),
                                               mt)), dot, ds)
            ds = ds - ct.mma(ct.transpose(ct.astype(load_rows_raw(ws, chunk, h, BT, BK, SLICE_TMA),
                                                    mt)),
                             ct.astype(dv, mt), ct.zeros((BK, BV), dtype=ct.float32))

    if STORE_D_INITIAL:
        store_state_vmajor(d_initial_state, n, h, vb, ds, BK, BV)
