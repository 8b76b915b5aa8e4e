"""FROST forward, wgmma layer: the pipelined layer with the chain's large products on
warpgroup MMA (the product's forward on sm_90a).

The pipelined layer's chain (fwd_pipelined.py) runs every product as warp-level m16n8k16
mma.sync, each warp on its own 16 value columns: ~232 dependent mma.sync per warp per
chunk, issue-latency bound (NOTES.md, "Where v2's GDN chunk goes"). This layer moves the
chain's products except the block solve (3.3 M of the chunk's 4.1 M MAC) onto Hopper's
asynchronous warpgroup MMA (wgmma m64nNk16, bf16 in, fp32 accumulate); the 8 warps
(V = 128) are 2 warpgroups (V = 64: 4 warps, 1 warpgroup), each owning 64 rows of S^T,
exactly the rows its four warps already hold:

1. R^T = W0^T + S^T KBA^T and O^T = S^T QA^T: A = bf16(S^T) from registers (the warp
   fragment the base layer already builds), B = KBA and QA, the two row halves of one
   [128, K] tile "kq" in the 128-byte swizzled K-major layout (fwd_mma.SW128), N = 64
   each: 2 x K/16 wgmma per warpgroup instead of 2 x 4 x K/16 mma.sync per warp.
2. O^T += U^T P^T: A = bf16(U^T) (the four 16 x 16 blocks the block solve leaves in
   registers are its four k-blocks), B = P [t, s] (SW128; its blocks above the diagonal,
   never written by the Gram stage, are zeroed once), N = 64: 4 wgmma per warpgroup.
3. S^T <- S^T Diag(e^Gam_last) + U^T KD: the same A, B = KD^T [K, 64] (SW128, chunk rows
   contiguous), N = K, accumulating straight into the state registers: 4 wgmma.

Four wgmma groups per chunk, retired in order: R (waited for first: the block solve
needs it), O (runs during the solve), P U (accumulates onto O) and the state update
(runs during the output stores and the next chunk's rows stage: settle_state waits for
it after that stage, before the barrier that lets the operand stage rewrite KD^T). No
accumulator or A register of a wgmma group is touched before a wait_group that retires
the group. The pipelined layer's cp.async prefetch of the next chunk's rows and v is
issued after the R and O commits, while they run (the pipelined layer issues it before
its chain: ~230 SASS instructions per thread that neither product needs stood between the
barrier and the first wgmma). With vector gates the rows (q, k, the gate rows; GDN-2 b,
w) go by one 1D bulk copy per row onto an mbarrier instead (rows_by_bulk; v and KDA's
scalar beta stay cp.async): the 16-byte copies' issue queue held the chain (NOTES.md "KDA
forward: the next chunk's rows by bulk copies").

The fp32 state keeps the base layer's register tensor: a warp's m16n8 accumulator over
[16, K] and a warpgroup's m64nK accumulator hold the same (row, column) in the same value
order (up to the warp's 16-row offset), as do the bf16 A fragments; wgmma_fragments.py
checks that on the layouts this CuTe DSL traces (the compile fails otherwise). The block
solve (four dependent 16 x 16 steps per warp, mma.sync), the Gram stage, the rows and
operand stages and the prefetch code stay the pipelined layer's. The operand stage writes
KBA, QA and KD^T, the Gram stage P, with ordinary stores into the swizzled tiles; each
stage then fences the generic proxy against the async proxy (fence.proxy.async.shared::cta)
before the barrier that ends it, so the wgmma reads see them.

Training launchers (FrostFwdWgmmaCheckpoints, FrostFwdWgmmaValues: the pipelined layer's
launch ABI, one and two more pointers): the state entering each chunk is stored by the
base layer's chunk loop from the state registers after settle_state's wait_group(0) has
made them final; U is stored by the chain right after each block of the solve, from the
solve's own fp32 accumulator (an mma.sync register, in no wgmma group), with the base
layer's store_values_block, so the bf16 rounding and the rows are the pipelined layer's.
The product launches them for training forwards on sm_90a since they passed the backward
smoke on the H200 (NOTES.md "v3 training forwards on the H200"); the pipelined layer's
stay the tooling's alternative there (frost_fwd_experiments).

Not in this module: the Gram products on wgmma (fwd_wgmma_gram.py), the scalar-gate chain
with the decays as factors (fwd_wgmma_scaled.py), warp specialisation (producer roles for
chunk c+1's state-independent stages: fwd_ws.py, fwd_ws_wy.py, fwd_ws4.py). The product
compiles this layer for every forward on sm_90a, bf16 and fp16 io, plain and training
(compile_kernel.product_algorithm; its MMA operands are bf16 for either io dtype).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import OperandMajorMode, warpgroup

from cudnn.linear_attention.frost.kernels import bulk_rows
from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import (
    CHUNK,
    NBLK,
    SUB,
    SW128,
    store_values_block,
    to_a_operand,
    warp_mma,
)
from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined, FrostFwdPipelinedCheckpoints, FrostFwdPipelinedValues
from cudnn.linear_attention.frost.kernels.fwd_pipelined import smem_plan as pipelined_smem_plan
from cudnn.linear_attention.frost.kernels.wgmma_fragments import tv_size, warp_view_matches

WG_ROWS = 64  # wgmma's M: the S^T rows of one warpgroup
WG_THREADS = 128
#: what this layer takes out of the pipelined layer's plan: the chain's B operands, now SW128 tiles
REPLACED = ("qa", "kba", "kdt", "p")
#: tiles the pipelined layer stages raw in the io dtype through FrostFwdPipelined.io_view: cute.recast_ptr drops a
#: pointer's swizzle (CuTe DSL 4.8), so these must not become SW128 without io_view
#: passing the swizzle on (what putting the Gram on wgmma, with q and k swizzled, needs)
RAW_STAGED = ("q", "k", "w0", "qr", "kbr", "wst")


def smem_plan(c: FrostFwdConfig):
    """The pipelined layer's plan with QA, KBA (as one [2C, K] tile "kq": KBA rows 0..C-1, QA rows C..2C-1),
    KD^T and P in the SW128 layout, first (1024-byte aligned without padding); vector gates:
    the bulk row copies' mbarrier last."""
    K, C = c.K, CHUNK
    plan = [("kq", "bf16", (2 * C, K), SW128), ("kdt", "bf16", (K, C), SW128), ("p", "bf16", (C, C), SW128)] + [
        entry for entry in pipelined_smem_plan(c) if entry[0] not in REPLACED]
    if c.gate_per_channel:
        plan.append(bulk_rows.MBARRIER)
    assert not any(name in RAW_STAGED and stride == SW128 for name, _, _, stride in plan), plan
    return plan


def wgmma(n: int):
    """The warpgroup MMA this layer's chain uses: m64 n k16, bf16 A from registers, B K-major in
    shared memory, fp32 accumulate onto the accumulator's contents."""
    op = warpgroup.MmaF16BF16Op(BFloat16, Float32, (WG_ROWS, n, 16), warpgroup.OperandSource.RMEM,
                                OperandMajorMode.K, OperandMajorMode.K)
    return cute.make_tiled_mma(cute.make_mma_atom(op))


def _tv(layout):
    """A traced thread-value layout as ((thread shape, value shape), (strides)), static."""
    return (cute.get(layout.shape, mode=[0]), cute.get(layout.shape, mode=[1])), \
        (cute.get(layout.stride, mode=[0]), cute.get(layout.stride, mode=[1]))


def check_fragment_orders(wg, mma, n: int) -> None:
    """Trace-time check: the warpgroup MMA wg (N = n) sees the base layer's warp fragments (mma's
    16 x 16 tile per warp) as its own, value for value: accumulator C and A operand."""
    for name, wg_tv, warp_tv in (("C", wg.tv_layout_C, mma.tv_layout_C_tiled),
                                 ("A", wg.tv_layout_A, mma.tv_layout_A_tiled)):
        wg_tv, warp_tv = _tv(wg_tv), _tv(warp_tv)
        if not warp_view_matches(wg_tv, WG_ROWS, warp_tv, SUB, tv_size(warp_tv)[1]):
            raise ValueError(f"fwd_wgmma: the wgmma m64n{n}k16 {name} fragment {wg_tv} does not extend the "
                             f"mma.sync fragment {warp_tv}; the wgmma layer's register hand-over would be wrong")


def assemble_a(parts, shape):
    """One warpgroup A operand (bf16 registers of `shape`) from a warp's per-block
    fragments, block after block: the order check_fragment_orders (and the backward's
    check_block_order) establish. A plain function, traced inline."""
    out = cute.make_rmem_tensor(shape, BFloat16)
    for b, part in enumerate(parts):
        for e in range(cute.size(part)):
            out[b * cute.size(part) + e] = part[e]
    return out


def block_of(acc, bi: int, shape):
    """Block bi of a warpgroup m64nN accumulator as the warp's 16 x 16 fp32 accumulator
    (`shape`: thr.partition_shape_C((SUB, SUB))): values [per bi, per (bi + 1)) of each
    thread's. A plain function, traced inline."""
    blk = cute.make_rmem_tensor(shape, Float32)
    per = cute.size(blk)
    for e in range(per):
        blk[e] = acc[bi * per + e]
    return blk


@cute.jit
def store_output_rows(mo: cute.Tensor, acc_o: cute.Tensor, crd: cute.Tensor, t0, eos, h, j0):
    """This warp's output values from the O^T accumulator (m64nC, blocks in order) into
    mo[t, h, j0 + j] for rows t0 + t < eos: one 2-byte store per value."""
    per = cute.size(crd)
    for bi in cutlass.range_constexpr(NBLK):
        for e in cutlass.range_constexpr(per):
            jt = crd[e]
            t = t0 + bi * SUB + jt[1]
            if t < eos:
                mo[t, h, j0 + jt[0]] = acc_o[bi * per + e].to(mo.element_type)


class FrostFwdWgmma(FrostFwdPipelined):
    """Callable for cute.compile; see the module docstring for what differs from v2."""

    smem_plan = staticmethod(smem_plan)
    chain_issues_prefetch = True  # chunk_chain issues it after the R and O commits
    SM90A_ONLY = True  # warpgroup MMA: compile_kernel.compile_fwd refuses other archs

    #: False: the chain leaves its state update in flight and settle_state retires it after
    #: the next chunk's rows stage (FrostFwdMma.STATE_FINAL_AT_CHAIN_END); the wgmma Gram
    #: experiment (fwd_wgmma_gram.GramWgmma) sets True: the chain waits at its end, as before
    STATE_FINAL_AT_CHAIN_END = False

    #: vector gates: the next chunk's q, k, gate (GDN-2: b, w) rows by one 1D bulk copy per
    #: row onto an mbarrier (rows_by_bulk); False (the test tooling's rows="async"): the pipelined layer's
    #: 16-byte cp.async
    ROWS_BY_BULK = True

    #: vector gates, bf16 io, K >= V (staged_stores): the chain's per-token outputs (O, and
    #: U in the training launchers) go through a per-warp [C, 16] bf16 buffer in KE's
    #: tile, dead from the Gram stage to the next operand stage, as 16-byte row stores
    #: (gmem_vector_io, the backward chain's dR path) instead of 32 two-byte stores per
    #: thread and chunk each; False (the test tooling's stores="elements"): the 2-byte stores
    STAGED_STORES = True

    #: True in the launchers whose __call__ passes the checkpoint (and values) pointers
    #: (FrostFwdWgmmaCheckpoints, FrostFwdWgmmaValues); this class's own launch has no slot for them
    TRAINING_LAUNCHER = False

    def __init__(self, cfg: FrostFwdConfig):
        if (cfg.write_checkpoints or cfg.write_values) and not self.TRAINING_LAUNCHER:
            raise ValueError("FrostFwdWgmma: state checkpoints and values are written by its training launchers "
                             "(FrostFwdWgmmaCheckpoints, FrostFwdWgmmaValues; compile_kernel.version_class picks one)")
        super().__init__(cfg)

    # -------------------------------------------------- the pipelined layer's extension points
    @cute.jit
    def before_chunks(self, s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid):
        """With rows_by_bulk the bulk copies' mbarrier first; KBA and QA are the two row
        halves of the kq tile; P's blocks above the diagonal, which the Gram stage never
        writes and the P U wgmma reads, are zeroed once; then the pipelined layer's first-chunk staging (its
        closing barrier orders the zeros and the mbarrier's initialisation before any use)."""
        if cutlass.const_expr(self.rows_by_bulk()):
            bulk_rows.init_mbarrier(s.mbar.iterator, tid)  # the staging's closing barrier publishes it
            s.bos = bos  # the chunk index, hence the mbarrier's phase, counts from here
        K, C = self.cfg.K, CHUNK
        s.kba = cute.local_tile(s.kq, (C, K), (0, 0))
        s.qa = cute.local_tile(s.kq, (C, K), (1, 0))
        self.zero_p_above_diagonal(s, tid)
        FrostFwdPipelined.before_chunks(self, s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid)

    def staged_stores(self) -> bool:
        """Whether O and U go through the warp buffers in KE's tile (STAGED_STORES; vector
        gates, whose kernels have KE, and K >= V: 8 warps' [C, 16] buffers fit its [C, K]
        rows; bf16 io: the buffers and their row copies are bf16, so an fp16 output keeps
        the element stores). Runs at trace time."""
        c = self.cfg
        return self.STAGED_STORES and c.gate_per_channel and c.K >= c.V and c.io_dtype == "bfloat16"

    def store_buffer(self, s, wid):
        """Warp wid's [C, 16] bf16 buffer in KE's tile (unpadded, 2 KB). Traced inline."""
        return vio.buffer_view(s.ke.iterator + wid * CHUNK * SUB, CHUNK, SUB, pad=0)

    def rows_by_bulk(self) -> bool:
        """Whether the next chunk's rows come by bulk copies (ROWS_BY_BULK, vector gates).
        Runs at trace time."""
        return self.ROWS_BY_BULK and self.cfg.gate_per_channel

    @cute.jit
    def prefetch_next_rows(self, s, t0, eos, lane, wid):
        """The pipelined layer's copies of the next chunk's rows, or with rows_by_bulk one
        cp.async.bulk per row of q, k, the gate rows (GDN-2: b, w) onto s.mbar
        (bulk_rows.issue: an elected lane per warp) and the pipelined layer's copies of the
        rest (unaligned gate rows, KDA's scalar beta) as one committed group. Those copies, ~16-20 16-byte cp.async per thread, each
        with ptxas's never-taken shared-load placeholder before it, held ~17.5 % of the KDA
        chain region's stall samples (NOTES.md). The tiles were last read by the rows,
        operand and Gram stages, whose closing fence.proxy.async (stage_gram) and barrier
        order those reads before the async proxy's writes."""
        if cutlass.const_expr(self.rows_by_bulk()):
            if t0 + CHUNK < eos:
                tid = wid * 32 + lane
                jobs = self.bulk_row_jobs(s)
                bulk_rows.check_jobs(jobs, self.cfg)
                bulk_rows.issue(jobs, s.mbar.iterator, t0 + CHUNK, eos, tid, self.threads)
                self.copy_gate_beta_rows(s, t0 + CHUNK, eos, tid, gates=not self.cfg.gate_align16)
                cute.arch.cp_async_commit_group()
        else:
            FrostFwdPipelined.prefetch_next_rows(self, s, t0, eos, lane, wid)

    @cute.jit
    def stage_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """The pipelined layer's (this chain, then the wait for its cp.async groups); with rows_by_bulk also
        the wait for the bulk set, chunk j + 1's being the mbarrier's phase j (chunk 0 is
        staged by cp.async before the loop), before the base layer's barrier that ends the chunk (which
        also orders the zeros bulk_rows stores past eos before their reads)."""
        FrostFwdPipelined.stage_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid)
        if cutlass.const_expr(self.rows_by_bulk()):
            if t0 + CHUNK < eos:
                cute.arch.mbarrier_wait(s.mbar.iterator, ((t0 - s.bos) // CHUNK) % 2)

    @cute.jit
    def zero_p_above_diagonal(self, s, tid):
        """P's 16 x 16 blocks above the diagonal, which no Gram stage writes and the P U
        wgmma reads, as zeros (write_output only: P serves the output). No barrier: the
        caller's first-chunk staging ends with one."""
        C = CHUNK
        s_p = s.p
        for u in cutlass.range_constexpr(C * C // self.threads if self.cfg.write_output else 0):
            idx = tid + u * self.threads
            t, col = idx // C, idx % C
            if t // SUB < col // SUB:
                s_p[t, col] = BFloat16(0.0)

    @cute.jit
    def stage_operands(self, s, mb, heads, t0, eos, scale, tid):
        """The pipelined layer's operand stage, then a proxy fence: its generic stores into kq and kdt must be
        visible to the async proxy (wgmma's operand reads) after the stage's barrier."""
        FrostFwdPipelined.stage_operands(self, s, mb, heads, t0, eos, scale, tid)
        cute.arch.fence_proxy("async.shared", space="cta")

    @cute.jit
    def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
        """The pipelined layer's Gram stage, then the same fence for its P stores (read by the P U wgmma)."""
        FrostFwdPipelined.stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid)
        cute.arch.fence_proxy("async.shared", space="cta")

    # ------------------------------------------------------------------ the chain
    @cute.jit
    def chunk_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """State reads, P U and the state update on wgmma (per warpgroup), the block solve on
        mma.sync (per warp, the base layer's code). Four wgmma groups, retired in order: R (the solve
        needs it first), O (runs during the solve), P U onto O, the state update (runs
        during the output stores)."""
        s_w0 = s.w0
        s_mneg = s.mneg
        s_dinv = s.dinv
        c = self.cfg
        K, C = c.K, CHUNK
        h = heads[3]
        mma = warp_mma()
        wg_half = wgmma(C)  # R^T and O^T: N = C each
        wg_st = wgmma(K)  # the state update: N = K
        check_fragment_orders(wg_half, mma, C)
        check_fragment_orders(wg_st, mma, K)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane  # thread index inside the warpgroup
        g_half = wg_half.get_slice(wtid)
        g_st = wg_st.get_slice(wtid)
        j0 = wid * SUB
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        per = cute.size(thr.partition_shape_C((SUB, SUB)))  # values of a 16 x 16 block per thread

        # 1. R^T = W0^T + S^T KBA^T (group 1), O^T = S^T QA^T (group 2); block bi of either
        # is values [per bi, per (bi + 1)) of its accumulator. write_output=False: no O
        # group (nor P U, nor the stores): R, then the state update, the same code
        wo = c.write_output
        acc_r = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        if cutlass.const_expr(wo):
            acc_o = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
            acc_o.fill(0.0)
        for bi in cutlass.range_constexpr(NBLK):
            for e in cutlass.range_constexpr(per):
                jt = crd[e]
                acc_r[bi * per + e] = s_w0[bi * SUB + jt[1], j0 + jt[0]].to(Float32)
        a_s = to_a_operand(acc_s, g_half.partition_shape_A((WG_ROWS, K)))
        b_kba = wg_half.make_fragment_B(g_half.partition_B(s.kba))
        if cutlass.const_expr(wo):
            b_qa = wg_half.make_fragment_B(g_half.partition_B(s.qa))
        wg_half.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.fence()
        for kk in cutlass.range_constexpr(K // 16):
            cute.gemm(wg_half, acc_r, a_s[None, None, kk], b_kba[None, None, kk], acc_r)
        warpgroup.commit_group()
        if cutlass.const_expr(wo):
            for kk in cutlass.range_constexpr(K // 16):
                cute.gemm(wg_half, acc_o, a_s[None, None, kk], b_qa[None, None, kk], acc_o)
            warpgroup.commit_group()
        # the next chunk's row and v copies (the pipelined layer's prefetch) are issued while R and O run:
        # they feed neither (copies into q, k, g, beta and, after this warp's W0 reads
        # above, W0's slot; the wgmma read kq only), so they stay off the path to the solve
        self.prefetch_next_rows(s, t0, eos, lane, wid)
        self.after_rhs_reads(s, heads, t0, eos, lane, wid)
        warpgroup.wait_group(1 if wo else 0)  # R^T is complete; O^T may still run

        # 2. block solve U_i = Dinv_i (R_i - sum_{j<i} M_ij U_j), per warp (the base layer's)
        a_u = []
        staged = self.staged_stores()
        for bi in cutlass.range_constexpr(NBLK):
            r = block_of(acc_r, bi, thr.partition_shape_C((SUB, SUB)))
            u = self.solve_block(mma, thr, lane, r, a_u, s_mneg, s_dinv, bi)
            if cutlass.const_expr(c.write_values):
                # the backward's U (the base layer's store, the same bf16 rounding of the same fp32
                # accumulator): u is the solve's mma.sync result, in no wgmma group, and
                # dead after this block's A operand (a_u) is made, so the store needs no
                # wait and keeps no register live across the wgmma issue below
                if cutlass.const_expr(staged):
                    vio.stage_tile(self.store_buffer(s, wid), u, crd, bi * SUB, 0, True)  # U^T block -> rows t
                else:
                    store_values_block(s.values, u, crd, t0 + bi * SUB, eos, h, j0)
        if cutlass.const_expr(c.write_values and staged):
            vio.flush_rows(self.store_buffer(s, wid), s.values[None, h, None], t0, j0, eos - t0, lane, CHUNK, SUB)

        # 3. O^T += U^T P^T (group 3: A = bf16(U^T), the solve's four blocks as the four
        # k-blocks, B = P [t, s], s contiguous), then S^T <- S^T Diag(e^Gam_last) + U^T KD
        # (group 4, into the state registers; the O group read a bf16 copy of S^T)
        a_uw = assemble_a(a_u, g_st.partition_shape_A((WG_ROWS, C)))
        for e in cutlass.range_constexpr(cute.size(acc_s)):
            acc_s[e] = acc_s[e] * self.state_decay(s, coord_s[e][1])
        acc_w = cute.make_tensor(acc_s.iterator, cute.make_layout(g_st.partition_shape_C((WG_ROWS, K))))
        if cutlass.const_expr(wo):
            b_p = wg_half.make_fragment_B(g_half.partition_B(s.p))
        b_kd = wg_st.make_fragment_B(g_st.partition_B(s.kdt))
        wg_st.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.fence()
        if cutlass.const_expr(wo):
            for kk in cutlass.range_constexpr(C // 16):
                cute.gemm(wg_half, acc_o, a_uw[None, None, kk], b_p[None, None, kk], acc_o)
            warpgroup.commit_group()
        for kk in cutlass.range_constexpr(C // 16):
            cute.gemm(wg_st, acc_w, a_uw[None, None, kk], b_kd[None, None, kk], acc_w)
        warpgroup.commit_group()
        if cutlass.const_expr(wo):
            warpgroup.wait_group(1)  # groups retire in order: O^T is complete, the state may still run

        # 4. the output rows
        if cutlass.const_expr(wo):
            if cutlass.const_expr(staged):
                buf = self.store_buffer(s, wid)
                for bi in cutlass.range_constexpr(NBLK):
                    vio.stage_tile(buf, block_of(acc_o, bi, thr.partition_shape_C((SUB, SUB))), crd, bi * SUB, 0,
                                   True)
                vio.flush_rows(buf, mo[None, h, None], t0, j0, eos - t0, lane, CHUNK, SUB)
            else:
                store_output_rows(mo, acc_o, crd, t0, eos, h, j0)
        # the state update (group 4) stays in flight: settle_state retires it after the next
        # chunk's rows stage, which touches neither the state registers nor KD^T
        if cutlass.const_expr(self.STATE_FINAL_AT_CHAIN_END):
            warpgroup.wait_group(0)

    @cute.jit
    def settle_state(self):
        """Retire the state update (the chain's last wgmma group): called after each chunk's
        rows stage, before the barrier that lets the operand stage rewrite KD^T (every
        warpgroup's own groups retired before any thread writes the tile: the wait, then
        the barrier), and after the chunk loop, before the final state's stores. Between
        the chain and here the update runs under the output stores, the chunk's closing
        barrier and the next chunk's rows stage (its cp.async rows landed during the chain).
        With nothing in flight (STATE_FINAL_AT_CHAIN_END, or no chunk yet) the wait returns
        at once."""
        warpgroup.wait_group(0)


class FrostFwdWgmmaCheckpoints(FrostFwdWgmma, FrostFwdPipelinedCheckpoints):
    """FrostFwdWgmma compiled with write_checkpoints, launched through the pipelined layer's
    checkpoint ABI (the extra state_checkpoints pointer: FrostFwdPipelinedCheckpoints.__call__,
    inherited). The base layer's chunk loop stores the state registers as bf16 after each chunk's rows stage and settle_state's
    wait_group(0), so the state update's wgmma group has retired when they are read."""

    TRAINING_LAUNCHER = True


class FrostFwdWgmmaValues(FrostFwdWgmma, FrostFwdPipelinedValues):
    """FrostFwdWgmma compiled with write_checkpoints and write_values, launched through the
    pipelined layer's values ABI
    (state_checkpoints and values last: FrostFwdPipelinedValues.__call__, inherited): the
    checkpoint kernel whose chain also stores U per token (chunk_chain)."""

    TRAINING_LAUNCHER = True

