"""FROST backward, kernel 2, scalar gates, warp-specialised: on its own an experiment, the
base of the product's four-role chain (bwd_chain_ws4.py).

Built alone only by the test tooling (FrostBwdConfig.chain_ws, FROST_BWD_CHAIN=wgmma_ws: NOTES_bwd.md
"Warp-specialised scalar-gate chain"; 37 % slower than the scaled chain on the H200). The scaled-decay chain (bwd_chain_scaled.py) left a
chunk's prep as rows (q-hat, k-hat, dO^T, the gate scan), factor rows and the Gram (P^T,
(-M)^T, the inverses), none of which depends on dS: the forward's split applies
(fwd_ws.py). A CTA has 16 warps: warps 0-7, the consumers, run the scaled chain step
(the same code, warp indices and dS^T registers) chunk after chunk backwards, storing each
chunk's dS^T checkpoint and dR; warps 8-15, the producer, run chunk j - 1's prep into the
other of two operand sets while the consumers run chunk j, and copy chunk j - 2's rows
(q, k, dO, gates, beta) into private raw tiles as soon as chunk j - 1's rows stage has
read them. The hand-over is the forward's (named barriers FULL / EMPTY per set, 512
threads; fwd_ws.waits_for_release / releases), the register split too (216 / 40).

Operand sets (two): q-hat, k-hat [C, K] and P^T [C, C] (SW128), (-M)^T, the inverses,
dO^T [V, C], the factor rows, e^Gam_last; the producer's own: the raw q, k, dO rows, two
gate / beta rows, M's diagonal blocks. ~200 KB at K = V = 128: no room for the per-warp
dR store buffers, so dR leaves element by element (chain_dr's unstaged path).

GDN, bf16, K = V = 128, sm_90a.
"""
from __future__ import annotations

from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass.cute.nvgpu import warpgroup

from cudnn.linear_attention.frost.kernels.bwd_chain_scaled import FrostBwdChainScaled
from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import FrostBwdChainWgmma
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.bwd_states import FrostBwdStates
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fragment_stores import store_rows_vectorised
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, PAD16, SUB, SW128, allocate_smem, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import lane_in_loop, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import write_decay_factors
from cudnn.linear_attention.frost.kernels.fwd_ws import (
    BAR_EMPTY,
    BAR_FULL,
    BAR_PRODUCER,
    BLOCK_THREADS,
    CONSUMER_REGS,
    CONSUMER_WARPS,
    PRODUCER_REGS,
    ROLE_THREADS,
    SETS,
    releases,
    waits_for_release,
    zero_blocks,
)


def smem_plan(c: FrostFwdConfig):
    """Two operand sets stacked as double-height tiles (set b = rows [C b, C b + C), dO^T
    rows [V b, V b + V)), the producer's raw rows and M's diagonal blocks."""
    K, V, C = c.K, c.V, CHUNK

    def rows(name, r, cols):
        return (name, "bf16", (r, cols), (cols + PAD16, 1))

    return [
        ("q", "bf16", (2 * C, K), SW128), ("k", "bf16", (2 * C, K), SW128), ("pt", "bf16", (2 * C, C), SW128),
        rows("mnegt", 2 * C, C), rows("dot", 2 * V, C),
        ("dinvt", "bf16", (2 * NBLK, SUB, SUB), (SUB * 24, 24, 1)),
        ("fac", "f32", (2, 3, C), (3 * C, C, 1)), ("alast", "f32", (2,), (1,)),
        rows("rq", C, K), rows("rk", C, K), rows("rdo", C, V),  # raw rows (the producer's)
        ("g", "f32", (2 * C, 1), (1, 1)), ("beta", "f32", (2 * C,), (1,)),  # raw, then scanned
        ("md", "f32", (NBLK, SUB, SUB), (SUB * 17, 17, 1)),
    ]


class FrostBwdChainWs(FrostBwdChainScaled):
    """Callable for cute.compile (bwd_abi's argument list), as FrostBwdChainScaled."""

    smem_plan = staticmethod(smem_plan)
    consumer_regs = CONSUMER_REGS
    producer_regs = PRODUCER_REGS

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_ws:
            raise ValueError("FrostBwdChainWs: a chain config with chain_ws set")
        if (cfg.fwd.K, cfg.fwd.V) != (128, 128):
            raise ValueError(f"FrostBwdChainWs: built for K = V = 128 (two consumer warpgroups), got "
                             f"K={cfg.fwd.K}, V={cfg.fwd.V}")
        super().__init__(cfg)
        self.staged = False  # no dR store buffers beside two operand sets
        if cfg.chain_ws_regs:  # the experiment's split (FROST_BWD_WS_REGS), keyed in the config
            self.consumer_regs, self.producer_regs = cfg.chain_ws_regs

    @cute.jit
    def launch_kernel(self, m, T: Int32, N: Int32, scale: Float32, stream: cuda.CUstream):
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu_seqlens, m.dO, m.d_final_state, m.d_initial_state,
                    m.dckpt, m.dr, scale, T, N, m.dq, m.dk, m.dv, m.dg, m.dbeta, m.dw).launch(
            grid=[N, self.cfg.HO, 1], block=[BLOCK_THREADS, 1, 1], stream=stream)

    # ------------------------------------------------------------------ operand sets
    def set_views(self, s, b):
        """Operand set b (a run-time 0 or 1) under the stages' tile names."""
        K, V, C = self.cfg.K, self.cfg.V, CHUNK
        return SimpleNamespace(
            q=cute.local_tile(s.q, (C, K), (b, 0)), k=cute.local_tile(s.k, (C, K), (b, 0)),
            pt=cute.local_tile(s.pt, (C, C), (b, 0)), mnegt=cute.local_tile(s.mnegt, (C, C), (b, 0)),
            dot=cute.local_tile(s.dot, (V, C), (b, 0)),
            dinvt=cute.local_tile(s.dinvt, (NBLK, SUB, SUB), (b, 0, 0)),
            fac=s.fac[b, None, None], alast=cute.local_tile(s.alast, (1,), (b,)),
            g=cute.local_tile(s.g, (C, 1), (b, 0)), beta=cute.local_tile(s.beta, (C,), (b,)),
            md=s.md, gmem=s.gmem)

    def raw_views(self, s, b):
        """The producer's copy targets for a chunk of parity b, under the pipelined forward's prefetch names
        (prefetch_rows: q, k, g, beta; prefetch_do: w0)."""
        C = CHUNK
        return SimpleNamespace(q=s.rq, k=s.rk, w0=s.rdo, g=cute.local_tile(s.g, (C, 1), (b, 0)),
                               beta=cute.local_tile(s.beta, (C,), (b,)), gmem=s.gmem)

    def chunk_tiles(self, s, t0):
        """The consumers pass the chunk's set itself (set_views)."""
        return s

    # ------------------------------------------------------------------ kernel
    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor, mb: cute.Tensor,
               mw: cute.Tensor, mcu: cute.Tensor, mdo: cute.Tensor, mdht: cute.Tensor, mdh0: cute.Tensor,
               mdckpt: cute.Tensor, mdr: cute.Tensor, scale: Float32, T: Int32, N: Int32, mdq: cute.Tensor,
               mdk: cute.Tensor, mdv: cute.Tensor, mdg: cute.Tensor, mdb: cute.Tensor, mdw: cute.Tensor):
        c = self.cfg
        C = CHUNK
        tid, _, _ = cute.arch.thread_idx()
        n, h, _ = cute.arch.block_idx()
        heads = c.heads_of(h)
        s = allocate_smem(self.smem_plan(c))
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        bos, eos, nch, row0 = self.chunk_span(mcu, n, T)
        s.gmem = SimpleNamespace(q=mq, k=mk, v=mv, g=mg, b=mb, w=mw, do=mdo, heads=heads)
        self.zero_set_blocks(s, tid)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()
        if wid >= CONSUMER_WARPS:
            self.state_free_roles(s, mb, heads, bos, eos, nch, scale, tid, wid, lane)
        else:
            cute.arch.setmaxregister_increase(self.consumer_regs)
            self.consume(s, mdht, mdh0, mdckpt, mdr, heads, n, h, bos, eos, nch, row0, wid, lane)
            if cutlass.const_expr(self.bcfg.forward_values):
                # no states / values kernel ran: the gradient rows no sequence covers are
                # zeroed here, before grads writes the others (FrostBwdChain.kernel)
                if n == N - 1 and wid == 0:
                    FrostBwdStates.zero_gradient_rows(self, mcu, T, N, mdq, mdk, mdv, mdg, mdb, mdw, h, lane)

    @cute.jit
    def state_free_roles(self, s, mb, heads, bos, eos, nch, scale, tid, wid, lane):
        """Warps 8-15 (wid >= CONSUMER_WARPS): one producer (bwd_chain_ws4.py splits them)."""
        cute.arch.setmaxregister_decrease(self.producer_regs)
        self.produce(s, mb, heads, bos, eos, nch, scale, tid - ROLE_THREADS, wid - CONSUMER_WARPS, lane)

    @cute.jit
    def zero_set_blocks(self, s, tid):
        """P^T's blocks below the diagonal (P[s, t] = 0 for s < t) in both sets, by every
        thread before the roles split: no Gram stage writes them and dU's wgmma reads the
        whole tile."""
        zero_blocks(s.pt, tid, BLOCK_THREADS, False)

    # ------------------------------------------------------------------ producer
    @cute.jit
    def copy_rows(self, s, j, bos, eos, i, ptid):
        """Chunk j's q, k, dO into the raw tiles and its gates and beta into parity i % SETS
        (i: the chunk's place in the backward walk), one committed group."""
        t0 = bos + j * CHUNK
        raw = self.raw_views(s, i % SETS)
        self.prefetch_rows(raw, t0, eos, ptid)
        self.prefetch_do(raw, t0, eos, ptid)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def produce(self, s, mb, heads, bos, eos, nch, scale, ptid, pwid, lane):
        if nch > 0:
            self.copy_rows(s, nch - 1, bos, eos, 0, ptid)
        for i in cutlass.range(nch, unroll=1):
            j = nch - 1 - i
            t0 = bos + j * CHUNK
            b = i % SETS
            ptid = tid_in_loop() - ROLE_THREADS  # per chunk (volatile): hoisted addresses spill
            lane = lane_in_loop()
            thr = warp_mma().get_slice(lane)
            cute.arch.cp_async_wait_group(0)
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)  # raw rows landed
            if waits_for_release(i):
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            self.rows_from(st, s.rq, s.rk, s.rdo, heads, t0, eos, ptid)  # the chain's rows stage into set b
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)  # raw rows read
            if i + 1 < nch:
                self.copy_rows(s, j - 1, bos, eos, i + 1, ptid)
            write_decay_factors(st.g, st.beta, st.fac, st.alast, scale, ptid)
            FrostBwdChainWgmma.stage_gram(self, st, mb, heads, t0, eos, scale, thr, lane, pwid)  # + proxy fence
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    # ------------------------------------------------------------------ consumers
    @cute.jit
    def consumer_chain(self, st, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid):
        """One chain step on operand set st: the scaled chain's (bwd_chain_ws_wy.py has its own)."""
        FrostBwdChainScaled.chain(self, st, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid)

    def chunk_set(self, s, i):
        """The operand set the chain reads for its i-th chunk (bwd_chain_ws4's ring adds the
        chunk's raw rows)."""
        return self.set_views(s, i % SETS)

    @cute.jit
    def release_chunk(self, i, nch):
        """The chain's arrive on EMPTY of its i-th chunk's set, where chunk i + SETS exists."""
        if releases(i, nch):
            cute.arch.barrier_arrive(barrier_id=BAR_EMPTY + i % SETS, number_of_threads=BLOCK_THREADS)

    @cute.jit
    def consume(self, s, mdht, mdh0, mdckpt, mdr, heads, n, h, bos, eos, nch, row0, wid, lane):
        thr = warp_mma().get_slice(lane)
        acc_ds, coord = self.initial_ds(mdht, n, h, thr, wid)
        for i in cutlass.range(nch, unroll=1):
            j = nch - 1 - i
            t0 = bos + j * CHUNK
            b = i % SETS
            # a no-op at run time (the previous step retired its update below), but without
            # it ptxas did not see that retirement on the loop's back edge and injected a
            # wait on this step's first wgmma group instead (C7517), serialising it with the
            # dS^T decay and the dO^T loads it should overlap
            warpgroup.wait_group(0)
            # dS^T leaving chunk j, final
            store_rows_vectorised(mdckpt[row0 + j, h, None, None], acc_ds, wid * SUB, lane, self.cfg.K)
            cute.arch.barrier(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)
            self.consumer_chain(self.chunk_set(s, i), mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid)
            warpgroup.wait_group(0)  # the update read q-hat and k-hat: retired before set b is released
            self.release_chunk(i, nch)
        if cutlass.const_expr(self.bcfg.dh0_dtype is not None):
            for e in cutlass.range_constexpr(cute.size(acc_ds)):
                jd = coord[e]
                mdh0[n, h, wid * SUB + jd[0], jd[1]] = acc_ds[e].to(mdh0.element_type)
