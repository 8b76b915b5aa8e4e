"""Forward stage 2: the inter-chunk state recurrence fused with the outputs.

One CTA owns one (sequence, output head, V block) and walks its chunks in order with
the state S (K x BV, fp32) on chip.  Stage 1 (wy_fwd) left per chunk: w, u, P, the
decayed queries qg = scale * q * exp(G), the decayed keys kd = k * exp(G_last - G) and
decay = exp(G_last) (a scalar for GDN, one per key channel for KDA), so each step is
    v_new = u - w @ S                                       [BT, BV]
    o     = qg @ S + P @ v_new
    S     = decay^T * S + kd^T @ v_new
Operands go to the tensor cores in the io dtype with fp32 accumulation; S stays fp32.  The
state enters from `initial_state` (or zeros) and leaves into `final_state`, both
V-major [N, HO, V, K].  Fusing the output into the recurrence avoids writing and
re-reading one K x V state per chunk (268 MB in bf16 at 8 x 4096 tokens, 16 heads,
K = V = 128).

With ROW_SCALES (GDN forward) stage 1 wrote no qg / kd: a GDN decay is one scalar per
row, so the kernel reads q, k (the q/k head h // GROUP_QK) and the row factors q_row =
scale r_q exp(G), k_row = r_k exp(G_last - G) ([T, HO] fp32; r = l2norm factors):
    o = q_row * (q @ S) + P @ v_new,    S = decay S + k^T @ (k_row * v_new)
so q and k reach the tensor cores exactly as loaded.

With RECOMPUTE (the backward's first pass) the kernel writes, instead of o, the state
entering every chunk (`states` [rows, HO, K, V], io dtype, row = chunk-table row) and
v_new ([T, HO, V], io dtype).

Grid: (N, HO, ceil(V / BV)).
"""
import cuda.tile as ct

from .tile_io import ZERO, load_rows_raw, load_state_vmajor, store_state_vmajor
from .wy_fwd import load_column


@ct.kernel(occupancy=2)
def la_chunk_fwd_kernel(w, u, p, qg, kd, decay, cu_seqlens, chunk_offsets,
                        initial_state, final_state, o, states, v_new_out, q, k, q_row,
                        k_row, GROUP_QK: ct.Constant[int],
                        BT: ct.Constant[int], BK: ct.Constant[int], BV: ct.Constant[int],
                        GW: ct.Constant[int], HAS_INITIAL: ct.Constant[bool],
                        STORE_FINAL: ct.Constant[bool], RECOMPUTE: ct.Constant[bool],
                        ROW_SCALES: ct.Constant[bool], SLICE_TMA: ct.Constant[bool]):
    n = ct.bid(0)
    h = ct.bid(1)
    vb = ct.bid(2)
    bos = ct.load(cu_seqlens, (n,), shape=())
    eos = ct.load(cu_seqlens, (n + 1,), shape=())
    if HAS_INITIAL:
        state = load_state_vmajor(initial_state, n, h, vb, BK, BV)
    else:
        state = ct.zeros((BK, BV), dtype=ct.float32)

    if eos > bos:
        first_row = ct.load(chunk_offsets, (n,), shape=())
        ws = w.slice(axis=0, start=bos, stop=eos)
        us = u.slice(axis=0, start=bos, stop=eos)
        ps = p.slice(axis=0, start=bos, stop=eos)
        if ROW_SCALES:
            qs = q.slice(axis=0, start=bos, stop=eos)
            ks = k.slice(axis=0, start=bos, stop=eos)
            qrs = q_row.slice(axis=0, start=bos, stop=eos)
            krs = k_row.slice(axis=0, start=bos, stop=eos)
        else:
            qs = qg.slice(axis=0, start=bos, stop=eos)
            ks = kd.slice(axis=0, start=bos, stop=eos)
        if RECOMPUTE:
            vns = v_new_out.slice(axis=0, start=bos, stop=eos)
        else:
            os_ = o.slice(axis=0, start=bos, stop=eos)
        qk_head = h // GROUP_QK   # 1 unless ROW_SCALES (ROW_SCALES)
        for chunk in range(ct.cdiv(eos - bos, BT)):
            ut = ct.astype(ct.reshape(ct.load(us, (chunk, h, vb), shape=(BT, 1, BV),
                                              padding_mode=ZERO, allow_tma=SLICE_TMA),
                                      (BT, BV)), ct.float32)
            dec = ct.reshape(ct.load(decay, (first_row + chunk, h, 0), shape=(1, 1, GW),
                                     padding_mode=ZERO), (1, GW))
            s_lo = ct.astype(state, w.dtype)
            v_new = ut - ct.mma(load_rows_raw(ws, chunk, h, BT, BK, SLICE_TMA), s_lo,
                                ct.zeros((BT, BV), dtype=ct.float32))
            v_lo = ct.astype(v_new, w.dtype)
            if RECOMPUTE:
                ct.store(states, (first_row + chunk, h, 0, vb),
                         tile=ct.reshape(s_lo, (1, 1, BK, BV)))
                ct.store(vns, (chunk, h, vb), tile=ct.reshape(v_lo, (BT, 1, BV)),
                         allow_tma=SLICE_TMA)
            else:
                out = ct.mma(load_rows_raw(qs, chunk, qk_head, BT, BK, SLICE_TMA), s_lo,
                             ct.zeros((BT, BV), dtype=ct.float32))
                if ROW_SCALES:
                    out = out * load_column(qrs, chunk, h, BT, SLICE_TMA)
                out = ct.mma(load_rows_raw(ps, chunk, h, BT, BT, SLICE_TMA), v_lo, out)
                ct.store(os_, (chunk, h, vb),
                         tile=ct.reshape(ct.astype(out, o.dtype), (BT, 1, BV)),
                         allow_tma=SLICE_TMA)
            v_k = v_lo
            if ROW_SCALES:
                v_k = ct.astype(v_new * load_column(krs, chunk, h, BT, SLICE_TMA), w.dtype)
            state = state * ct.transpose(dec) + ct.mma(
                ct.transpose(load_rows_raw(ks, chunk, qk_head, BT, BK, SLICE_TMA)), v_k,
                ct.zeros((BK, BV), dtype=ct.float32))

    if STORE_FINAL:
        store_state_vmajor(final_state, n, h, vb, state, BK, BV)
