"""FROST backward, kernel 3 for vector gates (KDA, GDN-2): every gradient of one chunk.

Same grid, warps, tiles and algebra as bwd_grads.py (scalar gates); what differs is that
the decays are per channel, so they cannot ride on the scores: the scores are plain
(dZp = scale dO U^T, dZm = -dR U^T, masked) and the decays enter the score adjoints the
way the forward's Gram takes them, through reference rows (r_i the first and e_i the last
row of 16-row block i) so that every factor that multiplies an operand is <= 1 except
inside a diagonal block:

    dq^_t   = e^(G_t - G_r) [ scale e^G_r (dO S^T)_t + sum_s dZp_ts KE_s X_ij ]     (t in block i,
    dkb_t   = e^(G_t - G_r) [ -e^G_r (dR S^T)_t   + sum_s dZm_ts KE_s X_ij ]      s in block j <= i)
    dk^_d,s = e^(G_e - G_s) [ e^(G_last - G_e) (U dS^T)_s
                              + sum_t dZp_ts QR_t X_ji + dZm_ts KBR_t X_ji ]       (s in block i, t in j >= i)

with KE = k^ e^(G_e(s) - G_s), QR = q^ e^(G_t - G_r(t)), KBR = kb e^(G_t - G_r(t)) (the
forward's operands, <= |x|) and X_ab = e^(G_r_a - G_e_b) per channel (<= 1 for a > b;
X_ii = e^span). A diagonal block whose span reaches SPAN_LIMIT nats takes its diagonal
terms exactly instead (pairwise exponentials, SIMT), after the post-scale.
dG is per channel: q^ dq^ + kb dkb - k^ dk^_d per element, reverse-cumsummed over the
chunk's rows in shared memory, plus the chunk terms sum_t KE_t (e^(G_last - G_e) dKD)_t
and e^G_last sum_v S dS at the last real row. GDN-2: beta is the erase gate b per channel
(dbeta = k^ dkb per element), dv = w dR and dw = v dR.

Shared memory is one region used twice: the state products' operands (dO, dR, U [C, V],
S, dS [K, V]) until they are done, then the adjoints' (q^, k^ [C, K], b, dG); the scores,
gates and small tables stay.

FrostBwdGradsVecWgmma (FrostBwdConfig.grads_wgmma, FROST_BWD_GRADS_VEC=wgmma) runs the
state products on warpgroup MMA from swizzled stage-A tiles (bwd_grads_wgmma's
WgmmaStateProducts, shared with GDN's kernel) while the warps compute the scores, dv and
the S dS sum; everything else is this kernel's code.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, TFloat32
from cutlass.cute.nvgpu import cpasync, warpgroup

from cudnn.linear_attention.frost.kernels import bulk_rows
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.bwd_grads import ROW_SUMS, THREADS, WARPS, FrostBwdGrads, _tv
from cudnn.linear_attention.frost.kernels.bwd_grads_wgmma import WgmmaStateProducts, b_swizzle
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.decay_ptx import LOG2_E, ex2, ffma, split_bf16x2, unpack_bf16x2
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds
from cudnn.linear_attention.frost.kernels.tf32_fragments import value_map, warp_mma_tf32
from cudnn.linear_attention.frost.kernels.wgmma_fragments import check_b_quads, check_c_pairs
from cudnn.linear_attention.frost.kernels.fwd_mma import (
    _DTYPES,
    CHUNK,
    NBLK,
    PAD16,
    SMEM_LIMIT,
    SPAN_LIMIT,
    SUB,
    SW128,
    SW128_ALIGN,
    SWIZZLED,
    VEC,
    sw128_layout,
    warp_mma,
)


def _rows(name, r, cols, dtype="bf16", pad=PAD16):
    return (name, dtype, (r, cols), (cols + pad, 1))


def smem_regions(c: FrostFwdConfig, wgmma: bool = False):
    """(stage-A tensors, stage-B tensors, persistent tensors); A and B share one region.
    wgmma (FrostBwdGradsVecWgmma): stage A's tiles unpadded and swizzled, as warpgroup MMA
    reads them (bwd_grads_wgmma.WgmmaStateProducts: dO, dR, U SW128 [C, V]; S, dS [V, K]
    with the channel-half swizzle), each a multiple of 1024 bytes from a 1024-byte aligned
    region."""
    K, V, C = c.K, c.V, CHUNK
    if wgmma:
        a = [(n, "bf16", (C, V), SW128) for n in ("do", "dr", "u")]
        a += [(n, "bf16", (V, K), b_swizzle(K)) for n in ("sf", "dsf")]
    else:
        a = [_rows("do", C, V), _rows("dr", C, V), _rows("u", C, V), _rows("sf", V, K), _rows("dsf", V, K)]
    # v (GDN-2: and w) rows, raw io, for stage_values: copied with the load phase's other
    # rows instead of read from global memory in the products phase, where each of its
    # row loops waited on a DRAM round trip with nothing else in flight (Nsight Compute:
    # ~10 % of GDN-2's grads samples). Last in stage A, past stage B's end: nothing
    # overwrites them before stage_values reads them.
    a.append(_rows("vr", C, V))
    if c.has_w:
        a.append(_rows("wr", C, V))
    b = [_rows("qh", C, K), _rows("kh", C, K), _rows("dgam", C, K, "f32", 4)]
    if c.beta_per_channel:
        b.append(_rows("bst", C, K))  # GDN-2 erase gate b (bf16)
    keep = [
        _rows("dzp", C, C), _rows("dzm", C, C), _rows("g", C, K, "f32", 4),
        ("beta", "f32", (C,), (1,)), ("rq", "f32", (C,), (1,)), ("rk", "f32", (C,), (1,)),
        ("sums", "f32", (2, ROW_SUMS, C), (ROW_SUMS * C, C, 1)),
        ("dbv", "f32", (C,), (1,)),
        ("part", "f32", (2, WARPS), (WARPS, 1)),
        ("dgl", "f32", (NBLK, K), (K, 1)),   # per row block: sum_t KE_t (e^(G_last - G_e) dKD)_t
        ("sds", "f32", (K,), (1,)),          # e^G_last sum_v S dS per channel
        ("seq", "i32", (2,), (1,)),
        bulk_rows.MBARRIER,                  # the bulk copies' mbarrier (vec_bulk_copies)
    ]
    return a, b, keep


def _span_bytes(entry) -> int:
    _, dtype, shape, stride = entry
    if stride in SWIZZLED:
        return shape[0] * shape[1] * 2
    span = 1 + sum((extent - 1) * st for extent, st in zip(shape, stride))
    return -(-span * (_DTYPES[dtype].width // 8) // 16) * 16


def region_bytes(c: FrostFwdConfig, wgmma: bool = False) -> int:
    """The bytes stage A and stage B share. wgmma: never less than the default plan's, so
    the dq/dk staging tail past stage B (staging_room) stays as large: the unpadded tiles
    alone would leave GDN-2 at K = V = 128 room for one bf16 tile instead of two (an
    extra pair of barriers in write_qk)."""
    a, b, _ = smem_regions(c, wgmma)
    region = max(sum(map(_span_bytes, a)), sum(map(_span_bytes, b)))
    return max(region, region_bytes(c)) if wgmma else region


def smem_bytes(c: FrostFwdConfig, wgmma: bool = False) -> int:
    """Dynamic shared memory of the plan (wgmma: plus the worst-case padding that aligns
    the shared region to 1024 bytes)."""
    _, _, keep = smem_regions(c, wgmma)
    pad = SW128_ALIGN - 16 if wgmma else 0
    return pad + region_bytes(c, wgmma) + sum(map(_span_bytes, keep))


def staging_room(c: FrostFwdConfig, wgmma: bool = False) -> tuple[str, int]:
    """Where write_qk may stage dq/dk (after the epilogue's barrier) and how many bytes:
    "tail", the shared region past stage B's tensors (stage A's, dead by then), or "dz",
    the score tiles dzp and dzm (consecutive in `keep`, dead after the score adjoints),
    whichever is larger."""
    _, b, keep = smem_regions(c, wgmma)
    region = region_bytes(c, wgmma)
    tail = region - sum(map(_span_bytes, b))
    assert [e[0] for e in keep[:2]] == ["dzp", "dzm"], keep
    dz = _span_bytes(keep[0]) + _span_bytes(keep[1])
    return ("tail", tail) if tail >= dz else ("dz", dz)


def allocate(c: FrostFwdConfig, wgmma: bool = False) -> SimpleNamespace:
    """The shared tensors by name; stage A's and stage B's overlay one another. Called while
    the kernel is traced. wgmma: smem_regions' swizzled stage A, the region 1024-byte
    aligned; those tiles carry their swizzle in the pointer (as fwd_mma.allocate_smem's)."""
    a, b, keep = smem_regions(c, wgmma)
    region = region_bytes(c, wgmma)
    smem = cutlass.memory.SmemAllocator()
    raw = smem.allocate_tensor(BFloat16, cute.make_layout((region // 2,)), SW128_ALIGN if wgmma else 16)
    s = SimpleNamespace()
    for group in (a, b):
        offset = 0
        for entry in group:
            name, dtype, shape, stride = entry
            ptr = raw.iterator + offset // 2
            if stride in SWIZZLED:
                sw = sw128_layout(shape, stride)
                setattr(s, name, cute.make_tensor(cute.recast_ptr(ptr, swizzle_=sw.inner), sw.outer))
                offset += _span_bytes(entry)
                continue
            if dtype != "bf16":
                ptr = cute.recast_ptr(ptr, dtype=_DTYPES[dtype])
            setattr(s, name, cute.make_tensor(ptr, cute.make_layout(shape, stride=stride)))
            offset += _span_bytes(entry)
    s.b_end = raw.iterator + sum(map(_span_bytes, b)) // 2  # staging_room's "tail"
    for name, dtype, shape, stride in keep:
        setattr(s, name, smem.allocate_tensor(_DTYPES[dtype], cute.make_layout(shape, stride=stride), 16))
    return s


def _check_in_order(layout) -> None:
    """Raises ValueError unless a register fragment's layout maps its i-th value to offset i
    (decay_split_fast writes bf16 pairs as 32-bit words of the same storage)."""
    for i in range(cute.size(layout)):
        if cute.crd2idx(i, layout) != i:
            raise ValueError(f"fragment layout {layout} is not compact in order")


class FrostBwdGradsVec(FrostBwdGrads):
    """Callable for cute.compile; bwd_grads.FrostBwdGrads's launcher with a per-chunk grid."""

    norms_in_stage_load = False  # stage_norms' first pass computes the L2 norms here
    beta_by_copy = True  # KDA's scalar beta: copy_beta_async
    wgmma_products = False  # stage A's plan (smem_regions' wgmma)

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.fwd.gate_per_channel:
            raise ValueError("FrostBwdGradsVec serves vector gates (KDA, GDN-2); GDN is bwd_grads.py's")
        if cfg.grads_wgmma != self.wgmma_products:
            raise ValueError(f"{type(self).__name__}: grads_wgmma must be {self.wgmma_products} "
                             "(bwd_compile picks the class)")
        FrostBwdGrads.__init__(self, cfg, vector_gates=True)
        used = smem_bytes(cfg.fwd, self.wgmma_products)
        if used > SMEM_LIMIT:
            raise ValueError(f"FrostBwdGradsVec: {used} bytes of shared memory exceed {SMEM_LIMIT} for {cfg}")

    def grid(self, T, N):
        """One CTA per (checkpoint row, output head): this kernel is not persistent."""
        return [T // CHUNK + N, self.cfg.HO, 1]

    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor, mb: cute.Tensor,
               mcu: cute.Tensor, mdo: cute.Tensor, mdq: cute.Tensor, mdk: cute.Tensor, mdv: cute.Tensor,
               mdg: cute.Tensor, mdb: cute.Tensor, mckpt: cute.Tensor, mdckpt: cute.Tensor, mu: cute.Tensor,
               mdr: cute.Tensor, N: Int32, scale: Float32, mw: cute.Tensor, mdw: cute.Tensor, T: Int32):
        c = self.cfg
        tid, _, _ = cute.arch.thread_idx()
        rho, h, _ = cute.arch.block_idx()
        s = allocate(c, self.wgmma_products)
        if cutlass.const_expr(self.bcfg.vec_bulk_copies):
            bulk_rows.init_mbarrier(s.mbar.iterator, tid)  # published by the barrier below
        self.find_chunk(s, mcu, N, T, rho, tid)
        cute.arch.sync_threads()
        n = s.seq[0]
        if n >= 0:
            bos, eos = sequence_bounds(mcu, n, T)  # inside [0, T] whatever cu_seqlens holds
            j = rho - (bos // CHUNK + n)
            t0 = bos + j * CHUNK
            heads = self.cfg.heads_of(h)
            lane = cute.arch.lane_idx()
            wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
            thr = self.mma_slice(lane)
            srow = self.state_row(mcu, n, j, rho, T, N, lane)
            self.issue_load_copies(s, mdo, mu, mdr, mv, mw, mg, mb, mckpt, mdckpt, heads, rho, srow, t0, eos, tid)
            cute.arch.cp_async_commit_group()
            self.stage_norms(s, mq, mk, mg, mb, heads, t0, eos, tid)
            self.land_copies(s, tid)
            cute.arch.sync_threads()
            self.prefetch_operand_rows(mq, mk, mb, heads, t0, eos, tid)
            self.scan_gates(s, tid)
            acc_q, acc_kb, acc_k, crd, bi, hc = self.scores_and_products_vec(
                s, mv, mdv, mw, mdw, heads, t0, eos, scale, thr, lane, wid, tid)
            self.stage_operands_vec(s, mq, mk, mb, heads, t0, eos, tid)
            cute.arch.sync_threads()
            self.score_adjoints(s, acc_q, acc_kb, acc_k, crd, thr, lane, bi, hc, scale)
            self.epilogue_vec(s, mdq, mdk, mdb, acc_q, acc_kb, acc_k, crd, heads, t0, eos, lane, bi, hc)
            cute.arch.sync_threads()
            self.gate_scan_out(s, mdg, mdb, heads, t0, eos, tid)

    @cute.jit
    def issue_load_copies(self, s, mdo, mu, mdr, mv, mw, mg, mb, mckpt, mdckpt, heads, rho, srow, t0, eos, tid):
        """Every cp.async of the load phase, not committed: issue_copies' rows and states,
        GDN-2's w rows, the per-channel gate rows and KDA's scalar beta."""
        c = self.cfg
        h = heads[3]
        if cutlass.const_expr(self.bcfg.vec_bulk_copies):
            self.issue_bulk_copies(s, mdo, mu, mdr, mv, mw, mg, mckpt, mdckpt, heads, rho, srow, t0, eos, tid)
        else:
            self.issue_copies(s, mdo, mu, mdr, mv, mckpt, mdckpt, heads, rho, srow, t0, eos, tid)
            if cutlass.const_expr(c.has_w):
                a_io, _ = self.copy_atoms()
                self.copy_rows_async(a_io, self.io_view(s.wr), mw, h, t0, eos, tid, self.io)
        if cutlass.const_expr(not (self.bcfg.vec_bulk_copies and c.gate_align16)):
            self.copy_gate_rows_async(mg, h, s.g, t0, eos, tid, THREADS)
        if cutlass.const_expr(not c.beta_per_channel):
            self.copy_beta_async(mb, h, s.beta, t0, eos, tid)

    def bulk_jobs(self, s, mdo, mu, mdr, mv, mw, mg, mckpt, mdckpt, heads, rho, srow):
        """The rows issue_bulk_copies copies, in job order: (shared [R, W] tile, global row
        source, R, zero dtype or None). A source is (tensor, head, None) for the chunk's
        token rows (rows past eos are zeroed instead: zero dtype given) or (tensor, head,
        state row) for the R rows of a [V, K] state. Runs at trace time."""
        c = self.cfg
        _, _, hv, h = heads
        C = CHUNK
        jobs = [(self.do_io_view(s), (mdo, h, None), C, self.io), (s.u, (mu, h, None), C, BFloat16),
                (s.dr, (mdr, h, None), C, BFloat16), (self.io_view(s.vr), (mv, hv, None), C, self.io)]
        if cutlass.const_expr(c.has_w):
            jobs.append((self.io_view(s.wr), (mw, h, None), C, self.io))
        if cutlass.const_expr(c.gate_align16):
            jobs.append((s.g, (mg, h, None), C, Float32))
        jobs += [(s.sf, (mckpt, h, srow), c.V, None), (s.dsf, (mdckpt, h, rho), c.V, None)]
        bulk_rows.check_jobs(jobs, self.cfg)
        return jobs

    @cute.jit
    def issue_bulk_copies(self, s, mdo, mu, mdr, mv, mw, mg, mckpt, mdckpt, heads, rho, srow, t0, eos, tid):
        """vec_bulk_copies: every row of bulk_jobs by one cp.async.bulk onto s.mbar
        (bulk_rows.issue: ~72 per warp where every thread issued ~40 16-byte cp.async)."""
        jobs = self.bulk_jobs(s, mdo, mu, mdr, mv, mw, mg, mckpt, mdckpt, heads, rho, srow)
        bulk_rows.issue(jobs, s.mbar.iterator, t0, eos, tid, THREADS)

    @cute.jit
    def copy_beta_async(self, mb, h, s_beta, t0, eos, tid):
        """KDA's scalar beta of the chunk's rows into s_beta by 4-byte cp.async (zero past
        eos), with the load phase's other copies: as a plain load in stage_norms its round
        trip was the load phase's second-largest wait (Nsight Compute)."""
        if tid < CHUNK:
            a4 = cute.make_copy_atom(cpasync.CopyG2SOp(), Float32, num_bits_per_copy=32)
            self.copy_or_zero(a4, mb, t0 + tid, h, 1, 0, cute.local_tile(s_beta, (1,), (tid,)), t0 + tid < eos,
                              Float32)

    @cute.jit
    def prefetch_operand_rows(self, mq, mk, mb, heads, t0, eos, tid):
        """prefetch.global.L2 of the rows stage_operands_vec reads with plain loads after
        the state products: q and k (unless the norms pass read them already) and GDN-2's b.
        No shared memory is left to copy them into with the load phase (GDN-2 at K = V = 128
        uses ~214 of 227 KB), and read cold they cost each of that stage's row loops a DRAM
        round trip (Nsight Compute: ~12 % of GDN-2's grads samples, long scoreboard); asked
        for here, they arrive in L2 while the scores and products run. A hint: nothing
        read changes."""
        c = self.cfg
        hq, hk, _, h = heads
        rows = []
        if cutlass.const_expr(not c.use_l2norm):
            rows += [(mq, hq, c.K), (mk, hk, c.K)]
        if cutlass.const_expr(c.beta_per_channel):
            rows.append((mb, h, c.K))
        if cutlass.const_expr(len(rows) > 0):
            self.prefetch_rows_l2(tuple(rows), t0, eos, tid)

    # ------------------------------------------------------------------ gates
    @cute.jit
    def scan_gates(self, s, tid):
        """Inclusive cumsum per channel (thread d < K), then a barrier."""
        self.scan_gates_in_place(s.g, tid)
        cute.arch.sync_threads()

    @cute.jit
    def land_copies(self, s, tid):
        """The wait for issue_copies (dO converted to bf16 in place for an fp16 io); with
        vec_bulk_copies also for the bulk copies' mbarrier (phase 0: one item per CTA)."""
        cute.arch.cp_async_wait_group(0)
        if cutlass.const_expr(self.bcfg.vec_bulk_copies):
            cute.arch.mbarrier_wait(s.mbar.iterator, 0)
        if cutlass.const_expr(self.io is not BFloat16):
            self.convert_rows(s, tid)

    # ------------------------------------------------------------------ state products
    @cute.jit
    def scores_and_products_vec(self, s, mv, mdv, mw, mdw, heads, t0, eos, scale, thr, lane, wid, tid):
        """The score tiles, a barrier, the decayed state products, dv (GDN-2: dw) and
        e^G_last sum S dS, a barrier: after it stage A's region is free."""
        self.stage_scores(s, scale, thr, lane, wid)
        cute.arch.sync_threads()
        bi = wid % NBLK
        hc = wid // NBLK
        acc_q, acc_kb, acc_k, crd = self.state_products(s, scale, thr, lane, bi, hc)
        self.stage_values(s, mv, mdv, heads, t0, eos, tid, mw, mdw)
        self.state_pairs(s, tid)
        cute.arch.sync_threads()
        return acc_q, acc_kb, acc_k, crd, bi, hc

    @cute.jit
    def state_products(self, s, scale, thr, lane, bi, hc):
        """dO S^T, -dR S^T, U dS^T for this warp's tile, pre-scaled (decay_products)."""
        acc_q, acc_kb, acc_k, crd = self.products_with_states(s, thr, lane, bi, hc)
        self.decay_products(s, scale, acc_q, acc_kb, acc_k, crd, bi, hc)
        return acc_q, acc_kb, acc_k, crd

    @cute.jit
    def decay_products(self, s, scale, acc_q, acc_kb, acc_k, crd, bi, hc):
        """The state products of this warp's tile times scale e^G_r, -e^G_r and
        e^(G_last - G_e) per channel (r, e: first and last row of block bi), in place."""
        s_g = s.g
        K, C = self.cfg.K, CHUNK
        DN = K // 2
        r = bi * SUB
        for e in cutlass.range_constexpr(cute.size(acc_q)):
            d = hc * DN + crd[e][1]
            ar = cute.arch.exp(s_g[r, d])
            acc_q[e] = acc_q[e] * (scale * ar)
            acc_kb[e] = acc_kb[e] * (-ar)
            acc_k[e] = acc_k[e] * cute.arch.exp(s_g[C - 1, d] - s_g[r + SUB - 1, d])

    @cute.jit
    def state_pairs(self, s, tid):
        """e^G_last[d] sum_v S[d, v] dS[d, v] per channel (two threads per channel; with
        vec_wide_loads and K = 16 per warp, state_pairs_ldsm)."""
        if cutlass.const_expr(self.bcfg.vec_wide_loads and self.cfg.K == 16 * WARPS):
            self.state_pairs_ldsm(s, tid)
        else:
            self.state_pairs_lds(s, tid)

    @cute.jit
    def state_pairs_ldsm(self, s, tid):
        """state_pairs by ldmatrix.x4.trans (V / 16 per operand instead of V per 2-byte
        loads): warp w takes channels [16 w, 16 w + 16) as the B operand of an MMA with the
        value rows as its contraction mode (operand_mn, as the products read S), so each
        fragment value (i, j) (i < 4 of n8 tile j) is S[v, d] at one channel d = crd[0] of
        tile j and one of four rows; a lane sums its rows per tile, then the quad (lanes
        4 g .. 4 g + 3, the same channel) by two shuffles. Sum order: per lane, then pairs."""
        s_g = s.g
        V, C = self.cfg.V, CHUNK
        mma = warp_mma()
        lane = cute.arch.lane_idx()
        w = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        thr = mma.get_slice(lane)
        sf_kv = self.state_kv(s.sf)
        dsf_kv = self.state_kv(s.dsf)
        crd = thr.partition_B(cute.make_identity_tensor((16, 16)))
        # the traced B layout over its [16 channels, 16 rows] tile, checked while tracing
        check_b_quads(_tv(mma.tv_layout_B_tiled), 16)
        part = [Float32(0.0), Float32(0.0)]
        for kk in cutlass.range_constexpr(V // 16):
            b_s = self.operand_mn(thr, lane, cute.local_tile(sf_kv, (16, 16), (w, kk)))
            b_ds = self.operand_mn(thr, lane, cute.local_tile(dsf_kv, (16, 16), (w, kk)))
            for e in cutlass.range_constexpr(cute.size(b_s)):
                j = e // 4   # fragment ((2, 2), 2, 1): check_b_quads's groups, in order
                part[j] = part[j] + b_s[e].to(Float32) * b_ds[e].to(Float32)
        for j in cutlass.range_constexpr(2):
            v = part[j]
            v = v + cute.arch.shuffle_sync_bfly(v, offset=1)
            v = v + cute.arch.shuffle_sync_bfly(v, offset=2)
            if lane % 4 == 0:
                d = w * 16 + crd[4 * j][0]
                s.sds[d] = v * cute.arch.exp(s_g[C - 1, d])

    @cute.jit
    def state_pairs_lds(self, s, tid):
        """state_pairs by 2-byte loads of channel columns (v1.6)."""
        s_sf = s.sf
        s_dsf = s.dsf
        s_g = s.g
        K, V, C = self.cfg.K, self.cfg.V, CHUNK
        per = THREADS // K          # threads per channel (2 for K = 128, 4 for K = 64)
        d = tid // per
        part = Float32(0.0)
        for u in cutlass.range_constexpr(V // per):
            jv = (tid % per) * (V // per) + u
            part = part + s_sf[jv, d].to(Float32) * s_dsf[jv, d].to(Float32)
        part = cute.arch.warp_reduction(part, lambda a, b: a + b, threads_in_group=per)
        if tid % per == 0:
            s.sds[d] = part * cute.arch.exp(s_g[C - 1, d])

    # ------------------------------------------------------------------ adjoint operands
    @cute.jit
    def stage_operands_vec(self, s, mq, mk, mb, heads, t0, eos, tid):
        """q^, k^ [C, K] (bf16, as the forward's products read them) and GDN-2's b rows, into
        the region the state products used."""
        c = self.cfg
        K, C = c.K, CHUNK
        hq, hk, _, h = heads
        vr = K // VEC
        r0, cv = tid // vr, tid % vr
        for u in cutlass.range_constexpr(C * vr // THREADS):
            r = r0 + u * (THREADS // vr)
            rq = s.rq[r]
            rk = s.rk[r]
            xq = cute.make_rmem_tensor((VEC,), self.io)
            xk = cute.make_rmem_tensor((VEC,), self.io)
            xb = cute.make_rmem_tensor((VEC,), self.io)
            xq.fill(0.0)
            xk.fill(0.0)
            xb.fill(0.0)
            if t0 + r < eos:
                cute.autovec_copy(cute.local_tile(mq[t0 + r, hq, None], (VEC,), (cv,)), xq)
                cute.autovec_copy(cute.local_tile(mk[t0 + r, hk, None], (VEC,), (cv,)), xk)
                if cutlass.const_expr(c.beta_per_channel):
                    cute.autovec_copy(cute.local_tile(mb[t0 + r, h, None], (VEC,), (cv,)), xb)
            yq = cute.make_rmem_tensor((VEC,), BFloat16)
            yk = cute.make_rmem_tensor((VEC,), BFloat16)
            yb = cute.make_rmem_tensor((VEC,), BFloat16)
            for e in cutlass.range_constexpr(VEC):
                yq[e] = (xq[e].to(Float32) * rq).to(BFloat16)
                yk[e] = (xk[e].to(Float32) * rk).to(BFloat16)
                yb[e] = xb[e].to(Float32).to(BFloat16)
            cute.autovec_copy(yq, cute.local_tile(s.qh[r, None], (VEC,), (cv,)))
            cute.autovec_copy(yk, cute.local_tile(s.kh[r, None], (VEC,), (cv,)))
            if cutlass.const_expr(c.beta_per_channel):
                cute.autovec_copy(yb, cute.local_tile(s.bst[r, None], (VEC,), (cv,)))

    @cute.jit
    def decayed_b(self, s, thr, lane, blk, hc, ref, kind: cutlass.Constexpr, out32=None):
        """B fragment pair (hi, lo) of the [K/2, 16] tile (channels of half hc, rows of block
        blk) of a decayed operand: the decay makes it inexact in bf16, and rounding it once
        costs dG about 1e-2 (a bf16 emulation of this kernel). kind "k": k^_s e^(G_ref - G_s);
        "q": q^_t e^(G_t - G_ref); "kb": kb_t e^(G_t - G_ref). With out32 (vec_tf32_adjoints:
        the tf32 fragment of the same tile, tf32_fragments.warp_mma_tf32) each value goes
        there rounded once to tf32 instead, and (out32, None) is returned."""
        s_g = s.g
        K, C = self.cfg.K, CHUNK
        DN = K // 2
        src = s.qh if cutlass.const_expr(kind == "q") else s.kh
        layout = cute.make_layout((K, C), stride=(1, K + PAD16))   # [channel, row] view of [row, channel]
        tile = cute.local_tile(cute.make_tensor(src.iterator, layout), (DN, SUB), (hc, blk))
        part = thr.partition_B(tile)
        crd = thr.partition_B(cute.make_identity_tensor((DN, SUB)))
        # vec_wide_loads: the undecayed operand by ldmatrix.x4.trans (channels contiguous, as
        # S in the products) straight into hi, converted in place, so no third fragment is
        # live. Not for kb unless vec_fast_decay: with q's and kb's loads both wide, ptxas
        # hoists kb's above q's MMAs and KDA reaches 255 registers and a 16-byte stack
        # frame; decay_split_fast's shorter loop leaves room (KDA 230 registers, no stack).
        wide = cutlass.const_expr(self.bcfg.vec_wide_loads and (kind != "kb" or self.bcfg.vec_fast_decay))
        if cutlass.const_expr(wide):
            hi = self.operand_mn(thr, lane, tile)
        else:
            hi = thr.make_fragment_B(part)
        lo = hi if cutlass.const_expr(out32 is not None) else thr.make_fragment_B(part)
        if cutlass.const_expr(self.bcfg.vec_fast_decay):
            b32 = None
            if cutlass.const_expr(wide and kind == "kb" and self.cfg.beta_per_channel):
                # GDN-2's b at the same fragment positions, by ldmatrix like k-hat
                btile = cute.local_tile(cute.make_tensor(s.bst.iterator, layout), (DN, SUB), (hc, blk))
                b32 = cute.recast_tensor(self.operand_mn(thr, lane, btile), Int32)
            self.decay_split_fast(s, hi, lo, part, crd, hc, blk, ref, kind, wide, b32, out32)
            if cutlass.const_expr(out32 is not None):
                return out32, None
            return hi, lo
        for e in cutlass.range_constexpr(cute.size(hi)):
            d = hc * DN + crd[e][0]
            row = blk * SUB + crd[e][1]
            if cutlass.const_expr(wide):
                x = hi[e].to(Float32)
            else:
                x = part[e].to(Float32)
            if cutlass.const_expr(kind == "k"):
                x = x * cute.arch.exp(s_g[ref, d] - s_g[row, d])
            else:
                x = x * cute.arch.exp(s_g[row, d] - s_g[ref, d])
            if cutlass.const_expr(kind == "kb"):
                x = x * self.beta_at(s, row, d)
            y = x.to(BFloat16)
            hi[e] = y
            lo[e] = (x - y.to(Float32)).to(BFloat16)
        return hi, lo

    @cute.jit
    def decay_split_fast(self, s, hi, lo, part, crd, hc, blk, ref, kind: cutlass.Constexpr, wide: cutlass.Constexpr,
                         b32, out32=None):
        """decayed_b's element loop with FrostBwdConfig.vec_fast_decay: the exponent as one
        FFMA, G_row (+-log2 e) + (-+log2 e) G_ref, with the reference gate scaled once per
        channel (a lane's fragment values come in groups of four of one channel:
        check_b_quads), then ex2; the hi + lo split of a register's two values by packed
        conversions (decay_ptx.split_bf16x2: the same bf16 values as the scalar path).
        Only the exponent's rounding differs from decayed_b's FADD then FMUL
        (frost_bwd_precision's exponent="fused" models it). kb's operand comes wide here
        too, and with b32 (GDN-2) b at the same fragment positions. With out32 the value goes
        to out32's position of the same element (tf32_fragments.value_map), rounded to tf32,
        and neither hi nor lo is written past the wide load."""
        s_g = s.g
        DN = self.cfg.K // 2
        check_b_quads(_tv(warp_mma().tv_layout_B_tiled), 16)
        hi32 = cute.recast_tensor(hi, Int32)
        lo32 = cute.recast_tensor(lo, Int32)
        at32 = None
        if cutlass.const_expr(out32 is not None):
            to16 = value_map(warp_mma(), warp_mma_tf32(), "B", (DN, SUB))
            at32 = [to16.index(e) for e in range(len(to16))]
        # word i of hi32 / lo32 must hold fragment values 2 i (low half) and 2 i + 1: both
        # layouts map their i-th value to offset i (checked while tracing)
        for frag in (hi, lo, hi32, lo32):
            _check_in_order(frag.layout)
        # k: e^(G_ref - G_s) = 2^(-L G_s + L G_ref); q, kb: e^(G_t - G_ref) = 2^(L G_t - L G_ref)
        slope = Float32(-LOG2_E) if cutlass.const_expr(kind == "k") else Float32(LOG2_E)
        base = Float32(0.0)
        pair = None
        bpair = None
        x = [Float32(0.0), Float32(0.0)]
        for e in cutlass.range_constexpr(cute.size(hi)):
            d = hc * DN + crd[e][0]
            row = blk * SUB + crd[e][1]
            if cutlass.const_expr(e % 4 == 0):
                base = s_g[ref, d] * (-slope)
            if cutlass.const_expr(wide):
                if cutlass.const_expr(e % 2 == 0):
                    pair = unpack_bf16x2(hi32[e // 2])
                xe = pair[e % 2]
            else:
                xe = part[e].to(Float32)
            xe = xe * ex2(ffma(s_g[row, d], slope, base))
            if cutlass.const_expr(kind == "kb"):
                if cutlass.const_expr(b32 is not None):
                    if cutlass.const_expr(e % 2 == 0):
                        bpair = unpack_bf16x2(b32[e // 2])
                    xe = xe * bpair[e % 2]
                else:
                    xe = xe * self.beta_at(s, row, d)
            if cutlass.const_expr(out32 is not None):
                out32[at32[e]] = xe.to(TFloat32)
            else:
                x[e % 2] = xe
                if cutlass.const_expr(e % 2 == 1):
                    hw, lw = split_bf16x2(x[0], x[1])
                    hi32[e // 2] = hw
                    lo32[e // 2] = lw

    # ------------------------------------------------------------------ score adjoints
    @cute.jit
    def score_adjoints(self, s, acc_q, acc_kb, acc_k, crd, thr, lane, bi, hc, scale):
        s_dzp = s.dzp
        s_dzm = s.dzm
        s_g = s.g
        K, C = self.cfg.K, CHUNK
        DN = K // 2
        mma = warp_mma()
        # vec_tf32_adjoints: the products on the tf32 MMA, whose lanes hold the same operand
        # and accumulator elements as mma's (tf32_fragments.py)
        tf32 = self.bcfg.vec_tf32_adjoints
        mma32 = warp_mma_tf32()
        thr32 = mma32.get_slice(lane)
        r = bi * SUB
        e_row = r + SUB - 1
        # dG_last's KD term for this block: sum_s k^_s e^(G_e - G_s) (e^(G_last - G_e) dKD)_s
        colsum = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), Float32)
        kpair = None
        for e in cutlass.range_constexpr(cute.size(acc_k)):
            td = crd[e]
            d = hc * DN + td[1]
            row = r + td[0]
            if cutlass.const_expr(self.bcfg.vec_wide_loads):
                if cutlass.const_expr(e % 2 == 0):
                    check_c_pairs(_tv(warp_mma().tv_layout_C_tiled), SUB)
                    kpair = self.pair_of(s.kh, row, d)
                kx = kpair[e % 2].to(Float32)
            else:
                kx = s.kh[row, d].to(Float32)
            colsum[e] = kx * cute.arch.exp(s_g[e_row, d] - s_g[row, d]) * acc_k[e]
        self.column_sums(s, colsum, crd, lane, bi, hc)
        span = self.block_span(s, bi, lane)
        exact = span >= SPAN_LIMIT
        dzp_t = cute.make_tensor(s_dzp.iterator, cute.make_layout((C, C), stride=(1, C + PAD16)))
        dzm_t = cute.make_tensor(s_dzm.iterator, cute.make_layout((C, C), stride=(1, C + PAD16)))
        # rows t of block bi: s blocks sb < bi, then the diagonal (factored unless exact)
        count = bi + 1
        if exact:
            count = bi
        for sb in cutlass.range(count, unroll=1):
            a_p = self.operand(thr, lane, cute.local_tile(s_dzp, (SUB, SUB), (bi, sb)), True)
            a_m = self.operand(thr, lane, cute.local_tile(s_dzm, (SUB, SUB), (bi, sb)), True)
            if cutlass.const_expr(tf32):
                k32 = cute.make_rmem_tensor(thr32.partition_shape_B((DN, SUB)), TFloat32)
                self.decayed_b(s, thr, lane, sb, hc, r, "k", k32)
                cute.gemm(mma32, acc_q, self.widen_a(thr32, a_p), k32, acc_q)
                cute.gemm(mma32, acc_kb, self.widen_a(thr32, a_m), k32, acc_kb)
            else:
                k_hi, k_lo = self.decayed_b(s, thr, lane, sb, hc, r, "k")
                cute.gemm(mma, acc_q, a_p[None, None, 0], k_hi[None, None, 0], acc_q)
                cute.gemm(mma, acc_q, a_p[None, None, 0], k_lo[None, None, 0], acc_q)
                cute.gemm(mma, acc_kb, a_m[None, None, 0], k_hi[None, None, 0], acc_kb)
                cute.gemm(mma, acc_kb, a_m[None, None, 0], k_lo[None, None, 0], acc_kb)
        # rows s of block bi: t blocks tb > bi, then the diagonal
        first = bi
        if exact:
            first = bi + 1
        for tb in cutlass.range(first, NBLK, unroll=1):
            a_p = self.operand_t(thr, lane, cute.local_tile(dzp_t, (SUB, SUB), (bi, tb)))
            a_m = self.operand_t(thr, lane, cute.local_tile(dzm_t, (SUB, SUB), (bi, tb)))
            if cutlass.const_expr(tf32):
                q32 = cute.make_rmem_tensor(thr32.partition_shape_B((DN, SUB)), TFloat32)
                self.decayed_b(s, thr, lane, tb, hc, e_row, "q", q32)
                cute.gemm(mma32, acc_k, self.widen_a(thr32, a_p), q32, acc_k)
                kb32 = cute.make_rmem_tensor(thr32.partition_shape_B((DN, SUB)), TFloat32)
                self.decayed_b(s, thr, lane, tb, hc, e_row, "kb", kb32)
                cute.gemm(mma32, acc_k, self.widen_a(thr32, a_m), kb32, acc_k)
            else:
                q_hi, q_lo = self.decayed_b(s, thr, lane, tb, hc, e_row, "q")
                cute.gemm(mma, acc_k, a_p[None, None, 0], q_hi[None, None, 0], acc_k)
                cute.gemm(mma, acc_k, a_p[None, None, 0], q_lo[None, None, 0], acc_k)
                kb_hi, kb_lo = self.decayed_b(s, thr, lane, tb, hc, e_row, "kb")
                cute.gemm(mma, acc_k, a_m[None, None, 0], kb_hi[None, None, 0], acc_k)
                cute.gemm(mma, acc_k, a_m[None, None, 0], kb_lo[None, None, 0], acc_k)
        for e in cutlass.range_constexpr(cute.size(acc_q)):
            td = crd[e]
            t = r + td[0]
            d = hc * DN + td[1]
            gt = s_g[t, d]
            down = cute.arch.exp(gt - s_g[r, d])
            acc_q[e] = acc_q[e] * down
            acc_kb[e] = acc_kb[e] * down
            acc_k[e] = acc_k[e] * cute.arch.exp(s_g[e_row, d] - gt)
        if exact:
            self.exact_diagonal(s, acc_q, acc_kb, acc_k, crd, bi, hc, scale)

    @cute.jit
    def widen_a(self, thr32, a16):
        """A bf16 A fragment of a 16 x 16 score tile (operand / operand_t) as the tf32 MMA's
        fragment of the same tile: each value widened in place (exact), renumbered."""
        a32 = cute.make_rmem_tensor(thr32.partition_shape_A((SUB, SUB)), TFloat32)
        to16 = value_map(warp_mma(), warp_mma_tf32(), "A", (SUB, SUB))
        for e in cutlass.range_constexpr(cute.size(a32)):
            a32[e] = a16[to16[e]].to(Float32).to(TFloat32)
        return a32

    @cute.jit
    def exact_diagonal(self, s, acc_q, acc_kb, acc_k, crd, bi, hc, scale):
        """The diagonal block's adjoint terms with pairwise exponentials (decay spans too wide
        to factor): for t, s in block bi, s <= t, every factor e^(G_t - G_s) <= 1."""
        if cutlass.const_expr(self.bcfg.vec_wide_loads):
            self.exact_diagonal_pairs(s, acc_q, acc_kb, acc_k, crd, bi, hc)
        else:
            self.exact_diagonal_each(s, acc_q, acc_kb, acc_k, crd, bi, hc)

    @cute.jit
    def exact_diagonal_each(self, s, acc_q, acc_kb, acc_k, crd, bi, hc):
        """exact_diagonal one accumulator value at a time (2-byte loads; v1.6)."""
        s_g = s.g
        s_dzp = s.dzp
        s_dzm = s.dzm
        DN = self.cfg.K // 2
        r = bi * SUB
        for e in cutlass.range_constexpr(cute.size(acc_q)):
            td = crd[e]
            t = r + td[0]
            d = hc * DN + td[1]
            gt = s_g[t, d]
            aq = Float32(0.0)
            akb = Float32(0.0)
            ak = Float32(0.0)
            for i in cutlass.range(SUB, unroll=1):  # a loop: unrolled, its 32 copies spilled
                x = r + i
                fx = cute.arch.exp(cute.arch.fmin(gt - s_g[x, d], Float32(0.0)))   # x <= t: e^(G_t - G_x)
                fy = cute.arch.exp(cute.arch.fmin(s_g[x, d] - gt, Float32(0.0)))   # x >= t: e^(G_x - G_t)
                kx = s.kh[x, d].to(Float32)
                aq = aq + s_dzp[t, x].to(Float32) * kx * fx
                akb = akb + s_dzm[t, x].to(Float32) * kx * fx
                ak = ak + (s_dzp[x, t].to(Float32) * s.qh[x, d].to(Float32)
                           + s_dzm[x, t].to(Float32) * self.kb_value(s, x, d)) * fy
            acc_q[e] = acc_q[e] + aq
            acc_kb[e] = acc_kb[e] + akb
            acc_k[e] = acc_k[e] + ak

    @cute.jit
    def exact_diagonal_pairs(self, s, acc_q, acc_kb, acc_k, crd, bi, hc):
        """exact_diagonal for accumulator values 2 i, 2 i + 1 (row t, channels d, d + 1:
        check_c_pairs) in one loop: the four score entries are read once for both, the
        channel operands as 4-byte pairs. Each value's sum runs over x in the same order
        with the same operations as exact_diagonal's, so the results are bitwise equal."""
        s_g = s.g
        s_dzp = s.dzp
        s_dzm = s.dzm
        c = self.cfg
        DN = c.K // 2
        r = bi * SUB
        check_c_pairs(_tv(warp_mma().tv_layout_C_tiled), SUB)
        for e0 in cutlass.range_constexpr(0, cute.size(acc_q), 2):
            td = crd[e0]
            t = r + td[0]
            d = hc * DN + td[1]
            gt = [s_g[t, d], s_g[t, d + 1]]
            aq = [Float32(0.0), Float32(0.0)]
            akb = [Float32(0.0), Float32(0.0)]
            ak = [Float32(0.0), Float32(0.0)]
            for i in cutlass.range(SUB, unroll=1):
                x = r + i
                pp = s_dzp[t, x].to(Float32)
                pm = s_dzm[t, x].to(Float32)
                tp = s_dzp[x, t].to(Float32)
                tm = s_dzm[x, t].to(Float32)
                kx2 = self.pair_of(s.kh, x, d)
                qx2 = self.pair_of(s.qh, x, d)
                bx2 = self.pair_of(s.bst, x, d) if cutlass.const_expr(c.beta_per_channel) else kx2
                for j in cutlass.range_constexpr(2):
                    gx = s_g[x, d + j]
                    fx = cute.arch.exp(cute.arch.fmin(gt[j] - gx, Float32(0.0)))   # x <= t: e^(G_t - G_x)
                    fy = cute.arch.exp(cute.arch.fmin(gx - gt[j], Float32(0.0)))   # x >= t: e^(G_x - G_t)
                    kx = kx2[j].to(Float32)
                    if cutlass.const_expr(c.beta_per_channel):
                        kbx = kx * bx2[j].to(Float32)
                    else:
                        kbx = kx * s.beta[x]
                    aq[j] = aq[j] + pp * kx * fx
                    akb[j] = akb[j] + pm * kx * fx
                    ak[j] = ak[j] + (tp * qx2[j].to(Float32) + tm * kbx) * fy
            for j in cutlass.range_constexpr(2):
                acc_q[e0 + j] = acc_q[e0 + j] + aq[j]
                acc_kb[e0 + j] = acc_kb[e0 + j] + akb[j]
                acc_k[e0 + j] = acc_k[e0 + j] + ak[j]

    @cute.jit
    def kb_value(self, s, t, d):
        """kb = b k^ (GDN-2) or beta k^ at row t, channel d."""
        kh = s.kh[t, d].to(Float32)
        if cutlass.const_expr(self.cfg.beta_per_channel):
            return kh * s.bst[t, d].to(Float32)
        return kh * s.beta[t]

    @cute.jit
    def column_sums(self, s, colsum, crd, lane, bi, hc):
        """sum over the block's 16 rows of colsum per channel -> s.dgl[bi, d] (fixed order:
        the lane's two rows, then lanes g = 0..7 by shuffles)."""
        DN = self.cfg.K // 2
        # an m16n8 accumulator: values e and e + 2 hold rows g and g + 8 of one column
        for e in cutlass.range_constexpr(cute.size(colsum)):
            if cutlass.const_expr((e // 2) % 2 == 0):
                v = colsum[e] + colsum[e + 2]
                for off in cutlass.range_constexpr(3):
                    v = v + cute.arch.shuffle_sync_bfly(v, offset=4 << off)
                if lane < 4:
                    s.dgl[bi, hc * DN + crd[e][1]] = v

    # ------------------------------------------------------------------ outputs
    @cute.jit
    def epilogue_vec(self, s, mdq, mdk, mdb, acc_q, acc_kb, acc_k, crd, heads, t0, eos, lane, bi, hc):
        """dG per element into shared memory, the row sums, GDN-2's dbeta, then (after the
        row sums are complete) dq and dk."""
        self.row_sums(s, acc_q, acc_kb, acc_k, crd, mdb, heads[3], t0, eos, lane, bi, hc)
        cute.arch.sync_threads()
        self.write_qk(s, mdq, mdk, acc_q, acc_kb, acc_k, crd, heads, t0, eos, bi, hc)

    def staging(self, s):
        """(pointer, bytes) for write_qk's dq/dk staging (staging_room): stage B's tensors
        are read by the epilogue, so the room is what they leave of the stage-A region, or
        the score tiles."""
        where, room = staging_room(self.cfg, self.wgmma_products)
        return (s.b_end if where == "tail" else s.dzp.iterator), room

    @cute.jit
    def visit_element(self, s, mdb, h, t0, eos, t, d, qv, kv, kbv, dq, dkb, dk):
        """dG of the element into shared memory (reverse-cumsummed later); GDN-2's dbeta."""
        s.dgam[t, d] = qv * dq + kbv * dkb - kv * dk
        if cutlass.const_expr(self.cfg.beta_per_channel):
            if t0 + t < eos:
                mdb[t0 + t, h, d] = (kv * dkb).to(mdb.element_type)

    def row_pair(self, s, t, d):
        """vec_wide_loads: q-hat, k-hat (and GDN-2's b) at row t, channels d, d + 1 by one
        4-byte load each (check_c_pairs: the accumulator's values 2 i, 2 i + 1 are such a
        column pair, d even); else None (2-byte loads per element, v1.6)."""
        if not self.bcfg.vec_wide_loads:
            return None
        check_c_pairs(_tv(warp_mma().tv_layout_C_tiled), SUB)
        rows = [s.qh, s.kh] + ([s.bst] if self.cfg.beta_per_channel else [])
        return [self.pair_of(r, t, d) for r in rows]

    @cute.jit
    def pair_of(self, rows, t, d):
        x = cute.make_rmem_tensor((2,), BFloat16)
        cute.autovec_copy(cute.local_tile(rows[t, None], (2,), (d // 2,)), x)
        return x

    def row_values(self, s, pair, i, t, d):
        if pair is None:
            return FrostBwdGrads.row_values(self, s, pair, i, t, d)
        kv = pair[1][i].to(Float32)
        if self.cfg.beta_per_channel:
            kbv = kv * pair[2][i].to(Float32)
        else:
            kbv = kv * s.beta[t]
        return pair[0][i].to(Float32), kv, kbv

    @cute.jit
    def q_value(self, s, t, d):
        return s.qh[t, d].to(Float32)

    @cute.jit
    def k_value(self, s, t, d):
        return s.kh[t, d].to(Float32)

    @cute.jit
    def beta_at(self, s, t, d):
        if cutlass.const_expr(self.cfg.beta_per_channel):
            return s.bst[t, d].to(Float32)
        return s.beta[t]

    @cute.jit
    def gate_scan_out(self, s, mdg, mdb, heads, t0, eos, tid):
        """dg = reverse cumsum of dG per channel (thread d < K), the chunk terms at the last
        real row; KDA's scalar dbeta."""
        s_dgam = s.dgam
        c = self.cfg
        K, C = c.K, CHUNK
        h = heads[3]
        last = cutlass.min(eos - 1 - t0, C - 1)  # the chunk's last real row
        if tid < K:
            d = tid
            tail = s.sds[d]
            for b in cutlass.range_constexpr(NBLK):
                tail = tail + s.dgl[b, d]
            acc = Float32(0.0)
            for i in cutlass.range_constexpr(C):
                r = C - 1 - i
                v = s_dgam[r, d]
                if r == last:
                    v = v + tail
                if r > last:
                    v = Float32(0.0)
                acc = acc + v
                if r <= last:
                    mdg[t0 + r, h, d] = acc
        if cutlass.const_expr(not c.beta_per_channel):
            if tid >= K and tid < K + C:
                r = tid - K
                if t0 + r < eos:
                    mdb[t0 + r, h, 0] = (s.sums[0, 3, r] + s.sums[1, 3, r]) + s.dbv[r]


class FrostBwdGradsVecWgmma(WgmmaStateProducts, FrostBwdGradsVec):
    """FrostBwdGradsVec with its three state products on warpgroup MMA
    (FrostBwdConfig.grads_wgmma with vector gates; NOTES_bwd.md "Vector-gate grads: state
    products on warpgroup MMA"): stage A's tiles are swizzled (smem_regions' wgmma plan),
    the cp.async fills and fp16 dO's in-place conversion are fenced against the async
    proxy before the barrier that ends the load phase, and scores_and_products_vec issues
    the products (WgmmaStateProducts.issue_state_products, GDN's code) first, then runs
    the score tiles, dv and the S dS sum while they are in flight, retires them, applies
    the per-channel decays and ends with one barrier (the default has two: the products do
    not read the scores). The k16 steps of each product run in mma.sync's order, so the
    products, and every gradient, should be bitwise the default kernel's (GDN's wgmma
    grads were, on the H200)."""

    wgmma_products = True

    @cute.jit
    def land_copies(self, s, tid):
        """FrostBwdGradsVec.land_copies, then the generic-to-async proxy fence (the copies'
        and the conversion's shared writes must be visible to wgmma after the barrier)."""
        FrostBwdGradsVec.land_copies(self, s, tid)
        cute.arch.fence_proxy("async.shared", space="cta")

    @cute.jit
    def scores_and_products_vec(self, s, mv, mdv, mw, mdw, heads, t0, eos, scale, thr, lane, wid, tid):
        """The products issued as one wgmma group per warpgroup; while they run the score
        tiles, dv (GDN-2: dw) and e^G_last sum S dS (readers of the same tiles, reads only);
        then the wait, the per-channel decays and one barrier (stage A is dead after it)."""
        DN = self.cfg.K // 2
        bi = wid % NBLK
        hc = wid // NBLK
        acc_q, acc_kb, acc_k = self.issue_state_products(s, thr, lane, wid)
        self.stage_scores(s, scale, thr, lane, wid)
        self.stage_values(s, mv, mdv, heads, t0, eos, tid, mw, mdw)
        self.state_pairs(s, tid)
        warpgroup.wait_group(0)
        crd = thr.partition_C(cute.make_identity_tensor((SUB, DN)))
        self.decay_products(s, scale, acc_q, acc_kb, acc_k, crd, bi, hc)
        cute.arch.sync_threads()
        return acc_q, acc_kb, acc_k, crd, bi, hc
