"""FROST backward, kernel 3 (grads, scalar gates) with the state products on warpgroup MMA
(``FrostBwdConfig.grads_wgmma``, NOTES_bwd.md v1.8).

FrostBwdGrads computes the three state products

    dQA = dO S^T,  dKBA = -dR S^T (the sign is applied later),  dKD = U dS^T
    ([C, V] x [V, K], fp32)

per warp with m16n8k16 mma.sync: warp w owns rows of block w % 4 and channels of half
w / 4, and every warp reloads its A fragments (dO, dR, U) and the B fragments of S and dS
(ldmatrix.trans) for all V / 16 k-steps: 3 (V / 16)(K / 16) mma.sync and, at K = 128,
11 V / 16 ldmatrix.x4 per warp per item (192 and 88 at K = V = 128). Here the four
warps of warpgroup g = w / 4 issue one wgmma m64nNk16 per k-step (N = K / 2: the
warpgroup's channel half g, all 64 rows), both operands read by the tensor cores from
shared memory (SS mode: no operand registers):
- A = dO, dR, U [C, V] (K-major: v contiguous), SW128 tiles;
- B = S, dS seen as [K, V] (MN-major: the channel index d contiguous, as in global
  memory, where they are V-major [V, K]); stored as [V, K] tiles with the swizzle atom
  one channel half wide (SW128 at K = 128, SW64 at K = 64), so that warpgroup g reads
  exactly the atom column of its half.
The accumulators are FrostBwdGrads' per-warp [16, K / 2] tensors themselves: a warpgroup's
m64nN accumulator holds, per thread, the warp's 16 x 16 blocks in order
(bwd_chain_wgmma.check_block_order, run on the traced layouts while compiling; the PTX
tables in frost_wgmma_fragments_test), so stage_adjoints, row_sums and write_qk run
unchanged on them.

Order of an item (scores_and_products): after stage_load's barrier the three products are
issued as one wgmma group (3 x V / 16 instructions per warpgroup, asynchronous); while the
tensor cores run them, the warps compute the score tiles (dZp, dZm: mma.sync and ldmatrix
on the same dO, dR, U tiles, which both may read at once) and e^Gam_last sum S dS; then
wait_group(0) and one barrier (the base kernel has a barrier between the scores and the
products as well: not needed here, the products do not read the scores).

Shared memory: dO, U, dR, S, dS unpadded and swizzled (every other reader goes through the
swizzled tensors: the cp.async fills, score_tile's ldmatrix, stage_values' and
state_sum's 16-byte loads; fp16 dO lands and is converted through a swizzled fp16 view).
The cp.async fills are generic-proxy writes: stage_load fences them against the async
proxy before its barrier. dO, U, dZp, dZm stay consecutive (dO, U first, then a 1 KB
tail for the row padding dO and U lost), so the dq/dk staging overlays them as before
(as many tiles at once as the default kernel), through an unswizzled pointer.

Numerics: the k16 steps of each product run in the mma.sync kernel's order; on the H200
the gradients came out bitwise FrostBwdGrads' (NOTES_bwd.md "v1.7 and v1.8 on the H200";
the smoke's ``--grads wgmma-both`` bounds the difference and reports bitwise equality).

The products themselves (the swizzled views, the issue of the group, the accumulators)
are WgmmaStateProducts, a mixin: FrostBwdGradsWgmma here (scalar gates) and
bwd_grads_vec.FrostBwdGradsVecWgmma (vector gates, FROST_BWD_GRADS_VEC=wgmma) derive
from it; this module's smem_plan is the scalar-gate plan.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import OperandMajorMode, warp, warpgroup

from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import check_block_order
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.bwd_grads import THREADS, FrostBwdGrads, _tv, smem_plan as base_plan
from cudnn.linear_attention.frost.kernels.bwd_grads import staging_bytes as grads_staging_bytes
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, SW64, SW128, VEC, sw128_layout, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_ROWS, WG_THREADS
from cudnn.linear_attention.frost.kernels.stmatrix_map import check_stmatrix_copy

#: the wgmma B operands, [V, K] tiles with the channel-half swizzle (the A operands dO, U,
#: dR are SW128 [C, V] tiles)
WGMMA_B = ("sf", "dsf")
#: the score adjoints' B operands, [C, K] row tiles with the same channel-half swizzle (their
#: A operands dZp, dZm are SW128 [C, C] tiles, read K-major and, transposed, MN-major)
ADJOINT_B = ("qr", "kr", "kbr")
#: the dq/dk staging's region, consecutive from dO on (as in bwd_grads.STAGED); "tail" is
#: room for it alone: without the default plan's row padding in dO, U, dZp and dZm (all
#: swizzled tiles here) the region would be exactly 2,048 bytes short of two padded tiles
#: (2 x 64 x 272 bytes) at (K, V) = (128, 64) for 16-bit dq/dk and at K = V = 64 for fp32
#: ones, where the default plan stages both at once; the tail's two 1,024-byte units keep
#: the swizzled tiles after it aligned
STAGED = ("do", "u", "dzp", "dzm", "tail")
TAIL_BYTES = 2048


def b_swizzle(K: int) -> str:
    """The swizzle of the S / dS tiles: the atom is one channel half (K / 2 bf16) wide."""
    if K == 128:
        return SW128
    if K == 64:
        return SW64
    raise ValueError(f"bwd_grads_wgmma: K must be 64 or 128, got {K}")


def smem_plan(c: FrostFwdConfig):
    """FrostBwdGrads' plan with dO, U (then dZp, dZm, padded as before, and a tail: the
    staging region), dR, S and dS as swizzled tiles in front (1024-byte aligned,
    unpadded), the rest after."""
    if c.gate_per_channel:
        raise ValueError("this wgmma grads plan serves scalar gates only (vector gates: bwd_grads_vec.smem_regions)")
    base = {e[0]: e for e in base_plan(c)}
    sw_b = b_swizzle(c.K)
    front = [(n, "bf16", base[n][2], SW128) for n in ("do", "u", "dzp", "dzm")]
    front += [("tail", "bf16", (TAIL_BYTES // 2,), (1,))]
    front += [("dr", "bf16", base["dr"][2], SW128)] + [(n, "bf16", base[n][2], sw_b) for n in WGMMA_B + ADJOINT_B]
    names = {e[0] for e in front}
    return front + [e for e in base_plan(c) if e[0] not in names]


def staging_bytes(c: FrostFwdConfig) -> int:
    """Bytes from s.do on that the dq/dk staging may use: the consecutive STAGED tensors."""
    return grads_staging_bytes(c, smem_plan(c), STAGED)


def wgmma_ss(n: int):
    """m64 n k16, bf16 A K-major and B MN-major, both from shared memory, fp32 accumulate."""
    op = warpgroup.MmaF16BF16Op(BFloat16, Float32, (WG_ROWS, n, 16), warpgroup.OperandSource.SMEM,
                                OperandMajorMode.K, OperandMajorMode.MN)
    return cute.make_tiled_mma(cute.make_mma_atom(op))


def wgmma_ss_t(n: int):
    """m64 n k16 as wgmma_ss, A MN-major (the transpose of a K-major tile)."""
    op = warpgroup.MmaF16BF16Op(BFloat16, Float32, (WG_ROWS, n, 16), warpgroup.OperandSource.SMEM,
                                OperandMajorMode.MN, OperandMajorMode.MN)
    return cute.make_tiled_mma(cute.make_mma_atom(op))


class WgmmaStateProducts:
    """The three state products dO S^T, dR S^T, U dS^T on warpgroup MMA, both operands from
    swizzled shared tiles (SS mode), for a grads kernel deriving from FrostBwdGrads: the
    scalar-gate FrostBwdGradsWgmma below and the vector-gate FrostBwdGradsVecWgmma
    (bwd_grads_vec.py). Its shared plan holds dO, dR, U as SW128 [C, V] tiles and S, dS as
    [V, K] tiles with the swizzle b_swizzle(K); the kernel fences its cp.async fills against
    the async proxy before the barrier that precedes issue_state_products, and retires the
    group (warpgroup.wait_group) before it reads the accumulators or overwrites the tiles."""

    # ------------------------------------------------------------------ swizzled tiles
    def do_io_view(self, s) -> cute.Tensor:
        """dO's SW128 tile seen with the io element type, swizzle kept (recast_ptr drops it
        unless given): raw fp16 rows land (issue_front, issue_copies), and are converted in
        place (convert_rows: each thread the 16-byte slices its own copies wrote, through
        the same swizzle), where bf16 is read."""
        sw = sw128_layout((CHUNK, self.cfg.V)).inner
        return cute.make_tensor(cute.recast_ptr(s.do.iterator, swizzle_=sw, dtype=self.io), s.do.layout)

    def state_kv(self, st: cute.Tensor) -> cute.Tensor:
        """A swizzled [V, K] state tile seen as [K, V] (the swizzle stays in the pointer;
        FrostBwdGrads.state_kv assumes padded rows)."""
        return cute.make_tensor(st.iterator, cute.select(st.layout, mode=[1, 0]))

    @cute.jit
    def channel_half(self, st: cute.Tensor, hc) -> cute.Tensor:
        """Channels [hc K / 2, (hc + 1) K / 2) of a [R, K] tile with the channel-half
        swizzle (a [V, K] state, a [C, K] row tile), as the wgmma's B [K / 2, R] (N =
        channels, contiguous; the reduction over the R rows)."""
        K = self.cfg.K
        rows = cute.size(st, mode=[0])
        return cute.local_tile(self.state_kv(st), (K // 2, rows), (hc, 0))

    # ------------------------------------------------------------------ products
    @cute.jit
    def issue_state_products(self, s, thr, lane, wid):
        """Issue warp wid's warpgroup's three products (rows: all 64, channels: half
        wid // 4; V / 16 k16 steps each, in FrostBwdGrads.products_with_states' order, the
        first without ACCUMULATE: no zero fill) as one committed, not yet retired, group.
        Returns FrostBwdGrads' per-warp [16, K / 2] accumulators, whose registers the
        warpgroup's m64 accumulators are (check_block_order)."""
        K, V = self.cfg.K, self.cfg.V
        DN = K // 2
        hc = wid // NBLK  # the warpgroup, and its channel half
        mma = warp_mma()
        wg = wgmma_ss(DN)
        check_block_order(wg, mma, DN)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane  # thread index inside the warpgroup
        g = wg.get_slice(wtid)

        # FrostBwdGrads' per-warp accumulators, seen as the warpgroup's (same registers)
        acc_q = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), Float32)
        acc_kb = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), Float32)
        acc_k = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), Float32)
        wg_shape = g.partition_shape_C((WG_ROWS, DN))
        if cutlass.const_expr(cute.size(wg_shape) != cute.size(acc_q)):
            raise ValueError(f"bwd_grads_wgmma: wgmma accumulator {wg_shape} vs warp's {acc_q.layout}")
        w_q = cute.make_tensor(acc_q.iterator, cute.make_layout(wg_shape))
        w_kb = cute.make_tensor(acc_kb.iterator, cute.make_layout(wg_shape))
        w_k = cute.make_tensor(acc_k.iterator, cute.make_layout(wg_shape))

        a_do = wg.make_fragment_A(g.partition_A(s.do))
        a_dr = wg.make_fragment_A(g.partition_A(s.dr))
        a_u = wg.make_fragment_A(g.partition_A(s.u))
        b_s = wg.make_fragment_B(g.partition_B(self.channel_half(s.sf, hc)))
        b_ds = wg.make_fragment_B(g.partition_B(self.channel_half(s.dsf, hc)))
        warpgroup.fence()
        for acc, a, b in ((w_q, a_do, b_s), (w_kb, a_dr, b_s), (w_k, a_u, b_ds)):
            for kk in cutlass.range_constexpr(V // 16):
                wg.set(warpgroup.Field.ACCUMULATE, kk != 0)
                cute.gemm(wg, acc, a[None, None, kk], b[None, None, kk], acc)
        warpgroup.commit_group()
        return acc_q, acc_kb, acc_k


class FrostBwdGradsWgmma(WgmmaStateProducts, FrostBwdGrads):
    """Callable for cute.compile (bwd_abi's argument list), as FrostBwdGrads."""

    smem_plan = staticmethod(smem_plan)
    # dO .. dZm and the tail (FrostBwdGrads.staging reads them through s.do's pointer, which
    # has no swizzle: recast_ptr drops it)
    staged = STAGED

    def __init__(self, cfg: FrostBwdConfig, vector_gates: bool = False):
        if not cfg.grads_wgmma or cfg.stage != "grads" or vector_gates:
            raise ValueError("FrostBwdGradsWgmma: a scalar-gate grads config with grads_wgmma set")
        super().__init__(cfg, vector_gates)

    @cute.jit
    def stage_load(self, s, mq, mk, heads, t0, eos, tid):
        """FrostBwdGrads.stage_load (it ends with the wait for the cp.async copies), then a
        proxy fence: the copies' generic writes must be visible to wgmma after the barrier."""
        FrostBwdGrads.stage_load(self, s, mq, mk, heads, t0, eos, tid)
        cute.arch.fence_proxy("async.shared", space="cta")

    # ------------------------------------------------------------------ products
    @cute.jit
    def scores_and_products(self, s, scale, thr, lane, wid, tid):
        """Issue the three state products (one wgmma group per warpgroup), compute the score
        tiles and the S dS sum while they run, wait, barrier (S and dS are dead after it)."""
        DN = self.cfg.K // 2
        bi = wid % NBLK
        hc = wid // NBLK
        acc_q, acc_kb, acc_k = self.issue_state_products(s, thr, lane, wid)

        # independent of the products: the score tiles, e^Gam_last sum S dS
        self.stage_scores(s, scale, thr, lane, wid)
        self.zero_upper_scores(s, tid)
        self.state_sum(s, tid)
        # the score tiles are generic-proxy writes that the adjoints' wgmma reads
        cute.arch.fence_proxy("async.shared", space="cta")
        warpgroup.wait_group(0)
        cute.arch.sync_threads()  # the scores are visible; S and dS are dead
        return acc_q, acc_kb, acc_k, thr.partition_C(cute.make_identity_tensor((SUB, DN))), bi, hc

    @cute.jit
    def row_fragments(self, s, bi, hc, lane):
        """(q-hat, k-hat, kb) of this warp's [16, K / 2] tile in the accumulators' layout,
        by ldmatrix.x4 (four per tile): the row tiles are swizzled here, where an element
        read costs its swizzled address each time (six reads per accumulator element in the
        row sums, the KD sum and the L2-norm adjoint). ldmatrix gives lane l row l // 4,
        columns 2 (l % 4) + {0, 1} of each 8 x 8 matrix, the m16n8 accumulator's own map
        (the same table as stmatrix: check_stmatrix_copy on the traced layouts)."""
        DN = self.cfg.K // 2
        mma = warp_mma()
        thr = mma.get_slice(lane)
        atom = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), BFloat16)
        copy = cute.make_tiled_copy_C(atom, mma)
        check_stmatrix_copy(_tv(copy.layout_dst_tv_tiled), _tv(copy.layout_src_tv_tiled), _tv(mma.tv_layout_C_tiled))
        thr_copy = copy.get_slice(lane)
        out = []
        for tile in (s.qr, s.kr, s.kbr):
            frag = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), BFloat16)
            cute.copy(copy, thr_copy.partition_S(cute.local_tile(tile, (SUB, DN), (bi, hc))), thr_copy.retile(frag))
            out.append(frag)
        return out

    @cute.jit
    def zero_upper_scores(self, s, tid):
        """Zeros into the 16 x 16 blocks of dZp and dZm above their diagonal, which
        stage_scores never writes (and the previous item's dq/dk staging overwrote): the
        adjoints' wgmma reads whole [C, C] tiles. Thread tid: row tid // 4, 16-byte slices
        tid % 4 and tid % 4 + 4 of it, where they lie right of the row's diagonal block."""
        C = CHUNK
        per_row = C // VEC
        r = tid // (THREADS // C)
        z = cute.make_rmem_tensor((VEC,), BFloat16)
        z.fill(0.0)
        for i in cutlass.range_constexpr(per_row // (THREADS // C)):
            cv = tid % (THREADS // C) + i * (THREADS // C)
            if cv * VEC >= (r // SUB + 1) * SUB:
                cute.autovec_copy(z, cute.local_tile(s.dzp[r, None], (VEC,), (cv,)))
                cute.autovec_copy(z, cute.local_tile(s.dzm[r, None], (VEC,), (cv,)))

    @cute.jit
    def adjoint_products(self, s, acc_q, acc_kb, acc_k, thr, lane, wid, bi, hc, between=None):
        """The score adjoints as one wgmma group per warpgroup onto the scaled state
        products (its channel half hc, all 64 rows): dZp k^ into dq^ and dZm k^ into dkb
        (A the K-major [t, s] score tiles), dZp^T q^ + dZm^T kb into dk^_dir (A the same
        tiles read MN-major); B the channel half of the [C, K] row tiles; C / 16 k16 steps
        each, the upper blocks of the score tiles zero (zero_upper_scores). between runs
        while the group is in flight; retired before it returns."""
        DN = self.cfg.K // 2
        C = CHUNK
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane
        wg = wgmma_ss(DN)
        wg_t = wgmma_ss_t(DN)
        check_block_order(wg, warp_mma(), DN)
        check_block_order(wg_t, warp_mma(), DN)
        g = wg.get_slice(wtid)
        g_t = wg_t.get_slice(wtid)
        wg_shape = g.partition_shape_C((WG_ROWS, DN))
        w_q = cute.make_tensor(acc_q.iterator, cute.make_layout(wg_shape))
        w_kb = cute.make_tensor(acc_kb.iterator, cute.make_layout(wg_shape))
        w_k = cute.make_tensor(acc_k.iterator, cute.make_layout(wg_shape))
        a_p = wg.make_fragment_A(g.partition_A(s.dzp))
        a_m = wg.make_fragment_A(g.partition_A(s.dzm))
        a_pt = wg_t.make_fragment_A(g_t.partition_A(self.state_kv(s.dzp)))
        a_mt = wg_t.make_fragment_A(g_t.partition_A(self.state_kv(s.dzm)))
        b_k = wg.make_fragment_B(g.partition_B(self.channel_half(s.kr, hc)))
        b_q = wg_t.make_fragment_B(g_t.partition_B(self.channel_half(s.qr, hc)))
        b_kb = wg_t.make_fragment_B(g_t.partition_B(self.channel_half(s.kbr, hc)))
        warpgroup.fence()  # the accumulators were scaled by ordinary instructions
        wg.set(warpgroup.Field.ACCUMULATE, True)
        wg_t.set(warpgroup.Field.ACCUMULATE, True)
        for acc, a, b in ((w_q, a_p, b_k), (w_kb, a_m, b_k)):
            for kk in cutlass.range_constexpr(C // 16):
                cute.gemm(wg, acc, a[None, None, kk], b[None, None, kk], acc)
        for a, b in ((a_pt, b_q), (a_mt, b_kb)):
            for kk in cutlass.range_constexpr(C // 16):
                cute.gemm(wg_t, w_k, a[None, None, kk], b[None, None, kk], w_k)
        warpgroup.commit_group()
        if cutlass.const_expr(between is not None):
            between()  # the next item's S and dS copies issue while the tensor cores run
        warpgroup.wait_group(0)
