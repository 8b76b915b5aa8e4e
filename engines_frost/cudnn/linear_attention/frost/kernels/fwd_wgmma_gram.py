"""FROST forward, wgmma layer with the scalar-gate (GDN) Gram on warpgroup MMA: a mixin.

On its own an experiment kernel: the test and bench tooling builds it
(frost_fwd_experiments.py, knob gram="wgmma" / "wgmma16" / "wgmma64", environment
FROST_FWD_GRAM); the product's wgmma classes never set ``gram_wgmma`` and trace exactly as
before (NOTES.md, "v3 Gram on wgmma for scalar gates"). The product's four-role forward
(fwd_ws4.py) builds its math warpgroup's Gram with it.

The pipelined layer's Gram stage builds M = beta k k^T * decay and P = scale q k^T * decay tile by tile on
mma.sync (ten 16 x 16 x K tiles dealt to the eight warps, ~1.7 us per chunk on the H200).
Here each product is one SS warpgroup MMA chain per N-column block of its 64 x 64 square
(N = gram_n: 32 by default, 16 or 64): A = k (M) or q (P), the whole [64, K] tile, B = k
rows [N bj, N bj + N), both read from
shared memory by the tensor cores (q and k are staged in the 128-byte swizzled K-major
layout for that). Warpgroup 0 builds M, warpgroup 1 P (V = 64: one warpgroup builds both,
one after the other). The first attempt (m64n64: 32 accumulator registers, per-element
gate and beta loads in the epilogue, on top of the 64 state registers held across the
chunk loop) spilled; here:
- the accumulator is m64nN (N / 2 fp32 registers): the column blocks are issued one after
  the other into two such accumulators, block bj + 1 issued before block bj's epilogue
  runs (the tensor cores busy during the epilogue; N = 64 is one block);
- the epilogue loads a thread's gate and beta once per distinct row (two per thread,
  wgmma_fragments.shared_coordinate, checked at trace time on the DSL's layout) and the
  column gates once per distinct column and block;
- the epilogue's store addresses (SW128 P offsets: a row XOR per value and block), the
  rows stage's (q and k are SW128 now) and, with an initial state, the final state's
  offsets are loop-invariant: LLVM hoisted them out of the chunk loop and ptxas spilled
  them (8 to 96 bytes in the drafts); lane_in_loop / tid_in_loop (volatile reads of
  %laneid / %tid.x) and final_state_coords keep them inside (NOTES.md);
- warp w of a warpgroup holds rows [16 w, 16 w + 16) of the accumulator, so it stores
  only the 16 x 16 blocks (w, c) with c <= w: -M_wc (bf16, c < w), M_ww (fp32, the diagonal
  block the inverse reads) and P_wc (bf16, SW128, c <= w; the blocks above the diagonal
  stay the zeros the wgmma layer's before_chunks wrote). Warp w of the M warpgroup inverts its diagonal
  block after the last block's epilogue (sync_warp only, as the pipelined layer).
Full squares are computed (1.05 M MAC instead of the ten tiles' 0.66 M): the masked
upper blocks cost tensor time, not registers or stores.

bf16 io only (q and k are staged raw as bf16, so io_view needs no recast and keeps the
swizzle), scalar gates only, sm_90a only (the wgmma layer's).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass._mlir.dialects import llvm
from cutlass.cute.nvgpu import OperandMajorMode, warpgroup
from cutlass.cutlass_dsl import T, dsl_user_op

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, SUB, SW128, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_ROWS, WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_wgmma import smem_plan as wgmma_smem_plan
from cudnn.linear_attention.frost.kernels.wgmma_fragments import fragment_coords, shared_coordinate, tv_size

GRAM_N = 32  # the accumulator's N (default): 32 columns of M or P per wgmma group
GRAM_NS = (16, 32, 64)
#: rows of the inverse-norm tile s.norm the normed epilogue reads (gram_norms)
NORM_K, NORM_Q = 0, 1
LOG2_E = 1.4426950408889634  # the widths the epilogue handles (gram_n)
#: shared tiles this kernel stages SW128 on top of the wgmma layer's: the Gram's A and B operands
SWIZZLED_ROWS = ("q", "k")


def smem_plan(c: FrostFwdConfig):
    """The wgmma layer's plan with q and k as [C, K] SW128 tiles (1024-byte aligned, first)."""
    K, C = c.K, CHUNK
    rows = [(name, "bf16", (C, K), SW128) for name in SWIZZLED_ROWS]
    return rows + [entry for entry in wgmma_smem_plan(c) if entry[0] not in SWIZZLED_ROWS]


@dsl_user_op
def lane_in_loop(*, loc=None, ip=None) -> Int32:
    """%laneid through a volatile mov: the same value as cute.arch.lane_idx(), but LLVM may
    not hoist it (or anything computed from it) out of the chunk loop. The Gram epilogue's
    store addresses (SW128 P offsets: a row XOR per value and block) are loop-invariant;
    hoisted, ~20 of them sat in registers across the whole chunk and ptxas spilled them."""
    return Int32(llvm.inline_asm(T.i32(), [], "mov.u32 $0, %laneid;", "=r", has_side_effects=True,
                                 is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT))


@dsl_user_op
def tid_in_loop(*, loc=None, ip=None) -> Int32:
    """%tid.x through a volatile mov (lane_in_loop's reason, for the rows stage)."""
    return Int32(llvm.inline_asm(T.i32(), [], "mov.u32 $0, %tid.x;", "=r", has_side_effects=True,
                                 is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT))


def wgmma_ss(n: int):
    """m64 n k16, A and B K-major SW128 tiles in shared memory, fp32 accumulate."""
    op = warpgroup.MmaF16BF16Op(BFloat16, Float32, (WG_ROWS, n, 16), warpgroup.OperandSource.SMEM,
                                OperandMajorMode.K, OperandMajorMode.K)
    return cute.make_tiled_mma(cute.make_mma_atom(op))


def accumulator_coordinate_maps(wg, n: int):
    """(row representatives, column representatives, 16-column sub-block per value) of wg's
    m64n accumulator (shared_coordinate), after checking at trace time what the epilogue
    assumes of the layout: 128 threads, thread t's rows inside [16 (t // 32), 16 (t // 32)
    + 16) (warp w owns block row w), every column inside [0, n), and value v's column in
    the same 16-column sub-block on every thread."""
    shape, stride = wg.tv_layout_C.shape, wg.tv_layout_C.stride
    tv = ((cute.get(shape, mode=[0]), cute.get(shape, mode=[1])),
          (cute.get(stride, mode=[0]), cute.get(stride, mode=[1])))
    threads, values = tv_size(tv)
    sub = [fragment_coords(*tv, WG_ROWS, 0, v)[1] // SUB for v in range(values)]
    for t in range(threads if threads == WG_THREADS else 0):
        for v in range(values):
            r, col = fragment_coords(*tv, WG_ROWS, t, v)
            if r // SUB != t // 32 or not 0 <= col < n or col // SUB != sub[v]:
                threads = -1
    if threads != WG_THREADS:
        raise ValueError(f"fwd_wgmma_gram: the wgmma m64n{n} accumulator {tv} is not warp w on rows "
                         f"[16 w, 16 w + 16), value v in one 16-column block; the Gram epilogue's stores "
                         f"would be wrong")
    return shared_coordinate(tv, WG_ROWS, 0), shared_coordinate(tv, WG_ROWS, 1), sub


class GramWgmma:
    """Mixin over a wgmma-layer class (FrostFwdWgmma or its training launchers): the scalar-gate Gram
    stage on warpgroup MMA (module docstring). Put first in the bases."""

    smem_plan = staticmethod(smem_plan)
    gram_wgmma = True
    RAW_ROWS_SWIZZLED = True  # q and k staged raw into SW128 tiles (bf16 io only)
    #: the chain waits for its state update and the checkpoint store stays at the loop's
    #: top (fwd_mma.FrostFwdMma.STATE_FINAL_AT_CHAIN_END): with the store after the rows stage
    #: the m64n16 Gram's training build reached 255 registers and an 8-byte stack frame
    STATE_FINAL_AT_CHAIN_END = True
    #: accumulators of the column-block pipeline: 2 issues block bj + 1 before block bj's
    #: epilogue (16 registers), 1 waits for each block before its epilogue (8)
    gram_buffers = 2
    #: the accumulator's N (GRAM_NS): 16 (8 registers per block, A read from shared memory
    #: four times per product), 32 (16 registers, A read twice) or 64 (32 registers, one
    #: block: nothing overlaps its epilogue)
    gram_n = GRAM_N
    #: the warpgroups the two products are dealt to (warps 0 .. 4 groups - 1 of the caller's
    #: numbering); None: all of the CTA's (self.warps // 4)
    gram_warpgroups = None
    #: True: q and k are the caller's raw rows and s.norm [2, C] holds their l2 norms'
    #: inverses (rows NORM_K, NORM_Q): M_ts gets nk_t nk_s, P_ts nq_t nk_s (fwd_ws4.RawRing)
    gram_norms = False
    #: True: the decays as 2^(Gam_t log2 e - Gam_s log2 e + log2 nk_s) without the clamp
    #: (three instructions fewer per value: the masked values, whose exponent may overflow,
    #: are replaced, not scaled); False: e^min(Gam_t - Gam_s, 0) times the norm
    gram_log2 = False
    #: True: P built transposed, P^T = k q^T (A = k, B = q), stored back as P: warp w then
    #: stores P's blocks (c, w) with c >= w (4 - w of them) against M's w + 1, so with both
    #: products on one warpgroup every warp runs five epilogue blocks, not warp 3 eight
    #: and warp 0 two; False: P = q k^T
    gram_p_transposed = False
    #: True: the class compiles write_output=False configs, the Gram then M alone (the
    #: four-role kernels, fwd_ws4.py); False: they are refused (the wgmma Gram experiments,
    #: whose P has its own warpgroup)
    gram_output_optional = False

    def __init__(self, cfg: FrostFwdConfig):
        if self.gram_n not in GRAM_NS:
            raise ValueError(f"{type(self).__name__}: gram_n must be one of {GRAM_NS}, got {self.gram_n}")
        if cfg.gate_per_channel or cfg.io_dtype != "bfloat16":
            raise ValueError(f"{type(self).__name__}: the Gram on wgmma is built for scalar gates and bf16 io, "
                             f"got gate_per_channel={cfg.gate_per_channel}, io {cfg.io_dtype}")
        if not cfg.write_output and not self.gram_output_optional:
            raise ValueError(f"{type(self).__name__}: the Gram on wgmma builds P on its own warpgroup; "
                             f"write_output=False is the product pipelined / wgmma kernels' and the "
                             f"four-role kernels'")
        super().__init__(cfg)

    def final_state_coords(self, coord_s):
        """The state registers' coordinates again, from lane_in_loop: with an initial state,
        LLVM otherwise reuses the initial state's load offsets for the final state's stores
        and keeps them across the chunk loop (one spilled register in the training launcher
        without l2norm)."""
        thr = warp_mma().get_slice(lane_in_loop())
        return thr.partition_C(cute.make_identity_tensor((SUB, self.cfg.K)))

    @cute.jit
    def stage_rows(self, s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid):
        """The wgmma layer's rows stage with its addresses computed per chunk (tid_in_loop: its q and k
        addresses carry the SW128 row XOR now; hoisted, one spilled). The operand stage
        keeps the hoisted form: given tid_in_loop too, ptxas spilled 80 bytes."""
        super(GramWgmma, self).stage_rows(s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid_in_loop())

    @cute.jit
    def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
        """M on warpgroup 0, P on warpgroup 1 (V = 64 or gram_warpgroups 1: both on
        warpgroup 0, one after the other; without the output M alone: P serves only O),
        then the wgmma layer's fence for the generic-proxy P stores the P U wgmma reads."""
        s_q = s.q
        s_k = s.k
        s_g = s.g
        s_beta = s.beta
        s_mneg = s.mneg
        s_p = s.p
        s_md = s.md
        s_dinv = s.dinv
        K = self.cfg.K
        groups = self.gram_groups()
        n = self.gram_n
        blocks = CHUNK // n
        wg = wgmma_ss(n)
        row_rep, col_rep, sub = accumulator_coordinate_maps(wg, n)
        wl = wid % (WG_THREADS // 32)  # warp inside its warpgroup = block row it stores
        lane = lane_in_loop()  # the addresses below are computed here, per chunk
        gslice = wg.get_slice(wl * 32 + lane)
        crd = gslice.partition_C(cute.make_identity_tensor((WG_ROWS, n)))
        nval = cute.size(crd)
        # the row gates and betas of this thread's accumulator rows, once per distinct row
        g_row, b_row = self.row_terms(s_g, s_beta, crd, row_rep, nval)
        pt = self.gram_p_transposed
        p_row = None
        wo = self.cfg.write_output
        if cutlass.const_expr(self.gram_norms):  # raw q, k: the l2 norms' factors on rows and columns
            s_norm = s.norm
            p_row = []
            for e in cutlass.range_constexpr(nval):
                if cutlass.const_expr(row_rep[e] == e):
                    b_row[e] = b_row[e] * s_norm[NORM_K, crd[e][0]]
                    # P's row is a q row, P^T's a k row
                    if cutlass.const_expr(wo):
                        p_row.append(scale * s_norm[NORM_K if pt else NORM_Q, crd[e][0]])
                else:
                    b_row[e] = b_row[row_rep[e]]
                    if cutlass.const_expr(wo):
                        p_row.append(p_row[row_rep[e]])
        if cutlass.const_expr(self.gram_log2):  # the row gates in the exponent's base-2 units
            for e in cutlass.range_constexpr(nval):
                if cutlass.const_expr(row_rep[e] == e):
                    g_row[e] = g_row[e] * Float32(LOG2_E)
                else:
                    g_row[e] = g_row[row_rep[e]]
        # M is left out where a timing experiment's skip_stages "inverse" asks for it
        # (fwd_ws4.FourRoles.math_forms_inverse)
        first = 1 if wo and not getattr(self, "math_forms_inverse", True) else 0
        for prod in cutlass.range_constexpr(first, 2 if wo else 1):  # 0: M (A = k), 1: P (A = q)
            if wid // (WG_THREADS // 32) == prod % groups:
                # the accumulator's rows are k rows in M and P^T (A = k), q rows in P;
                # its columns k rows, but q rows in P^T (B)
                tr = prod == 1 and pt
                s_b = s_k
                if cutlass.const_expr(prod == 0 or tr):
                    a_frag = wg.make_fragment_A(gslice.partition_A(s_k))
                    if cutlass.const_expr(tr):
                        s_b = s_q
                else:
                    a_frag = wg.make_fragment_A(gslice.partition_A(s_q))
                nb = self.gram_buffers
                accs = [cute.make_rmem_tensor(gslice.partition_shape_C((WG_ROWS, n)), Float32)
                        for _ in range(nb)]
                if cutlass.const_expr(nb == 2):
                    self.gram_issue(wg, gslice, a_frag, s_b, accs[0], 0, K, n)
                for bj in cutlass.range_constexpr(blocks):
                    if cutlass.const_expr(nb == 1):
                        self.gram_issue(wg, gslice, a_frag, s_b, accs[0], bj, K, n)
                        warpgroup.wait_group(0)
                    elif cutlass.const_expr(bj + 1 < blocks):
                        # block bj + 1 runs while block bj's epilogue does (the fence in
                        # gram_issue orders the epilogue's reads of block bj - 1's registers)
                        self.gram_issue(wg, gslice, a_frag, s_b, accs[(bj + 1) % 2], bj + 1, K, n)
                        warpgroup.wait_group(1)
                    else:
                        warpgroup.wait_group(0)
                    acc = accs[bj % nb]
                    for sb in cutlass.range_constexpr(n // SUB):
                        c = bj * (n // SUB) + sb  # the 16-column block of M / P these values are in
                        vals = [e for e in range(nval) if sub[e] == sb]
                        # warps above the block's rows (below, in P^T) hold only masked values
                        if cutlass.const_expr(tr):
                            live = wl <= c
                        else:
                            live = wl >= c
                        if live:
                            g_col = {}
                            n_col = {}
                            for e in vals:
                                if cutlass.const_expr(col_rep[e] == e):
                                    g_col[e] = s_g[bj * n + crd[e][1], 0]
                                    if cutlass.const_expr(self.gram_norms):
                                        n_col[e] = s_norm[NORM_Q if tr else NORM_K, bj * n + crd[e][1]]
                                    if cutlass.const_expr(self.gram_log2):
                                        # e^(Gam_t - Gam_s) nk_s = 2^(row - col): the column's
                                        # norm joins its exponent (in P^T, nq_t: col - row)
                                        g_col[e] = g_col[e] * Float32(LOG2_E)
                                        if cutlass.const_expr(self.gram_norms):
                                            if cutlass.const_expr(tr):
                                                g_col[e] = g_col[e] + cute.math.log2(n_col[e], fastmath=True)
                                            else:
                                                g_col[e] = g_col[e] - cute.math.log2(n_col[e], fastmath=True)
                                else:
                                    g_col[e] = g_col[col_rep[e]]
                                    if cutlass.const_expr(self.gram_norms):
                                        n_col[e] = n_col[col_rep[e]]
                            for e in vals:
                                t = crd[e][0]
                                u = bj * n + crd[e][1]
                                # the decay's exponent: later position's gate minus earlier's
                                late = g_row[e]
                                early = g_col[e]
                                if cutlass.const_expr(tr):
                                    late = g_col[e]
                                    early = g_row[e]
                                if cutlass.const_expr(self.gram_log2):
                                    # no clamp: a masked value's overflow is selected away below
                                    f = cute.arch.exp2(late - early)
                                else:
                                    f = cute.arch.exp(cute.arch.fmin(late - early, Float32(0.0)))
                                    if cutlass.const_expr(self.gram_norms):
                                        f = f * n_col[e]
                                if cutlass.const_expr(prod == 0):
                                    mval = acc[e] * f * b_row[e]
                                    if u >= t:
                                        mval = Float32(0.0)
                                    if wl == c:
                                        s_md[c, t - c * SUB, u - c * SUB] = mval
                                    else:
                                        s_mneg[t, u] = (-mval).to(BFloat16)
                                else:
                                    if cutlass.const_expr(self.gram_norms):
                                        pval = acc[e] * f * p_row[e]
                                    else:
                                        pval = acc[e] * scale * f
                                    if cutlass.const_expr(tr):  # value (t, u) is P's (u, t)
                                        if u < t:
                                            pval = Float32(0.0)
                                        s_p[u, t] = pval.to(BFloat16)
                                    else:
                                        if u > t:
                                            pval = Float32(0.0)
                                        s_p[t, u] = pval.to(BFloat16)
                if cutlass.const_expr(prod == 0):
                    # after the last block: no accumulator or row gate is live any more, so
                    # the inverse's 120 broadcast reads of M_ww have the registers to
                    # themselves (run after each diagonal block, ptxas hoisted them next
                    # to the in-flight accumulator and spilled)
                    cute.arch.sync_warp()  # this warp's M_ww stores are visible to its lanes
                    self.block_inverse_at(s_md, s_dinv, wl, lane)
        cute.arch.fence_proxy("async.shared", space="cta")

    def gram_groups(self) -> int:
        """The warpgroups M and P are dealt to (gram_warpgroups, else all of the CTA's)."""
        return self.gram_warpgroups if self.gram_warpgroups is not None else self.warps // (WG_THREADS // 32)

    def row_terms(self, s_g, s_beta, crd, row_rep, nval):
        """Per accumulator value: its row's gate and beta, loaded once per distinct row."""
        g_row = []
        b_row = []
        for e in range(nval):
            if row_rep[e] == e:
                g_row.append(s_g[crd[e][0], 0])
                b_row.append(s_beta[crd[e][0]])
            else:
                g_row.append(g_row[row_rep[e]])
                b_row.append(b_row[row_rep[e]])
        return g_row, b_row

    @cute.jit
    def gram_issue(self, wg, gslice, a_frag, s_b, acc, bj: cutlass.Constexpr, K: cutlass.Constexpr,
                   n: cutlass.Constexpr):
        """One column block of the warpgroup's product: acc = A b[n bj : n bj + n]^T (b: the
        k rows, or q's in P^T), K / 16 chained SS wgmma (the first overwrites acc),
        committed as one group."""
        b_frag = wg.make_fragment_B(gslice.partition_B(cute.local_tile(s_b, (n, K), (bj, 0))))
        warpgroup.fence()
        wg.set(warpgroup.Field.ACCUMULATE, False)
        for kk in cutlass.range_constexpr(K // 16):
            cute.gemm(wg, acc, a_frag[None, None, kk], b_frag[None, None, kk], acc)
            wg.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.commit_group()

