"""FROST backward, kernel 2, scalar gates, warp-specialised, without the back substitution:
on its own an experiment (FrostBwdConfig.chain_wy, the test tooling's FROST_BWD_CHAIN=
wgmma_wy; NOTES_bwd.md "The chain without its back substitution"), the base of the
product's four-role chain (bwd_chain_ws4.py).

bwd_chain_ws.py's consumers solve dR = (I + M)^-T dU by back substitution (four dependent
16-row blocks per warp) between dU and the dS^T update, on the state's critical path. With
A = (I + M)^-1 and the forward producer's W' = A diag(fr) K (fwd_ws_wy.InverseProducts,
the same code), dR = A^T dU and the update's (dR^T diag(fr)) K is dU^T W', so a chain step
is

    dU^T  = (dS^T K^T) diag(fk) + dO^T P            (two groups, as the scaled chain)
    dR^T  = dU^T A                                   (stored for the grads kernel; not on
                                                      the path to the next step)
    dS^T <- dS^T e^Gam_last + (dO^T diag(fo)) Q + dU^T W'

The producer (warps 8-15) runs chunk j - 1's rows (q-hat, k-hat, the gate scan), factor
rows, the forward's Gram (-M, P and the diagonal inverses in the forward's orientation,
which the block solves read) and the solves for A and W' into the other operand set,
copying that chunk's dO rows straight into the set (the consumers load dO^T as their A
operand by ldmatrix.trans, fwd_ws_wy.load_block_transposed), while the consumers run
chunk j's step. P and A are read as MN-major B operands ([t, s] rows). Hand-over, barriers
and register roles as bwd_chain_ws.py; the emulation of the producer's cp.async waits
(frost_ws_wy_copies_emulation_test) holds here as for the forward.

Rounding (frost_bwd_chain_scaled_precision_test.wy_step, one step against float64): dR / dS
as the back substitution's on random keys, +6 % on dR with correlated keys.

GDN, bf16, K = V = 128, sm_90a.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import warpgroup

from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import FrostBwdChainWgmma
from cudnn.linear_attention.frost.kernels.bwd_chain_ws import FrostBwdChainWs
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, PAD16, SUB, SW128, FrostFwdMma, to_a_operand, \
    warp_mma
from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_ROWS, WG_THREADS, assemble_a, block_of, \
    check_fragment_orders, wgmma
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import lane_in_loop, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import FK, FO, wgmma_mn, write_decay_factors
from cudnn.linear_attention.frost.kernels.fwd_ws import (
    BAR_EMPTY,
    BAR_PRODUCER,
    BLOCK_THREADS,
    ROLE_THREADS,
    SETS,
    waits_for_release,
    zero_blocks,
)
from cudnn.linear_attention.frost.kernels.fwd_ws_wy import InverseProducts, load_block_transposed, mma_group
from cudnn.linear_attention.frost.kernels.fwd_ws_wy import transposed_view as mn_view


REGISTER_SPLIT = (184, 72)


def smem_plan(c: FrostFwdConfig):
    """Two operand sets (set b = rows [C b, C b + C)): q-hat, k-hat, P, A [C, C], W' [C, K]
    (SW128), the raw dO rows, the factor rows; the producer's raw q, k rows, gate and beta
    rows by parity, and its single -M, diagonal inverses and M's diagonal blocks."""
    K, V, C = c.K, c.V, CHUNK

    def rows(name, r, cols):
        return (name, "bf16", (r, cols), (cols + PAD16, 1))

    return [
        ("q", "bf16", (2 * C, K), SW128), ("k", "bf16", (2 * C, K), SW128), ("p", "bf16", (2 * C, C), SW128),
        ("ainv", "bf16", (2 * C, C), SW128), ("wp", "bf16", (2 * C, K), SW128),
        rows("do", 2 * C, V), ("fac", "f32", (2, 3, C), (3 * C, C, 1)), ("alast", "f32", (2,), (1,)),
        rows("rq", C, K), rows("rk", C, K),  # raw rows (the producer's)
        ("g", "f32", (2 * C, 1), (1, 1)), ("beta", "f32", (2 * C,), (1,)),  # raw, then scanned
        rows("mneg", C, C), ("dinv", "bf16", (NBLK, SUB, SUB), (SUB * 24, 24, 1)),
        ("md", "f32", (NBLK, SUB, SUB), (SUB * 17, 17, 1)),
    ]


class FrostBwdChainWsWy(InverseProducts, FrostBwdChainWs):
    """Callable for cute.compile (bwd_abi's argument list), as FrostBwdChainWs."""

    smem_plan = staticmethod(smem_plan)
    # setmaxnreg (sm_90a builds, GDN l2norm, K = V = 128): at bwd_chain_ws.py's 216 / 40 the
    # producer spills 25 stores / 34 reloads per chunk; at 184 / 72 4 / 4 and the consumers
    # none, no ptxas performance note (at 168 / 88 the consumers spill 2 / 2). The config's
    # chain_ws_regs (FROST_BWD_WS_REGS) overrides it (bwd_chain_ws.FrostBwdChainWs)
    consumer_regs = REGISTER_SPLIT[0]
    producer_regs = REGISTER_SPLIT[1]

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_wy:
            raise ValueError("FrostBwdChainWsWy: a chain config with chain_wy set")
        if not cfg.fwd.write_output:
            raise ValueError("FrostBwdChainWsWy: the forward config's write_output must be True (the Gram "
                             "stage stores P only then)")
        super().__init__(cfg)

    # ------------------------------------------------------------------ operand sets
    def set_views(self, s, b):
        K, V, C = self.cfg.K, self.cfg.V, CHUNK
        return SimpleNamespace(
            q=cute.local_tile(s.q, (C, K), (b, 0)), k=cute.local_tile(s.k, (C, K), (b, 0)),
            p=cute.local_tile(s.p, (C, C), (b, 0)), ainv=cute.local_tile(s.ainv, (C, C), (b, 0)),
            wp=cute.local_tile(s.wp, (C, K), (b, 0)), do=cute.local_tile(s.do, (C, V), (b, 0)),
            fac=s.fac[b, None, None], alast=cute.local_tile(s.alast, (1,), (b,)),
            g=cute.local_tile(s.g, (C, 1), (b, 0)), beta=cute.local_tile(s.beta, (C,), (b,)),
            mneg=s.mneg, dinv=s.dinv, md=s.md, gmem=s.gmem)

    @cute.jit
    def zero_set_blocks(self, s, tid):
        """P's blocks above the diagonal (P[t, s] = 0 for s > t) in both sets: the forward's
        Gram writes only those at and below it, and dU's wgmma reads the whole tile."""
        zero_blocks(s.p, tid, BLOCK_THREADS, True)

    # the forward's Gram stores: -M, P (cfg.fwd.write_output, checked in __init__) and M's
    # diagonal blocks in the forward's orientation, and the base forward's (I + M_ii)^-1, not
    # transposed, which the block solves read as its chain does
    store_gram = FrostFwdPipelined.store_gram
    block_inverse = FrostFwdMma.block_inverse

    # ------------------------------------------------------------------ producer
    @cute.jit
    def copy_rows(self, s, j, bos, eos, i, ptid):
        """Chunk j's q, k into the raw tiles, its gates and beta into parity i % SETS (no dO:
        it goes straight into the set), one committed group."""
        self.prefetch_rows(self.raw_views(s, i % SETS), bos + j * CHUNK, eos, ptid)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def produce(self, s, mb, heads, bos, eos, nch, scale, ptid, pwid, lane):
        self.zero_a_above_diagonal(s, ptid)
        if nch > 0:
            self.copy_rows(s, nch - 1, bos, eos, 0, ptid)
        for i in cutlass.range(nch, unroll=1):
            j = nch - 1 - i
            t0 = bos + j * CHUNK
            b = i % SETS
            ptid = tid_in_loop() - ROLE_THREADS  # per chunk (volatile): hoisted addresses spill
            lane = lane_in_loop()
            thr = warp_mma().get_slice(lane)
            if waits_for_release(i):
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            self.prefetch_do(SimpleNamespace(w0=st.do, gmem=s.gmem), t0, eos, ptid)  # into the set
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(1)  # chunk j's raw rows (the older group)
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)
            self.rows_from(st, s.rq, s.rk, None, heads, t0, eos, ptid, transpose_do=False)
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)  # raw rows read
            if i + 1 < nch:
                self.copy_rows(s, j - 1, bos, eos, i + 1, ptid)
            write_decay_factors(st.g, st.beta, st.fac, st.alast, scale, ptid)
            FrostBwdChainWgmma.stage_gram(self, st, mb, heads, t0, eos, scale, thr, lane, pwid)  # + proxy fence
            self.solve_and_publish(st, thr, lane, pwid, b, i + 1 < nch)

    # ------------------------------------------------------------------ consumers
    def chain_du(self, st, acc_ds, coord, thr, lane, wid):
        """The step's first half, shared with bwd_chain_ws4's in-chain step: dS^T K^T (group
        1) while dS^T decays and the dO^T operands load, scaled by fk, then dO^T P onto it
        (group 2), both retired. A plain method, traced inline (no run-time branches);
        returns the MMAs, their slices, dU^T and (dO^T fo) as the update's A operand."""
        s_fac = st.fac
        K, C = self.cfg.K, CHUNK
        mma = warp_mma()
        wg_du = wgmma(C)  # dU^T: N = C, B = k-hat [t, d] K-major
        wg_c = wgmma_mn(C)  # dO^T P and dR^T: N = C, B = P / A rows [t, s] seen as [s, t]
        wg_st = wgmma_mn(K)  # the update: N = K, B = q-hat, W' or k-hat [t, d] seen as [d, t]
        check_fragment_orders(wg_du, mma, C)
        check_fragment_orders(wg_c, mma, C)
        check_fragment_orders(wg_st, mma, K)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane
        g_du = wg_du.get_slice(wtid)
        g_c = wg_c.get_slice(wtid)
        g_st = wg_st.get_slice(wtid)
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))  # (value row j, token in block)

        # 1. dS^T K^T (group 1) while dS^T decays and the dO^T operands load
        acc_du = cute.make_rmem_tensor(g_du.partition_shape_C((WG_ROWS, C)), Float32)
        a_ds = to_a_operand(acc_ds, g_du.partition_shape_A((WG_ROWS, K)))
        mma_group(wg_du, acc_du, [(a_ds, wg_du.make_fragment_B(g_du.partition_B(st.k)), K // 16)])
        self.chain_decay(st, acc_ds, coord)
        parts = []
        scaled = []
        for bi in range(NBLK):
            part = load_block_transposed(cute.local_tile(st.do, (SUB, SUB), (bi, wid)), thr, lane)
            parts.append(part)
            fo = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), BFloat16)
            for e in range(per):
                fo[e] = (part[e].to(Float32) * s_fac[FO, bi * SUB + crd[e][1]]).to(BFloat16)
            scaled.append(fo)
        a_do = assemble_a(parts, g_st.partition_shape_A((WG_ROWS, C)))
        a_dof = assemble_a(scaled, g_st.partition_shape_A((WG_ROWS, C)))
        warpgroup.wait_group(0)
        for bi in range(NBLK):
            for e in range(per):
                acc_du[bi * per + e] = acc_du[bi * per + e] * s_fac[FK, bi * SUB + crd[e][1]]
        # 2. dO^T P onto it (group 2)
        mma_group(wg_c, acc_du, [(a_do, wg_c.make_fragment_B(g_c.partition_B(mn_view(st.p))), C // 16)],
                  fresh=False)
        warpgroup.wait_group(0)
        return SimpleNamespace(wg_c=wg_c, wg_st=wg_st, g_c=g_c, g_st=g_st, per=per, crd=crd, acc_du=acc_du,
                               a_dof=a_dof)

    @cute.jit
    def consumer_chain(self, st, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid):
        """dU^T (dS^T K^T scaled, dO^T P onto it), then dR^T = dU^T A (stored) and the dS^T
        update with dU^T W' (module docstring)."""
        K, C = self.cfg.K, CHUNK
        h = heads[3]
        j0 = wid * SUB
        d = self.chain_du(st, acc_ds, coord, thr, lane, wid)
        wg_c, wg_st, g_c, g_st = d.wg_c, d.wg_st, d.g_c, d.g_st

        # 3. dR^T = dU^T A (group 3), then the update (group 4) into the dS^T registers
        a_du = to_a_operand(d.acc_du, g_st.partition_shape_A((WG_ROWS, C)))
        acc_dr = cute.make_rmem_tensor(g_c.partition_shape_C((WG_ROWS, C)), Float32)
        mma_group(wg_c, acc_dr, [(a_du, wg_c.make_fragment_B(g_c.partition_B(mn_view(st.ainv))), C // 16)])
        acc_w = cute.make_tensor(acc_ds.iterator, cute.make_layout(g_st.partition_shape_C((WG_ROWS, K))))
        b_q = wg_st.make_fragment_B(g_st.partition_B(mn_view(st.q)))
        b_w = wg_st.make_fragment_B(g_st.partition_B(mn_view(st.wp)))
        mma_group(wg_st, acc_w, [(d.a_dof, b_q, C // 16), (a_du, b_w, C // 16)], fresh=False)
        warpgroup.wait_group(1)  # dR^T complete; the update may still run
        self.store_dr(mdr, acc_dr, h, t0, eos, j0, thr, d.crd)

    @cute.jit
    def store_dr(self, mdr, acc_dr, h, t0, eos, j0, thr, crd):
        """dR^T's fp32 accumulator to global memory, element by element, rows past eos left
        alone (unscaled, as the grads kernel reads it)."""
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        for bi in cutlass.range_constexpr(NBLK):
            dr = block_of(acc_dr, bi, thr.partition_shape_C((SUB, SUB)))
            for e in cutlass.range_constexpr(per):
                t = t0 + bi * SUB + crd[e][1]
                if t < eos:
                    mdr[t, h, j0 + crd[e][0]] = dr[e].to(BFloat16)
