"""FROST forward, the SIMT oracle: the simplest correct fused CuTe DSL kernel (fp32 in shared memory).

One CTA per (sequence n, output head h, block of BV value columns); it reads its
sequence bounds from cu_seqlens on the device and walks the sequence's chunks of C = 64
tokens serially, holding the state S [K, BV] (FLA orientation) in shared memory. The
per-chunk algebra is the WY/UT form derived in kernels/NOTES.md and modelled in float64 by
frost_chunk_model.py (decay_mode="pairwise"). This kernel is the correctness oracle for
the tensor-core kernels (fwd_mma.py and the product's layers built on it); it is written for clarity, not speed.
Test-only: it is not part of the shipped package (kernels/), the engines never launch it;
frost_oracle_emulation_test.py runs its source on the CPU and tests/numerics/la_frost_smoke.py
launches it on the GPU (--algorithm oracle) through frost_fwd_experiments.py.

Compile-time specialisation comes from FrostFwdConfig (kernels/config.py): GDN, KDA and
GDN-2 differ only in the gate/beta/w shapes, selected with const_expr branches.
Padded rows of a partial chunk load as zero (q, k, v, gate, beta, w): their gate is 0 so
the cumulative gate at row C-1 equals the last real row's, and k = 0 keeps them out of
every product; they are never stored. Sequence bounds are clamped into [0, T] and rows no
sequence covers are zeroed, whatever cu_seqlens holds (seq_bounds.py).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cuda.bindings.driver as cuda
from cutlass import Float32, Int32

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.gmem_views import operand_views
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype
from cudnn.linear_attention.frost.kernels.seq_bounds import (WARP, sequence_bounds, table_order,
                                                             zero_uncovered_rows)

CHUNK = 64
THREADS = 256
BLOCK_V = 32


class FrostFwdOracle:
    """Callable for cute.compile: __call__ is the host-side @cute.jit launcher (signature in
    launch_abi.py), kernel() the device code."""

    def __init__(self, cfg: FrostFwdConfig):
        self.cfg = cfg
        self.io = cutlass_dtype(cfg.io_dtype)
        self.st = cutlass_dtype(cfg.state_dtype) if cfg.state_dtype else Float32
        self.bv = min(BLOCK_V, cfg.V)

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_g: cute.Pointer,
                 p_beta: cute.Pointer, p_w: cute.Pointer, p_cu: cute.Pointer, p_out: cute.Pointer,
                 p_h0: cute.Pointer, p_ht: cute.Pointer, T: Int32, N: Int32, scale: Float32,
                 stream: cuda.CUstream):
        m = operand_views(self.cfg, p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, T, N)
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu, m.out, m.h0, m.ht, scale, T, N).launch(
            grid=[N, self.cfg.HO, self.cfg.V // self.bv], block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor,
               mb: cute.Tensor, mw: cute.Tensor, mcu: cute.Tensor, mo: cute.Tensor,
               mh0: cute.Tensor, mht: cute.Tensor, scale: Float32, T: Int32, N: Int32):
        c = self.cfg
        K, BV, C = c.K, self.bv, CHUNK
        tid, _, _ = cute.arch.thread_idx()
        n, h, vb = cute.arch.block_idx()
        v0 = vb * BV
        hq = h // (c.HO // c.H)
        hk = h // (c.HO // c.HK)
        hv = h // (c.HO // c.HV)

        smem = cutlass.memory.SmemAllocator()
        rows_k = cute.make_layout((C, K), stride=(K + 1, 1))  # +1 pad: column walks hit all banks
        rows_v = cute.make_layout((C, BV), stride=(BV + 1, 1))
        sq = smem.allocate_tensor(Float32, rows_k, 16)
        sk = smem.allocate_tensor(Float32, rows_k, 16)
        skb = smem.allocate_tensor(Float32, rows_k, 16)
        gk = K if c.gate_per_channel else 1
        sg = smem.allocate_tensor(Float32, cute.make_layout((C, gk), stride=(gk + 1, 1)), 16)
        sbeta = smem.allocate_tensor(Float32, cute.make_layout((C,)), 16)
        sinv = smem.allocate_tensor(Float32, cute.make_layout((2, C), stride=(C, 1)), 16)
        su = smem.allocate_tensor(Float32, rows_v, 16)
        so = smem.allocate_tensor(Float32, rows_v, 16)
        sm = smem.allocate_tensor(Float32, cute.make_layout((C, C), stride=(C + 1, 1)), 16)
        sp = smem.allocate_tensor(Float32, cute.make_layout((C, C), stride=(C + 1, 1)), 16)
        ss = smem.allocate_tensor(Float32, cute.make_layout((K, BV), stride=(BV + 1, 1)), 16)

        # State init: the stored state is S^T [V, K]; S [K, BV] here.
        for i in cutlass.range(tid, K * BV, THREADS):
            d = i % K
            j = i // K
            val = Float32(0.0)
            if cutlass.const_expr(c.has_initial_state):
                val = mh0[n, h, v0 + j, d].to(Float32)
            ss[d, j] = val
        cute.arch.sync_threads()

        bos, eos = sequence_bounds(mcu, n, T)  # inside [0, T] whatever cu_seqlens holds
        for t0 in cutlass.range(bos, eos, C):
            self.load_chunk(mq, mk, mv, mg, mb, mw, sq, sk, skb, sg, sbeta, su, t0, eos, hq, hk, hv, h, v0, tid)
            cute.arch.sync_threads()
            self.prepare_rows(sq, sk, sg, sinv, tid)
            cute.arch.sync_threads()
            self.finish_rows(sq, sk, skb, sbeta, sinv, tid)
            cute.arch.sync_threads()
            self.gram_and_state_reads(sq, sk, skb, sg, ss, sm, sp, su, so, scale, tid)
            cute.arch.sync_threads()
            self.forward_substitution(sm, su, tid)
            cute.arch.sync_threads()
            self.output_and_state_update(mo, sk, sg, sp, su, so, ss, t0, eos, h, v0, tid)
            cute.arch.sync_threads()

        if cutlass.const_expr(c.has_final_state):
            for i in cutlass.range(tid, K * BV, THREADS):
                d = i % K
                j = i // K
                mht[n, h, v0 + j, d] = ss[d, j].to(self.st)

        # the last sequence's CTAs zero this slice of the rows no sequence covers
        if n == N - 1 and tid < WARP:
            first, last, ordered = table_order(mcu, N, T, tid)
            zero_uncovered_rows(mcu, N, T, mo, h, v0, BV, first, last, ordered, tid)

    @cute.jit
    def load_chunk(self, mq, mk, mv, mg, mb, mw, sq, sk, skb, sg, sbeta, su, t0, eos, hq, hk, hv, h, v0, tid):
        """Rows t0..t0+C-1 into shared memory as fp32; rows at or past eos read as zero.
        su receives the delta rule's write term: beta v (GDN/KDA) or w * v (GDN-2)."""
        c = self.cfg
        K, BV, C = c.K, self.bv, CHUNK
        for i in cutlass.range(tid, C * K, THREADS):
            r = i // K
            d = i % K
            t = t0 + r
            qv = Float32(0.0)
            kv = Float32(0.0)
            gv = Float32(0.0)
            bv = Float32(0.0)
            if t < eos:
                qv = mq[t, hq, d].to(Float32)
                kv = mk[t, hk, d].to(Float32)
                if cutlass.const_expr(c.gate_per_channel):
                    gv = mg[t, h, d].to(Float32)
                if cutlass.const_expr(c.beta_per_channel):
                    bv = mb[t, h, d].to(Float32)
            sq[r, d] = qv
            sk[r, d] = kv
            if cutlass.const_expr(c.gate_per_channel):
                sg[r, d] = gv
            if cutlass.const_expr(c.beta_per_channel):
                skb[r, d] = bv
        if tid < C:
            t = t0 + tid
            gv = Float32(0.0)
            bv = Float32(0.0)
            if t < eos:
                if cutlass.const_expr(not c.gate_per_channel):
                    gv = mg[t, h, 0].to(Float32)
                if cutlass.const_expr(not c.beta_per_channel):
                    bv = mb[t, h, 0].to(Float32)
            if cutlass.const_expr(not c.gate_per_channel):
                sg[tid, 0] = gv
            sbeta[tid] = bv
        for i in cutlass.range(tid, C * BV, THREADS):
            r = i // BV
            j = i % BV
            t = t0 + r
            val = Float32(0.0)
            if t < eos:
                val = mv[t, hv, v0 + j].to(Float32)
                if cutlass.const_expr(c.has_w):
                    val = val * mw[t, h, v0 + j].to(Float32)
                else:  # scalar beta (GDN, KDA): read from global, sbeta is written in this same stage
                    val = val * mb[t, h, 0].to(Float32)
            su[r, j] = val

    @cute.jit
    def prepare_rows(self, sq, sk, sg, sinv, tid):
        """Inclusive cumsum of the log gates down the chunk (one thread per channel) and the
        inverse L2 norms of the q and k rows (one thread per row)."""
        c = self.cfg
        K, C = c.K, CHUNK
        gk = K if c.gate_per_channel else 1
        if tid < gk:
            acc = Float32(0.0)
            for r in cutlass.range(C):
                acc = acc + sg[r, tid]
                sg[r, tid] = acc
        if cutlass.const_expr(c.use_l2norm):
            if tid >= 128 and tid < 128 + 2 * C:
                which = (tid - 128) // C
                r = (tid - 128) % C
                acc = Float32(0.0)
                if which == 0:
                    for d in cutlass.range(K):
                        acc = acc + sq[r, d] * sq[r, d]
                else:
                    for d in cutlass.range(K):
                        acc = acc + sk[r, d] * sk[r, d]
                sinv[which, r] = cute.math.rsqrt(acc + Float32(1e-6))

    @cute.jit
    def finish_rows(self, sq, sk, skb, sbeta, sinv, tid):
        """Apply the L2 norms and form kb = beta k (or b * k for GDN-2)."""
        c = self.cfg
        K, C = c.K, CHUNK
        for i in cutlass.range(tid, C * K, THREADS):
            r = i // K
            d = i % K
            kv = sk[r, d]
            if cutlass.const_expr(c.use_l2norm):
                kv = kv * sinv[1, r]
                sk[r, d] = kv
                sq[r, d] = sq[r, d] * sinv[0, r]
            if cutlass.const_expr(c.beta_per_channel):
                skb[r, d] = skb[r, d] * kv
            else:
                skb[r, d] = sbeta[r] * kv

    @cute.jit
    def gram_and_state_reads(self, sq, sk, skb, sg, ss, sm, sp, su, so, scale, tid):
        """M (strictly lower), P (lower with diagonal, scaled), RHS -= (kb*A) S, O0 = scale (q*A) S."""
        c = self.cfg
        K, BV, C = c.K, self.bv, CHUNK
        for i in cutlass.range(tid, C * C, THREADS):
            t = i // C
            s = i % C
            m = Float32(0.0)
            p = Float32(0.0)
            if s <= t:
                if cutlass.const_expr(c.gate_per_channel):
                    for d in cutlass.range(K):
                        e = sk[s, d] * cute.math.exp(sg[t, d] - sg[s, d])
                        m = m + skb[t, d] * e
                        p = p + sq[t, d] * e
                else:
                    for d in cutlass.range(K):
                        m = m + skb[t, d] * sk[s, d]
                        p = p + sq[t, d] * sk[s, d]
                    e = cute.math.exp(sg[t, 0] - sg[s, 0])
                    m = m * e
                    p = p * e
                if s == t:
                    m = Float32(0.0)
            sm[t, s] = m
            sp[t, s] = p * scale
        for i in cutlass.range(tid, C * BV, THREADS):
            r = i // BV
            j = i % BV
            acc_k = Float32(0.0)
            acc_q = Float32(0.0)
            if cutlass.const_expr(c.gate_per_channel):
                for d in cutlass.range(K):
                    a = cute.math.exp(sg[r, d]) * ss[d, j]
                    acc_k = acc_k + skb[r, d] * a
                    acc_q = acc_q + sq[r, d] * a
            else:
                for d in cutlass.range(K):
                    acc_k = acc_k + skb[r, d] * ss[d, j]
                    acc_q = acc_q + sq[r, d] * ss[d, j]
                a = cute.math.exp(sg[r, 0])
                acc_k = acc_k * a
                acc_q = acc_q * a
            su[r, j] = su[r, j] - acc_k
            so[r, j] = acc_q * scale

    @cute.jit
    def forward_substitution(self, sm, su, tid):
        """(I + M) U = RHS in place: columns are independent, one thread per column."""
        BV, C = self.bv, CHUNK
        if tid < BV:
            for t in cutlass.range(1, C):
                acc = su[t, tid]
                for s in cutlass.range(t):
                    acc = acc - sm[t, s] * su[s, tid]
                su[t, tid] = acc

    @cute.jit
    def output_and_state_update(self, mo, sk, sg, sp, su, so, ss, t0, eos, h, v0, tid):
        """O = O0 + P U (stored for real rows); S <- exp(Gam_last) S + (k exp(Gam_last - Gam))^T U."""
        c = self.cfg
        K, BV, C = c.K, self.bv, CHUNK
        for i in cutlass.range(tid, C * BV, THREADS):
            r = i // BV
            j = i % BV
            t = t0 + r
            if t < eos:
                acc = so[r, j]
                for s in cutlass.range(r + 1):
                    acc = acc + sp[r, s] * su[s, j]
                mo[t, h, v0 + j] = acc.to(mo.element_type)
        for i in cutlass.range(tid, K * BV, THREADS):
            d = i // BV
            j = i % BV
            last = self.gate(sg, C - 1, d)
            acc = Float32(0.0)
            for s in cutlass.range(C):
                acc = acc + sk[s, d] * cute.math.exp(last - self.gate(sg, s, d)) * su[s, j]
            ss[d, j] = cute.math.exp(last) * ss[d, j] + acc

    @cute.jit
    def gate(self, sg, r, d):
        """Cumulative log gate of row r at channel d (scalar gates: one column)."""
        if cutlass.const_expr(self.cfg.gate_per_channel):
            return sg[r, d]
        return sg[r, 0]
