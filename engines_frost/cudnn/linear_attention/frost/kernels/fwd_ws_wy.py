"""FROST forward for scalar gates (GDN), warp-specialised, with the full inverse formed by the
producer: an experiment kernel (not the product's; the test and bench tooling builds it,
frost_fwd_experiments.py knobs decay="wy-ws" and, without W' (FullInverseInChain: the
chain applies A to its R, U^T = bf16(R^T) A^T, a second dependent group), "wyc-ws").

fwd_ws.py's consumers still run the block solve of each chunk, four dependent steps on
mma.sync per warp, on the state's critical path. Here the producer role forms what the
solve needs ahead of the chain, so the chain is tensor-core products only:

    A  = (I + M)^-1                 the chunk's inverse (producer warps 0-3, column blocks)
    W' = A diag(fr) K               fr_t = -beta_t e^Gam_t (producer, all 8 warps)
    U^T = W0^T A^T + S^T W'^T       one wgmma group on the consumers, W0 = beta v

(R = W0 + diag(fr) K S and U = A R, so U = A W0 + W' S.) The producer gets both by the
chain's own block substitution (FrostFwdMma.solve_block, bf16 block operands, fp32
results) run on right-hand sides that do not depend on the state: R^T = I gives A^T (a
warp's 16 pseudo-value rows are A's columns [16 w, 16 w + 16)), R^T = K^T diag(fr) gives
W'^T (rows d of K). Rounding (engines_frost/tests/frost_mma_precision.py, variant
"wy-solve"): within a few percent of the block solve's error against float64, correlated
keys included (kernels/NOTES.md "Forward with the full inverse on the producer").

Per operand set (fwd_ws.py's two, by chunk parity), on top of q-hat, k-hat and P: A
[C, C] and W' [C, K] (SW128, the consumers' B operands), the raw v rows (copied by the
producer straight into the set once it is free; the consumers scale them by beta when
they build W0^T's A operand, the rows stage's rounding bf16(beta v)), and beta as a
fourth factor row (the producer's gate and beta rows are overwritten by the next chunk's
copies while the consumers may still run this set). -M, the diagonal inverses and M's
diagonal blocks are the producer's alone now: single tiles. 220,352 bytes at K = V = 128
(FullInverseInChain: 187,584). The producer loads K^T blocks by ldmatrix.trans and stores
W' and A blocks by stmatrix.trans (load_block_transposed, store_block_transposed).

GDN, bf16, K = V = 128, sm_90a; the plain forward and the training launchers (U and the
state checkpoints from the consumers, as fwd_ws.py), output-free builds included.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import warp, warpgroup

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, register_split_ok
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, SW128, store_values_block, to_a_operand, \
    warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_ROWS, WG_THREADS, _tv, assemble_a, block_of, \
    check_fragment_orders, wgmma
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import lane_in_loop, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import FK, FR, wgmma_mn
from cudnn.linear_attention.frost.kernels.fwd_ws import (
    BAR_EMPTY,
    BAR_FULL,
    BAR_PRODUCER,
    BLOCK_THREADS,
    ROLE_THREADS,
    SETS,
    WarpSpecialisedChain,
    waits_for_release,
    zero_blocks,
)
from cudnn.linear_attention.frost.kernels.fwd_ws import smem_plan as ws_smem_plan
from cudnn.linear_attention.frost.kernels.stmatrix_map import check_trans_copy

REGISTER_SPLIT = (192, 64)
IN_CHAIN_REGISTER_SPLIT = (208, 48)  # FullInverseInChain's
#: both kernels' with the wgmma Gram knob (fwd_wgmma_gram.GramWgmma in the bases): at 48
#: producer registers ptxas drops the setmaxnreg pair altogether (every role at 128)
GRAM_WGMMA_REGISTER_SPLIT = (192, 64)
assert all(map(register_split_ok, (REGISTER_SPLIT, IN_CHAIN_REGISTER_SPLIT, GRAM_WGMMA_REGISTER_SPLIT)))
#: the factor row holding beta (after fwd_wgmma_scaled's FR, FO, FK)
FB = 3
FACTOR_ROWS = 4
#: fwd_ws.py's set tiles the producer keeps one of here, and its raw v tile (v goes to the set)
SINGLE = ("mneg", "dinv")
DROPPED = ("rv",)


def smem_plan(c: FrostFwdConfig, with_wp: bool = True):
    """fwd_ws.py's plan with A and W' per set (SW128, after P; with_wp False: A only), -M and
    the diagonal inverses single, four factor rows per set, no raw v tile; "w0" holds a
    set's raw v rows."""
    K, C = c.K, CHUNK
    plan = []
    for name, dtype, shape, stride in ws_smem_plan(c):
        if name in DROPPED:
            continue
        if name in SINGLE:
            shape = (shape[0] // 2, *shape[1:])
        if name == "fac":
            shape, stride = (SETS, FACTOR_ROWS, C), (FACTOR_ROWS * C, C, 1)
        plan.append((name, dtype, shape, stride))
        if name == "p":
            plan.append(("ainv", "bf16", (SETS * C, C), SW128))
            if with_wp:
                plan.append(("wp", "bf16", (SETS * C, K), SW128))
    return plan


def smem_plan_in_chain(c: FrostFwdConfig):
    return smem_plan(c, with_wp=False)


def mma_group(wg, acc, terms, fresh: bool = True):
    """One committed wgmma group: acc = sum of a b over terms [(a, b, k-steps), ...], the
    first k-step overwriting acc (fresh) or adding to it. A plain function, traced inline."""
    warpgroup.fence()
    first = fresh
    for a, b, steps in terms:
        for kk in range(steps):
            wg.set(warpgroup.Field.ACCUMULATE, not first)
            cute.gemm(wg, acc, a[None, None, kk], b[None, None, kk], acc)
            first = False
    warpgroup.commit_group()


def transposed_view(tile: cute.Tensor) -> cute.Tensor:
    """tile[t, x] seen as [x, t]: the transposed block copies' targets and the chains'
    MN-major B operands."""
    return cute.make_tensor(tile.iterator, cute.select(tile.layout, mode=[1, 0]))


def _transposed_copy(op, tile: cute.Tensor, lane, registers_are_source: bool):
    """(tiled copy, lane's slice, (j, t) view of tile[t, j]) for the .trans op (stmatrix or
    ldmatrix x4) over warp_mma's 16 x 16 accumulator map, the copy's register and address
    maps checked while tracing (stmatrix_map.check_trans_copy). A plain function."""
    mma = warp_mma()
    copy = cute.make_tiled_copy_C(cute.make_copy_atom(op, BFloat16), mma)
    src, dst = copy.layout_src_tv_tiled, copy.layout_dst_tv_tiled
    registers, addresses = (src, dst) if registers_are_source else (dst, src)
    check_trans_copy(_tv(registers), _tv(addresses), _tv(mma.tv_layout_C_tiled))
    return copy, copy.get_slice(lane), transposed_view(tile)  # (j, t) -> tile[t, j]


@cute.jit
def store_block_transposed(u: cute.Tensor, tile: cute.Tensor, thr, lane):
    """Run by a whole warp: its fp32 16 x 16 block u (warp_mma's accumulator over (row j,
    column t)) as bf16 into the shared block tile[t, j] (rows 16-byte aligned; an SW128 tile
    keeps 16-byte units whole) by one stmatrix.x4.trans: the producer's stores of W'^T and
    A^T blocks as W' and A rows. Element by element they were 8 two-byte stores per thread
    and block, each with its own swizzled address."""
    frag = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), BFloat16)
    for e in cutlass.range_constexpr(cute.size(frag)):
        frag[e] = u[e].to(BFloat16)
    copy, thr_copy, view = _transposed_copy(warp.StMatrix8x8x16bOp(True, 4), tile, lane, True)
    cute.copy(copy, thr_copy.retile(frag), thr_copy.partition_D(view))


@cute.jit
def load_block_transposed(tile: cute.Tensor, thr, lane) -> cute.Tensor:
    """Run by a whole warp: the shared block tile[t, j] (bf16, rows 16-byte aligned) as the
    warp's bf16 fragment of its transpose (j, t), in warp_mma's accumulator order (its A
    operand's for a 16 x 16 block: the same map), by one ldmatrix.x4.trans: the W' solve's
    right-hand side K^T from k-hat."""
    frag = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), BFloat16)
    copy, thr_copy, view = _transposed_copy(warp.LdMatrix8x8x16bOp(True, 4), tile, lane, False)
    cute.copy(copy, thr_copy.partition_S(view), thr_copy.retile(frag))
    return frag


class InverseProducts:
    """The producer's side the full-inverse kernels share (its copy targets, A's zero blocks,
    the state-free products and their publication), for any class with
    FrostFwdMma's solve_block and operand loads and operand-set views that name k-hat (k),
    the factor rows (fac), -M (mneg), the diagonal inverses (dinv), A (ainv) and W' (wp):
    this module's forward and the backward chain's twin (bwd_chain_ws_wy.py)."""

    #: False: A and W' (the forward's U group is W0^T A^T + S^T W'^T, the backward's update
    #: takes dU^T W'); True (FullInverseInChain): A only, the chain applies it to its R
    inverse_in_chain = False

    def raw_views(self, s, b):
        """The producer's copy targets for a chunk of parity b: its raw q, k tiles, the gate
        and beta rows of that parity (v or dO go straight into the operand set)."""
        C = CHUNK
        return SimpleNamespace(q=s.rq, k=s.rk, g=cute.local_tile(s.g, (C, 1), (b, 0)),
                               beta=cute.local_tile(s.beta, (C,), (b,)), gmem=s.gmem)

    @cute.jit
    def zero_a_above_diagonal(self, s, ptid):
        """A's blocks above the diagonal blocks, in both sets: never written per chunk."""
        zero_blocks(s.ainv, ptid, ROLE_THREADS, True)

    @cute.jit
    def solve_and_publish(self, st, thr, lane, pwid, b, more):
        """After the producer's Gram stage for set b: its barrier (-M, the inverses and the
        factor rows written), the solves, then the set's copies landed (more: the next
        chunk's rows, committed later, may still fly), the proxy fence (A and W' are wgmma
        operands) and FULL. The waits' accounting: frost_ws_wy_copies_emulation_test."""
        cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)
        self.solve_products(st, thr, lane, pwid)
        if more:
            cute.arch.cp_async_wait_group(1)
        else:
            cute.arch.cp_async_wait_group(0)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    @cute.jit
    def solve_products(self, st, thr, lane, pwid):
        """W'^T rows [16 w, 16 w + 16) on producer warp w (R^T = K^T diag(fr) through the
        block solve), then A's column block w on warps 0-3 (R^T = I)."""
        if cutlass.const_expr(not self.inverse_in_chain):
            self.w_prime_rows(st, thr, lane, pwid)
        for w in cutlass.range_constexpr(NBLK):
            if pwid == w:
                self.inverse_columns(st, thr, lane, thr.partition_C(cute.make_identity_tensor((SUB, SUB))), w)

    @cute.jit
    def w_prime_rows(self, st, thr, lane, d):
        """W'^T rows [16 d, 16 d + 16): the block solve of R^T = K^T diag(fr), K^T's blocks
        (d, bi) loaded from k-hat by ldmatrix.trans, W' blocks stored by stmatrix.trans."""
        s_k = st.k
        s_fac = st.fac
        s_wp = st.wp
        mma = warp_mma()
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))  # (row d or v, token t in block)
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        a_u = []
        for bi in cutlass.range_constexpr(NBLK):
            kt = load_block_transposed(cute.local_tile(s_k, (SUB, SUB), (bi, d)), thr, lane)
            r = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
            for e in cutlass.range_constexpr(per):
                r[e] = s_fac[FR, bi * SUB + crd[e][1]] * kt[e].to(Float32)
            u = self.solve_block(mma, thr, lane, r, a_u, st.mneg, st.dinv, bi)
            store_block_transposed(u, cute.local_tile(s_wp, (SUB, SUB), (bi, d)), thr, lane)

    @cute.jit
    def inverse_columns(self, st, thr, lane, crd, w: cutlass.Constexpr):
        """A's columns [16 w, 16 w + 16) (A^T's rows): the block solve of R^T = I, whose
        blocks above w are zero and skipped."""
        s_mneg = st.mneg
        s_dinv = st.dinv
        s_a = st.ainv
        mma = warp_mma()
        per = cute.size(crd)
        a_u = []
        for bi in cutlass.range_constexpr(w, NBLK):
            r = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
            for e in cutlass.range_constexpr(per):
                r[e] = Float32(0.0)
                if cutlass.const_expr(bi == w):
                    if crd[e][0] == crd[e][1]:
                        r[e] = Float32(1.0)
            u = self.solve_block(mma, thr, lane, r, a_u, s_mneg, s_dinv, bi, first=w)
            store_block_transposed(u, cute.local_tile(s_a, (SUB, SUB), (bi, w)), thr, lane)


class FullInverseChain(InverseProducts, WarpSpecialisedChain):
    """Mixin over FrostFwdWgmma (or its training launchers): fwd_ws.py's roles with the solve
    moved to the producer (module docstring). Put first in the bases."""

    smem_plan = staticmethod(smem_plan)
    #: (consumer, producer) setmaxnreg (sm_90a builds, GDN l2norm): at fwd_ws.py's 216 / 40 the
    #: producer spills 20 stores / 28 reloads per chunk and the consumers 6 / 5; at 192 / 64
    #: the producer 5 / 5, the consumers none, and ptxas leaves no performance note (at
    #: 184 / 72: C7512, the chain's wgmma serialized for want of registers)
    split_mma_gram = REGISTER_SPLIT
    #: with the wgmma Gram the producer spills 40 / 41 at 64 registers and 24 / 24 at 72-88,
    #: where the consumers' wgmma serialize (C7512); at 192 / 64 they do not
    split_wgmma_gram = GRAM_WGMMA_REGISTER_SPLIT

    # ------------------------------------------------------------------ tiles
    def set_views(self, s, b):
        v = WarpSpecialisedChain.set_views(self, s, b)
        C, K = CHUNK, self.cfg.K
        v.mneg, v.dinv = s.mneg, s.dinv
        v.ainv = cute.local_tile(s.ainv, (C, C), (b, 0))
        if cutlass.const_expr(not self.inverse_in_chain):
            v.wp = cute.local_tile(s.wp, (C, K), (b, 0))
        return v

    # ------------------------------------------------------------------ producer
    @cute.jit
    def copy_rows(self, s, t0, bos, eos, ptid, pwid, lane):
        """Chunk t0's q, k, gates and beta into the producer's tiles (no v), one group."""
        self.prefetch_rows(self.raw_views(s, ((t0 - bos) // CHUNK) % SETS), t0, eos, ptid)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def produce(self, s, mb, heads, bos, eos, chunks, scale, ptid, pwid, lane):
        C = CHUNK
        self.zero_a_above_diagonal(s, ptid)
        if chunks > 0:
            self.copy_rows(s, bos, bos, eos, ptid, pwid, lane)
        for i in cutlass.range(chunks, unroll=1):
            t0 = bos + i * C
            b = i % SETS
            ptid = tid_in_loop() - ROLE_THREADS  # volatile, as fwd_ws.py's producer
            lane = lane_in_loop()
            thr = warp_mma().get_slice(lane)
            if waits_for_release(i):  # set b free: chunk i - SETS's chain retired its reads
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            self.prefetch_v(st, t0, eos, lane, pwid)  # v straight into the set: read by the consumers only
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(1)  # this chunk's q, k, gate, beta rows (the older group)
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)
            self.rows_from(st, s.rq, s.rk, None, ptid, values=False)
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)  # raw rows read
            if i + 1 < chunks:
                self.copy_rows(s, t0 + C, bos, eos, ptid, pwid, lane)
            self.write_factors(st, scale, ptid)
            if ptid < C:
                st.fac[FB, ptid] = st.beta[ptid]
            self.producer_gram(st, mb, heads, t0, eos, scale, thr, lane, pwid)
            self.solve_and_publish(st, thr, lane, pwid, b, i + 1 < chunks)

    # ------------------------------------------------------------------ consumers
    @cute.jit
    def consumer_chain(self, st, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """U (u_products or u_through_r), then U's blocks and fwd_wgmma_scaled's finish_chain."""
        s_fac = st.fac
        c = self.cfg
        h = heads[3]
        j0 = wid * SUB
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))  # (value column j, token t in block)
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        if cutlass.const_expr(self.inverse_in_chain):
            acc_u, acc_o = self.u_through_r(st, acc_s, thr, lane, wid)
        else:
            acc_u, acc_o = self.u_products(st, acc_s, thr, lane, wid)
        # U's blocks: the training store, U^T for P U, U^T diag(fk) for the state update
        a_u = []
        a_k = []
        for bi in cutlass.range_constexpr(NBLK):
            u = block_of(acc_u, bi, thr.partition_shape_C((SUB, SUB)))
            if cutlass.const_expr(c.write_values):
                store_values_block(st.values, u, crd, t0 + bi * SUB, eos, h, j0)
            a_u.append(to_a_operand(u, thr.partition_shape_A((SUB, SUB))))
            for e in cutlass.range_constexpr(per):
                u[e] = u[e] * s_fac[FK, bi * SUB + crd[e][1]]
            a_k.append(to_a_operand(u, thr.partition_shape_A((SUB, SUB))))
        self.finish_chain(st, mo, acc_s, coord_s, acc_o, a_u, a_k, h, t0, eos, thr, lane, wid)

    def chain_mmas(self, thr, lane, wid):
        """(wg_half, g_half, g_st, crd, per): the chain's m64 n=C MMA (B K-major: A, W',
        q-hat, k-hat [t, .]), its thread slice, the state update's slice, and the warp's
        16 x 16 block coordinates (value column j, token t) with their count per thread."""
        c = self.cfg
        mma = warp_mma()
        wg_half = wgmma(CHUNK)
        wg_st = wgmma_mn(c.K)
        check_fragment_orders(wg_half, mma, CHUNK)
        check_fragment_orders(wg_st, mma, c.K)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        return wg_half, wg_half.get_slice(wtid), wg_st.get_slice(wtid), crd, per

    def sq_group(self, st, a_s, g_half, wg_half):
        """S^T Q^T (K / 16 k-steps, its own group), or None without the output."""
        if not self.cfg.write_output:
            return None
        acc_o = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, CHUNK)), Float32)
        mma_group(wg_half, acc_o, [(a_s, wg_half.make_fragment_B(g_half.partition_B(st.q)), self.cfg.K // 16)])
        return acc_o

    @cute.jit
    def u_products(self, st, acc_s, thr, lane, wid):
        """U^T = W0^T A^T + S^T W'^T, one group (W0 = beta v, this warp's 16 value rows, as
        its first A operand), then S^T Q^T; returns (U^T, S^T Q^T) with U complete and
        S^T Q^T in flight (finish_chain waits for it)."""
        s_v = st.w0
        s_fac = st.fac
        K, C = self.cfg.K, CHUNK
        wg_half, g_half, g_st, crd, per = self.chain_mmas(thr, lane, wid)
        j0 = wid * SUB
        parts = []
        for bi in cutlass.range_constexpr(NBLK):
            blk = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
            for e in cutlass.range_constexpr(per):
                t = bi * SUB + crd[e][1]
                blk[e] = s_v[t, j0 + crd[e][0]].to(Float32) * s_fac[FB, t]
            parts.append(to_a_operand(blk, thr.partition_shape_A((SUB, SUB))))
        a_w0 = assemble_a(parts, g_st.partition_shape_A((WG_ROWS, C)))
        a_s = to_a_operand(acc_s, g_half.partition_shape_A((WG_ROWS, K)))
        acc_u = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        b_a = wg_half.make_fragment_B(g_half.partition_B(st.ainv))
        b_w = wg_half.make_fragment_B(g_half.partition_B(st.wp))
        mma_group(wg_half, acc_u, [(a_w0, b_a, C // 16), (a_s, b_w, K // 16)])
        # S^T Q^T only once U retired: fewer registers live while U's operands are in flight
        warpgroup.wait_group(0)
        return acc_u, self.sq_group(st, a_s, g_half, wg_half)

    #: u_through_r's S^T Q^T group: True issued with X (it runs while R is formed), False
    #: after U's group (X, R's A operand and its accumulator never live together)
    sq_with_x = True

    @cute.jit
    def u_through_r(self, st, acc_s, thr, lane, wid):
        """X = S^T K^T and S^T Q^T (the scaled chain's first groups; sq_with_x False: S^T
        Q^T after U's), R = W0 + X diag(fr) in fp32 (W0 = beta v), then U^T = bf16(R^T) A^T
        (C / 16 k-steps); returns (U^T, S^T Q^T) with U complete."""
        s_v = st.w0
        s_fac = st.fac
        K, C = self.cfg.K, CHUNK
        wg_half, g_half, g_st, crd, per = self.chain_mmas(thr, lane, wid)
        j0 = wid * SUB
        a_s = to_a_operand(acc_s, g_half.partition_shape_A((WG_ROWS, K)))
        acc_x = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        mma_group(wg_half, acc_x, [(a_s, wg_half.make_fragment_B(g_half.partition_B(st.k)), K // 16)])
        acc_o = None
        if cutlass.const_expr(self.sq_with_x):
            acc_o = self.sq_group(st, a_s, g_half, wg_half)
        if cutlass.const_expr(self.cfg.write_output and self.sq_with_x):
            warpgroup.wait_group(1)  # X is complete; S^T Q^T may still run
        else:
            warpgroup.wait_group(0)
        for bi in cutlass.range_constexpr(NBLK):
            for e in cutlass.range_constexpr(per):
                t = bi * SUB + crd[e][1]
                acc_x[bi * per + e] = (s_v[t, j0 + crd[e][0]].to(Float32) * s_fac[FB, t]
                                       + s_fac[FR, t] * acc_x[bi * per + e])
        a_r = to_a_operand(acc_x, g_st.partition_shape_A((WG_ROWS, C)))
        acc_u = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        mma_group(wg_half, acc_u, [(a_r, wg_half.make_fragment_B(g_half.partition_B(st.ainv)), C // 16)])
        if cutlass.const_expr(self.sq_with_x):
            warpgroup.wait_group(0)  # U (and S^T Q^T before it: groups retire in order)
        else:
            acc_o = self.sq_group(st, a_s, g_half, wg_half)
            if cutlass.const_expr(self.cfg.write_output):
                warpgroup.wait_group(1)  # U; S^T Q^T may still run (finish_chain waits)
            else:
                warpgroup.wait_group(0)
        return acc_u, acc_o


class FullInverseInChain(FullInverseChain):
    """FullInverseChain without W': the producer forms A only, the chain applies it to R
    (two dependent product groups in the chain instead of one; 32 KB less shared memory)."""

    smem_plan = staticmethod(smem_plan_in_chain)
    inverse_in_chain = True
    #: at 200 / 56 ptxas serializes this chain's wgmma (C7512: X, S^T Q^T and R's A operand
    #: live together); at 208 / 48 it does not, the consumers do not spill and the producer
    #: spills 6 stores / 14 reloads per chunk (sm_90a builds); with the wgmma Gram, 192 / 64:
    #: the producer 24 / 24, the consumers none but their wgmma serialized (C7512)
    split_mma_gram = IN_CHAIN_REGISTER_SPLIT
