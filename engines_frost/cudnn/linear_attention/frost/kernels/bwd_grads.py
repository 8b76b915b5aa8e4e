"""FROST backward, kernel 3 (``grads``): every gradient of one chunk, chunks independent.

Work items (chunk, head): item = rho * HO + h for checkpoint row rho < R = T // 64 + N and
output head h; row rho is chunk j of the sequence n with cu[n] // 64 + n <= rho < that +
chunks(n) (found by the CTA's threads in one pass over cu_seqlens, bounds clamped into
[0, T] by seq_bounds.py; rows between sequences are skipped). Persistent (v1.5): FrostBwdConfig.grads_ctas
CTAs of 8 warps, CTA b runs items b, b + P, b + 2P, ... in that order, and while an item's
tail runs the next item's S, dS, dO and U copies are already in flight (chunk_item). Every
output element has one writer whichever CTA runs its item, and an item's arithmetic does
not depend on the schedule. Inputs: the chunk's rows of q, k, v, g,
beta, dO, U (kernel 1) and dR (kernel 2), the state S entering the chunk (kernel 1's
checkpoint, or with bcfg.checkpoints the forward's, at its packed row: checkpoints.py)
and the gradient dS of the state leaving it (kernel 2's), both V-major in global memory
and copied unchanged into shared memory; the products read them transposed with
ldmatrix.trans. Every shared-memory fill is 16 bytes wide: dO, U, dR, v, S, dS by
cp.async (issue_state, issue_front, issue_back), q-hat, k-hat, kb row-major from registers.

Stages of an item (barriers between them), scalar gates (GDN):
1. rows     cp.async of dR, v [C, V] (and of dO, U [C, V], S, dS [V, K] unless the previous
            item issued them); meanwhile the L2 norms
            (a first pass, kept per row), Gam, then q-hat, k-hat, kb [C, K], e^Gam and
            e^(Gam_last - Gam) per row, and the wait for the copies.
2. scores   per lower 16x16 tile (t, s): dZp = scale (dO U^T) e^(Gam_t - Gam_s) (s <= t),
            dZm = -(dR U^T) e^(Gam_t - Gam_s) (s < t), bf16.
3. grads    warp w: rows t of block w % 4, channels d of half w / 4, three accumulators
              dq^     = scale e^Gam_t (dO S^T) + dZp k^
              dkb     = -e^Gam_t (dR S^T) + dZm k^
              dk^_dir = e^(Gam_last - Gam_s) (U dS^T) + dZp^T q^ + dZm^T kb
            and their row sums q^.dq^, kb.dkb, k^.dk^_dir, k^.dkb (quad shuffles, then the
            two channel halves in a fixed order: deterministic). e^Gam_last sum S dS
            (state_sum) is taken before the state products, the last readers of S and dS:
            after them the next item's S and dS copies are issued.
4. outputs  dq = r_q (dq^ - q^ (q^.dq^)) (L2 norm; else dq^), dk likewise from
            dk^ = dk^_dir + beta dkb; dv = beta dR and sum_v v dR; dGam_t = q^.dq^ + kb.dkb
            - k^.dk^_dir, plus at the chunk's last row sum_t k^ e^(Gam_last - Gam) dKD +
            e^Gam_last sum S dS; dg = reverse cumsum of dGam, dbeta = k^.dkb + sum_v v dR.
            dq and dk are staged in the dead do/u/dzp/dzm tensors (stmatrix, 16-bit
            outputs: store_fragment) and leave in 16-byte row slices (write_qk); then the
            next item's dO and U copies are issued.
Grouped q/k/v heads: dq/dk/dv go to fp32 per output head (summed by the launcher).
The algebra is engines_frost/tests/frost_bwd_model.py (stage_grads).
"""
from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import cpasync, warp

from cudnn.linear_attention.frost.kernels.bwd_abi import FrostBwdLauncher
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.checkpoints_dsl import checkpoint_row
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.seq_bounds import bounds_of, sequence_bounds
from cudnn.linear_attention.frost.kernels.stmatrix_map import check_stmatrix_copy
from cudnn.linear_attention.frost.kernels.wgmma_fragments import fragment_coords, tv_size
from cudnn.linear_attention.frost.kernels.fwd_wgmma import _tv
from cudnn.linear_attention.frost.kernels.fwd_mma import (
    CHUNK,
    GRAM_TILES,
    NBLK,
    PAD16,
    SUB,
    SWIZZLED,
    VEC,
    allocate_smem,
    load_vec,
    warp_mma,
)
from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined, gram_schedule

WARPS = 8
THREADS = 32 * WARPS
ROW_SUMS = 4  # q^.dq^, kb.dkb, k^.dk^_dir, k^.dkb
# CTAs of the persistent grid: FrostBwdConfig.grads_ctas, the device's SM count (one CTA per
# SM: 214 KB of shared memory at K = V = 128), compiled in; the kernel reads it back with
# grid_dim, so its item loop works for any grid.


def smem_plan(c: FrostFwdConfig):
    K, V, C = c.K, c.V, CHUNK

    def rows(name, r, cols):
        return (name, "bf16", (r, cols), (cols + PAD16, 1))

    return [
        rows("qr", C, K), rows("kr", C, K), rows("kbr", C, K),  # row-major; read as [K, C] views
        # do, u, dzp, dzm one after another: dead after the products, they stage dq and dk
        # for 16-byte global stores (staging_bytes)
        rows("do", C, V), rows("u", C, V), rows("dzp", C, C), rows("dzm", C, C),
        rows("dr", C, V), rows("vr", C, V),  # vr: v rows (raw io) for stage_values
        rows("sf", V, K), rows("dsf", V, K),  # V-major as in global memory (ldmatrix.trans reads them)
        ("g", "f32", (C,), (1,)), ("ea", "f32", (C,), (1,)), ("ekd", "f32", (C,), (1,)),
        ("beta", "f32", (C,), (1,)), ("rq", "f32", (C,), (1,)), ("rk", "f32", (C,), (1,)),
        # the next item's log gates and beta, copied with its S and dS (issue_next_gates)
        ("gnext", "f32", (C,), (1,)), ("bnext", "f32", (C,), (1,)),
        ("sums", "f32", (2, ROW_SUMS, C), (ROW_SUMS * C, C, 1)),   # per channel half
        ("dbv", "f32", (C,), (1,)),                                  # sum_v v dR per row
        ("part", "f32", (2, THREADS // 32), (THREADS // 32, 1)),     # per-warp partials
        ("seq", "i32", (2,), (1,)),                                  # n of this CTA (slot 1 spare)
    ]


STAGED = ("do", "u", "dzp", "dzm")  # the plan's consecutive tensors free once the products end


def staging_bytes(c: FrostFwdConfig, plan=None, staged: tuple[str, ...] = STAGED) -> int:
    """Bytes of shared memory from s.do on that the dq/dk staging may use: the plan's
    (smem_plan(c) unless given) consecutive `staged` tensors, each a multiple of 16 bytes;
    a swizzled one (bwd_grads_wgmma's) unpadded, 1024-byte aligned, so it may only start
    the region or follow another that ends on such a boundary."""
    plan = smem_plan(c) if plan is None else plan
    names = [e[0] for e in plan]
    first = names.index(staged[0])
    assert tuple(names[first:first + len(staged)]) == staged, names
    total = 0
    for _, dtype, shape, stride in plan[first:first + len(staged)]:
        if stride in SWIZZLED:
            assert total % 1024 == 0, plan  # no alignment gap inside the region
            total += shape[0] * shape[1] * 2
            continue
        span = 1 + sum((extent - 1) * st for extent, st in zip(shape, stride))
        total += -(-span * (2 if dtype == "bf16" else 4) // 16) * 16
    return total


def staging_tiles(K: int, out_bits: int, capacity: int) -> int:
    """How many [C, K] dq/dk tiles of out_bits elements (rows padded by 16 bytes) fit in
    capacity bytes: 2 (both at once), 1 (dq, then dk) or 0 (no staging: direct stores)."""
    tile = CHUNK * (K * out_bits // 8 + 16)
    return min(2, capacity // tile)


@cute.jit
def store_fragment(frag: cute.Tensor, tile: cute.Tensor):
    """Run by a whole warp: 16-bit values `frag`, laid out as warp_mma's accumulator over
    a [16, N] tile, into shared memory `tile` ([16, N] view, unit column stride, 16-byte
    aligned rows) by stmatrix.x4, one instruction per 16 x 16 block: lane l gives the
    address of row l % 16, columns 8 (l // 16) .. + 7 of the block, and per 8 x 8 matrix
    one register (a column pair). Before v1.6 each element was one 2-byte store (32 per
    [16, 64] tile). The register and address maps CuTe builds for this copy are checked
    while tracing (stmatrix_map.check_stmatrix_copy) against the PTX tables."""
    lane = cute.arch.lane_idx()
    atom = cute.make_copy_atom(warp.StMatrix8x8x16bOp(False, 4), tile.element_type)
    mma = warp_mma()
    copy = cute.make_tiled_copy_C(atom, mma)
    check_stmatrix_copy(_tv(copy.layout_src_tv_tiled), _tv(copy.layout_dst_tv_tiled), _tv(mma.tv_layout_C_tiled))
    thr_copy = copy.get_slice(lane)
    cute.copy(copy, thr_copy.retile(frag), thr_copy.partition_D(tile))


def row_halves(n: int) -> list[int]:
    """Trace time: per element e of a warp's [16, n] accumulator (warp_mma's C fragment),
    1 where it holds a row of 8..15 of its block and 0 for rows 0..7, the same for every
    lane (lane l holds rows l // 4 and l // 4 + 8). Checked on the traced layouts, so a DSL
    that lays the fragment out otherwise fails the compile instead of the row sums."""
    mma = warp_mma()
    tv = _tv(mma.tv_layout_C_tiled)
    values = tv_size(tv)[1]
    for lane in range(32):
        for v in range(values):
            if fragment_coords(*tv, SUB, lane, v)[0] != fragment_coords(*tv, SUB, 0, v)[0] + lane // 4:
                raise ValueError(f"row_halves: accumulator layout {tv}: lane {lane} value {v} is not in "
                                 f"row lane // 4 (+ 8) of its block")
    crd = mma.get_slice(0).partition_C(cute.make_identity_tensor((SUB, n)))
    rows = [crd[e][0] for e in range(cute.size(crd))]
    if any(r not in (0, 8) for r in rows):
        raise ValueError(f"row_halves: lane 0's rows {rows} are not 0 and 8")
    return [r // 8 for r in rows]


class FrostBwdGrads(FrostBwdLauncher, FrostFwdPipelined):
    """Callable for cute.compile (bwd_abi's argument list). Derives from FrostFwdPipelined for its
    operand loads, q/k normalisation and gate scan; its own grid and warps."""

    smem_plan = staticmethod(smem_plan)
    # the plan's tensors, from s.do on, that the dq/dk staging overlays (staging)
    staged = STAGED
    # the L2 norms of q and k rows come out of stage_load's own row loads (no first pass
    # over q and k in stage_norms); the vector-gate kernel has no such stage_load
    norms_in_stage_load = True
    # a scalar beta lands in s.beta by cp.async with the other copies (the vector-gate
    # kernel's load phase) instead of a plain load in stage_norms
    beta_by_copy = False

    def __init__(self, cfg: FrostBwdConfig, vector_gates: bool = False):
        if cfg.fwd.gate_per_channel != vector_gates:
            raise ValueError("FrostBwdGrads serves scalar gates (GDN); vector gates are bwd_grads_vec.py's")
        super().__init__(cfg.fwd)
        self.bcfg = cfg
        self.warps = WARPS
        self.threads = THREADS
        self.owners = gram_schedule(WARPS)

    def grid(self, T, N):
        """Persistent: grads_ctas CTAs walk the (chunk, head) items. A subclass whose kernel
        reads block_idx as (row, head) must return the per-chunk grid instead."""
        return [self.bcfg.grads_ctas, 1, 1]

    @cute.jit
    def launch_kernel(self, m, T: Int32, N: Int32, scale: Float32, stream: cuda.CUstream):
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.cu_seqlens, m.dO, m.dq, m.dk, m.dv, m.dg, m.dbeta, m.ckpt,
                    m.dckpt, m.u, m.dr, N, scale, m.w, m.dw, T).launch(
            grid=self.grid(T, N), block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor, mb: cute.Tensor,
               mcu: cute.Tensor, mdo: cute.Tensor, mdq: cute.Tensor, mdk: cute.Tensor, mdv: cute.Tensor,
               mdg: cute.Tensor, mdb: cute.Tensor, mckpt: cute.Tensor, mdckpt: cute.Tensor, mu: cute.Tensor,
               mdr: cute.Tensor, N: Int32, scale: Float32, mw: cute.Tensor, mdw: cute.Tensor, T: Int32):
        """Persistent: CTA b of P runs items b, b + P, b + 2P, ... (run_item)."""
        c = self.cfg
        tid, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        ctas, _, _ = cute.arch.grid_dim()
        s = allocate_smem(self.smem_plan(c))
        items = (T // CHUNK + N) * c.HO
        if tid < 2:
            s.seq[tid] = Int32(-1)
        cute.arch.sync_threads()
        if bid < items:
            self.find_sequence(s, mcu, N, T, bid // c.HO, tid, 0)
        for k in cutlass.range(cutlass.max((items - bid + ctas - 1) // ctas, Int32(0)), unroll=1):
            self.run_item(s, mq, mk, mv, mg, mb, mcu, mdo, mdq, mdk, mdv, mdg, mdb, mckpt, mdckpt, mu, mdr,
                          N, scale, mw, mdw, T, k, bid, items, ctas, tid)

    @cute.jit
    def run_item(self, s, mq, mk, mv, mg, mb, mcu, mdo, mdq, mdk, mdv, mdg, mdb, mckpt, mdckpt, mu, mdr,
                 N, scale, mw, mdw, T, k, bid, items, ctas, tid):
        """This CTA's k-th item, bid + k ctas: which sequence it belongs to was searched for
        during the previous item (or before the loop) into s.seq[k % 2]; this one searches
        for the next item's (after, bid + (k + 1) ctas) into the other slot."""
        HO = self.cfg.HO
        item = bid + k * ctas
        after = bid + (k + 1) * ctas
        cur = k % 2  # this item's slot of s.seq; the next item's is 1 - cur
        nxt = 1 - cur
        cute.arch.sync_threads()  # the search for this item landed; the previous item's reads are done
        n = s.seq[cur]
        prev_n = s.seq[nxt]  # the previous item's sequence (-1: none, or it ran nothing)
        fetched = Int32(0)  # the previous item issued this one's S, dS, dO and U copies
        if k != 0:
            if prev_n >= 0:
                fetched = Int32(1)
        cute.arch.sync_threads()  # every thread has read s.seq[nxt]
        if tid == 0:
            s.seq[nxt] = Int32(-1)
        cute.arch.sync_threads()  # the reset lands before the search
        if after < items:
            self.find_sequence(s, mcu, N, T, after // HO, tid, nxt)
        if n >= 0:
            self.chunk_item(s, mq, mk, mv, mg, mb, mcu, mdo, mdq, mdk, mdv, mdg, mdb, mckpt, mdckpt, mu, mdr,
                            N, scale, mw, mdw, T, item, n, fetched, nxt, items, (bid, ctas, k, after), tid)

    @cute.jit
    def chunk_item(self, s, mq, mk, mv, mg, mb, mcu, mdo, mdq, mdk, mdv, mdg, mdb, mckpt, mdckpt, mu, mdr,
                   N, scale, mw, mdw, T, item, n, fetched, nxt, items, walk, tid):
        """One (chunk, head) item of sequence n. Its cp.async copies (S, dS, dO, U, dR, v) were
        issued by the previous item when `fetched`, else here. While the products' tail and
        the epilogue run, the next item's (walk = (bid, ctas, k, after): after = bid + (k + 1)
        ctas, sequence s.seq[nxt]) copies go into what is dead by then: S and dS after the
        state products, dO and U after dq/dk left their staging (which overlays dO and U), dR
        and v after stage_values."""
        bid, ctas, k, after = walk
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        thr = self.mma_slice(lane)
        rho, h, j, t0, eos = self.item_coords(mcu, n, item, T)
        heads = self.cfg.heads_of(h)
        if fetched == 0:
            self.issue_state(s, mckpt, mdckpt, (rho, h, self.state_row(mcu, n, j, rho, T, N, lane)), tid)
            self.issue_front(s, mdo, mu, h, t0, eos, tid)
            self.issue_back(s, mdr, mv, heads, t0, eos, tid)
            cute.arch.cp_async_commit_group()
        self.stage_norms(s, mq, mk, mg, mb, heads, t0, eos, tid, fetched)
        cute.arch.sync_threads()
        # the next item's sequence (s.seq[nxt], visible since the barrier above) and its two
        # cu_seqlens entries: loaded here, first used when its copies are issued after the
        # products, so the loads' latency passes under stage_load and the products
        nn = s.seq[nxt]
        ahead = Int32(0)
        if after < items:
            if nn >= 0:
                ahead = Int32(1)
        cu_n, cu_next = Int32(0), Int32(0)
        if ahead != 0:
            cu_n, cu_next = mcu[nn], mcu[nn + 1]
        self.stage_load(s, mq, mk, heads, t0, eos, tid)
        cute.arch.sync_threads()
        acc_q, acc_kb, acc_k, crd, bi, hc = self.scores_and_products(s, scale, thr, lane, wid, tid)
        # (scores_and_products ends with a barrier: S and dS are dead)
        # where the next item's rows and states are, once for its three copy groups: rho, h,
        # t0, eos and its S row
        nxt_at = (Int32(0), Int32(0), Int32(0), Int32(0), Int32(0))
        if ahead != 0:
            n_rho, n_h, n_j, n_t0, n_eos = self.coords_in(bounds_of(cu_n, cu_next, T), nn, after)
            nxt_at = (n_rho, n_h, n_t0, n_eos, self.state_row(mcu, nn, n_j, n_rho, T, N, lane))

        def next_state_copies():  # issued by stage_adjoints where they overlap it best
            self.issue_next_state(s, mq, mk, mg, mb, mckpt, mdckpt, mdo, mu, mdr, mv, nxt_at, ahead, tid)
        frags = self.stage_adjoints(s, acc_q, acc_kb, acc_k, crd, heads, t0, eos, scale, thr, lane, wid, bi, hc,
                                    next_state_copies)
        self.write_qk(s, mdq, mdk, acc_q, acc_kb, acc_k, crd, heads, t0, eos, bi, hc, frags)
        cute.arch.sync_threads()  # dO, U (the dq/dk staging) are dead
        if ahead != 0:
            self.issue_next(s, mckpt, mdckpt, mdo, mu, mdr, mv, nxt_at, tid, "front")
        self.stage_values(s, mv, mdv, heads, t0, eos, tid, mw, mdw)
        cute.arch.sync_threads()  # dR and v are dead
        if ahead != 0:
            self.issue_next(s, mckpt, mdckpt, mdo, mu, mdr, mv, nxt_at, tid, "back")
        self.stage_gates(s, mdg, mdb, heads, t0, eos, tid)
        if cutlass.const_expr(self.bcfg.grads_prefetch):
            self.prefetch_states_l2(mckpt, mdckpt, bid + (k + 2) * ctas, items, tid)  # the item after next

    @cute.jit
    def issue_next_state(self, s, mq, mk, mg, mb, mckpt, mdckpt, mdo, mu, mdr, mv, at, ahead, tid):
        """When there is a next item (ahead): its gates and beta with its S and dS copies (one
        committed group) and, with grads_prefetch, the L2 prefetch of its rows."""
        if ahead != 0:
            self.issue_next_gates(s, mg, mb, at, tid)  # joins the S, dS group below
            self.issue_next(s, mckpt, mdckpt, mdo, mu, mdr, mv, at, tid, "state")
            if cutlass.const_expr(self.bcfg.grads_prefetch):
                self.prefetch_next_rows(mq, mk, at, tid, (mdo, mu, mdr, mv))

    @cute.jit
    def prefetch_next_rows(self, mq, mk, at, tid, copied):
        """grads_prefetch for the persistent kernel: the next item's (at: chunk_item's nxt_at)
        q and k rows, which its norms pass reads with plain loads, and the rows its dO, U,
        dR and v copies (`copied`, issued later in this item) read, into L2 while this item
        computes. (Its gate and beta elements too measured flat on the H200: NOTES_bwd.md
        "The L2 prefetch on the H200".)"""
        K, V = self.cfg.K, self.cfg.V
        _, h, t0, eos, _ = at
        hq, hk, hv, _ = self.cfg.heads_of(h)
        mdo, mu, mdr, mv = copied
        self.prefetch_rows_l2(((mq, hq, K), (mk, hk, K), (mdo, h, V), (mu, h, V), (mdr, h, V), (mv, hv, V)),
                              t0, eos, tid)

    @cute.jit
    def prefetch_states_l2(self, mckpt, mdckpt, item, items, tid):
        """grads_prefetch for the persistent kernel: the state rows of the item after next
        (`item`, this CTA's item two steps on) into L2, one 128-byte line per thread and
        job, at the end of this item: its dS (row rho) and, on the recompute path, its S
        (the states kernel's row rho too; the forward's packed checkpoint row would need
        that item's sequence). The next item's cp.async burst of S and dS (64 KB per CTA,
        issued after the products) held its warps ~10 % of the kernel's samples while the
        rows came from DRAM (NOTES_bwd.md); from L2 they land sooner. A hint: nothing read
        changes."""
        K, V, HO = self.cfg.K, self.cfg.V, self.cfg.HO
        per_row = K * 2 // 128  # 128-byte lines per bf16 state row of K channels
        lines = V * per_row
        if item < items:
            rho = item // HO
            h = item % HO
            for u in cutlass.range_constexpr(-(-lines // self.threads)):
                job = tid + u * self.threads
                if job < lines:
                    jv = job // per_row
                    off = (job % per_row) * 64
                    cute.arch.prefetch((mdckpt[rho, h, jv, None].iterator + off).llvm_ptr, cache_level="L2")
                    if cutlass.const_expr(not self.bcfg.checkpoints):
                        cute.arch.prefetch((mckpt[rho, h, jv, None].iterator + off).llvm_ptr, cache_level="L2")

    @cute.jit
    def issue_next_gates(self, s, mg, mb, at, tid):
        """cp.async (4 bytes each, not committed: they join the next item's S and dS group)
        of the next item's log gates and beta into s.gnext and s.bnext, zero past eos, by
        the threads whose stage_norms reads them (warp 0 the gates, two rows per lane;
        threads 64 .. 64 + C - 1 beta), which see their own copies after their wait without
        a barrier. Read with plain loads at the item's start, their round trip held every
        warp at the barrier after stage_norms (NOTES_bwd.md)."""
        if cutlass.const_expr(self.cfg.gate_per_channel or self.cfg.beta_per_channel or self.beta_by_copy):
            raise ValueError("issue_next_gates: the persistent kernel's scalar gates and beta only")
        _, h, t0, eos, _ = at
        a4 = cute.make_copy_atom(cpasync.CopyG2SOp(), Float32, num_bits_per_copy=32)
        if tid < 32:
            for half in cutlass.range_constexpr(2):
                r = 2 * tid + half
                self.copy_or_zero(a4, mg, t0 + r, h, 1, 0, cute.local_tile(s.gnext, (1,), (r,)), t0 + r < eos,
                                  Float32)
        if tid >= 64 and tid < 64 + CHUNK:
            rb = tid - 64
            self.copy_or_zero(a4, mb, t0 + rb, h, 1, 0, cute.local_tile(s.bnext, (1,), (rb,)), t0 + rb < eos,
                              Float32)

    @cute.jit
    def issue_next(self, s, mckpt, mdckpt, mdo, mu, mdr, mv, at, tid, part: cutlass.Constexpr):
        """One committed group of the next item's copies (at: chunk_item's nxt_at = its
        checkpoint row, head, first token, sequence end and S row): part "state" (S, dS),
        "front" (dO, U) or "back" (dR, v)."""
        rho, h, t0, eos, srow = at
        if cutlass.const_expr(part == "state"):
            self.issue_state(s, mckpt, mdckpt, (rho, h, srow), tid)
        elif cutlass.const_expr(part == "front"):
            self.issue_front(s, mdo, mu, h, t0, eos, tid)
        else:
            self.issue_back(s, mdr, mv, self.cfg.heads_of(h), t0, eos, tid)
        cute.arch.cp_async_commit_group()

    def copy_atoms(self):
        """16-byte cp.async atoms for io-dtype and bf16 rows."""
        return (cute.make_copy_atom(cpasync.CopyG2SOp(), self.io, num_bits_per_copy=128),
                cute.make_copy_atom(cpasync.CopyG2SOp(), BFloat16, num_bits_per_copy=128))

    @cute.jit
    def mma_slice(self, lane):
        """This lane's slice of the warp MMA (the score and product stages take it)."""
        return warp_mma().get_slice(lane)

    @cute.jit
    def item_coords(self, mcu, n, item, T):
        """(rho, h, j, t0, eos) of work item `item` = rho * HO + h, whose checkpoint row rho
        is chunk j of sequence n (rows [t0, t0 + C), the sequence ends at eos)."""
        return self.coords_in(sequence_bounds(mcu, n, T), n, item)  # inside [0, T] whatever cu_seqlens holds

    @cute.jit
    def coords_in(self, bounds, n, item):
        """item_coords from sequence n's (bos, eos)."""
        HO = self.cfg.HO
        rho = item // HO
        h = item % HO
        bos, eos = bounds
        j = rho - (bos // CHUNK + n)
        return rho, h, j, bos + j * CHUNK, eos

    @cute.jit
    def issue_state(self, s, mckpt, mdckpt, at, tid):
        """cp.async of S entering the item (row srow: state_row) and dS leaving it (row rho),
        [V, K]; at = (rho, h, srow)."""
        _, a_bf = self.copy_atoms()
        rho, h, srow = at
        self.copy_state_async(a_bf, s.sf, mckpt, srow, h, tid)
        self.copy_state_async(a_bf, s.dsf, mdckpt, rho, h, tid)

    def do_io_view(self, s) -> cute.Tensor:
        """dO's tile seen with the io element type: its raw rows land there (issue_front,
        issue_copies) and convert_rows reads them. Runs at trace time."""
        return self.io_view(s.do)

    @cute.jit
    def issue_front(self, s, mdo, mu, h, t0, eos, tid):
        """cp.async of the item's dO (raw io) and U rows, zero past eos."""
        a_io, a_bf = self.copy_atoms()
        self.copy_rows_async(a_io, self.do_io_view(s), mdo, h, t0, eos, tid, self.io)
        self.copy_rows_async(a_bf, s.u, mu, h, t0, eos, tid, BFloat16)

    @cute.jit
    def issue_back(self, s, mdr, mv, heads, t0, eos, tid):
        """cp.async of the item's dR rows and v rows (raw io), zero past eos."""
        a_io, a_bf = self.copy_atoms()
        self.copy_rows_async(a_bf, s.dr, mdr, heads[3], t0, eos, tid, BFloat16)
        self.copy_rows_async(a_io, self.io_view(s.vr), mv, heads[2], t0, eos, tid, self.io)

    # ------------------------------------------------------------------ 0: which chunk
    @cute.jit
    def find_chunk(self, s, mcu, N, T, rho, tid):
        """The sequence n whose chunks hold checkpoint row rho into s.seq[0], -1 for a row
        between sequences (one chunk per CTA: the vector-gate kernel)."""
        s_seq = s.seq
        if tid == 0:
            s_seq[0] = Int32(-1)
        cute.arch.sync_threads()
        FrostBwdGrads.find_sequence(self, s, mcu, N, T, rho, tid, 0)

    @cute.jit
    def find_sequence(self, s, mcu, N, T, rho, tid, slot):
        """Writes into s.seq[slot] (which holds -1, visible to every thread) the sequence
        whose chunks hold checkpoint row rho: thread i tests sequence i (and i + threads,
        ...); a row between sequences leaves -1. Only n is stored (the chunk is rho -
        first(n)): should a malformed table let two sequences claim the row, whichever
        write lands leaves a consistent (n, chunk). Readers wait for a barrier."""
        s_seq = s.seq
        for n0 in cutlass.range(0, N, self.threads, unroll=1):
            n = n0 + tid
            if n < N:
                bos, eos = sequence_bounds(mcu, n, T)
                first = bos // CHUNK + n
                count = (eos - bos + CHUNK - 1) // CHUNK
                if rho >= first and rho < first + count:
                    s_seq[slot] = n

    @cute.jit
    def state_row(self, mcu, n, j, rho, T, N, lane):
        """The row of S entering chunk j of sequence n: the workspace row rho (states
        kernel), or the packed row of the forward's state_checkpoints."""
        row = rho
        if cutlass.const_expr(self.bcfg.checkpoints):
            row = checkpoint_row(mcu, n, j, T, N, lane)
        return row

    # ------------------------------------------------------------------ 1: rows
    @cute.jit
    def stage_norms(self, s, mq, mk, mg, mb, heads, t0, eos, tid, fetched=None):
        """Inverse L2 norms of the chunk's q and k rows (1 without use_l2norm), beta, the
        inclusive gate scan, e^Gam and e^(Gam_last - Gam). fetched (the persistent kernel:
        nonzero when the previous item issued this one's copies, issue_next_gates among
        them): the gates and beta come from s.gnext and s.bnext once the reading thread's
        copies of that group have landed (the two groups issued after it may still be in
        flight), else from global memory."""
        s_rq = s.rq
        s_rk = s.rk
        s_beta = s.beta
        s_g = s.g
        c = self.cfg
        K, C = c.K, CHUNK
        hq, hk, _, h = heads
        vr = K // VEC
        fetched = Int32(0) if fetched is None else fetched  # 0: the compiler drops the s.gnext / s.bnext reads
        if cutlass.const_expr(c.use_l2norm and self.norms_in_stage_load):
            pass  # stage_load computes and stores them
        elif cutlass.const_expr(c.use_l2norm):
            r0, cv = tid // vr, tid % vr
            for u in cutlass.range_constexpr(C * vr // THREADS):
                r = r0 + u * (THREADS // vr)
                ssq = Float32(0.0)
                ssk = Float32(0.0)
                if t0 + r < eos:
                    xq = load_vec(cute.local_tile(mq[t0 + r, hq, None], (VEC,), (cv,)))
                    xk = load_vec(cute.local_tile(mk[t0 + r, hk, None], (VEC,), (cv,)))
                    for e in cutlass.range_constexpr(VEC):
                        ssq = ssq + xq[e].to(Float32) * xq[e].to(Float32)
                        ssk = ssk + xk[e].to(Float32) * xk[e].to(Float32)
                ssq = cute.arch.warp_reduction(ssq, lambda a, b: a + b, threads_in_group=vr)
                ssk = cute.arch.warp_reduction(ssk, lambda a, b: a + b, threads_in_group=vr)
                if cv == 0:
                    s_rq[r] = cute.math.rsqrt(ssq + Float32(1e-6))
                    s_rk[r] = cute.math.rsqrt(ssk + Float32(1e-6))
        else:
            if tid < C:
                s_rq[tid] = Float32(1.0)
                s_rk[tid] = Float32(1.0)
        if cutlass.const_expr(c.beta_per_channel or not self.beta_by_copy):
            if tid >= 64 and tid < 64 + C:
                rb = tid - 64
                bt = Float32(0.0)  # GDN-2: its b is per channel (stage B's bst)
                if cutlass.const_expr(not c.beta_per_channel):
                    if fetched != 0:
                        cute.arch.cp_async_wait_group(2)
                        bt = s.bnext[rb]
                    elif t0 + rb < eos:
                        bt = mb[t0 + rb, h, 0]
                s_beta[rb] = bt
        if cutlass.const_expr(c.gate_per_channel):
            pass  # per-channel gates: the vector kernel loads and scans them
        elif tid < 32:
            ga = Float32(0.0)
            gb = Float32(0.0)
            if fetched != 0:
                cute.arch.cp_async_wait_group(2)
                ga = s.gnext[2 * tid]
                gb = s.gnext[2 * tid + 1]
            else:
                ga, gb = self.gate_pair(mg, h, t0, eos, tid)
            lo, hi = self.gate_scan_pair(ga, gb, tid)
            s_g[2 * tid] = lo
            s_g[2 * tid + 1] = hi

    @cute.jit
    def issue_copies(self, s, mdo, mu, mdr, mv, mckpt, mdckpt, heads, rho, srow, t0, eos, tid):
        """cp.async (16 bytes each, not committed) of the chunk's dO, U, dR and v rows (zero
        past the sequence) and of S (row srow) and dS (row rho), [V, K] as in global memory:
        issued before the norms pass so that all of them are in flight at once and land
        without passing through registers. dO and v land raw (io dtype); stage_load
        converts dO to bf16 in place when io is not bf16."""
        _, _, hv, h = heads
        a_io, a_bf = self.copy_atoms()
        self.copy_rows_async(a_io, self.do_io_view(s), mdo, h, t0, eos, tid, self.io)
        self.copy_rows_async(a_bf, s.u, mu, h, t0, eos, tid, BFloat16)
        self.copy_rows_async(a_bf, s.dr, mdr, h, t0, eos, tid, BFloat16)
        if cutlass.const_expr(hasattr(s, "vr")):
            self.copy_rows_async(a_io, self.io_view(s.vr), mv, hv, t0, eos, tid, self.io)
        self.copy_state_async(a_bf, s.sf, mckpt, srow, h, tid)
        self.copy_state_async(a_bf, s.dsf, mdckpt, rho, h, tid)

    @cute.jit
    def copy_rows_async(self, atom, dst, src, head, t0, eos, tid, dtype):
        """Rows [t0, t0 + C) of src[:, head, :] into dst [C, V] by cp.async, zero past eos
        (a warp: consecutive 16-byte slices of whole rows)."""
        V, C = self.cfg.V, CHUNK
        vv = V // VEC
        r0, cv = tid // vv, tid % vv
        for u in cutlass.range_constexpr(C * vv // THREADS):
            r = r0 + u * (THREADS // vv)
            self.copy_or_zero(atom, src, t0 + r, head, VEC, cv, cute.local_tile(dst[r, None], (VEC,), (cv,)),
                              t0 + r < eos, dtype)

    @cute.jit
    def copy_state_async(self, atom, dst, src, row, h, tid):
        """A V-major [V, K] state row into dst [V, K] unchanged, by cp.async; the products
        read it transposed (operand_mn)."""
        K, V = self.cfg.K, self.cfg.V
        vk = K // VEC
        jv0, cv = tid // vk, tid % vk
        for u in cutlass.range_constexpr(V * vk // THREADS):
            jv = jv0 + u * (THREADS // vk)
            cute.copy(atom, cute.local_tile(src[row, h, jv, None], (VEC,), (cv,)),
                      cute.local_tile(dst[jv, None], (VEC,), (cv,)))

    @cute.jit
    def stage_load(self, s, mq, mk, heads, t0, eos, tid):
        """q-hat, k-hat, kb rows [C, K] (bf16), e^Gam and e^(Gam_last - Gam) per row, then
        the wait for issue_copies (dO converted to bf16 in place for an fp16 io). Rows past
        the sequence are zero. Every shared store is 16 bytes (v1.2 stored q/k transposed,
        2 bytes at a time: the profile's largest load-phase cost); the products read the
        rows transposed through channels_first views and ldmatrix.trans."""
        s_qr = s.qr
        s_kr = s.kr
        s_kbr = s.kbr
        s_g = s.g
        c = self.cfg
        K, V, C = c.K, c.V, CHUNK
        hq, hk, _, h = heads
        vk = K // VEC
        r0, cv = tid // vk, tid % vk  # a warp: consecutive 16-byte slices of whole rows
        for u in cutlass.range_constexpr(C * vk // THREADS):
            r = r0 + u * (THREADS // vk)
            ok = t0 + r < eos
            bt = s.beta[r]
            xq = cute.make_rmem_tensor((VEC,), self.io)
            xk = cute.make_rmem_tensor((VEC,), self.io)
            xq.fill(0.0)
            xk.fill(0.0)
            if ok:
                cute.autovec_copy(cute.local_tile(mq[t0 + r, hq, None], (VEC,), (cv,)), xq)
                cute.autovec_copy(cute.local_tile(mk[t0 + r, hk, None], (VEC,), (cv,)), xk)
            rq = Float32(1.0)
            rk = Float32(1.0)
            if cutlass.const_expr(c.use_l2norm):
                # the row's vk slices are on consecutive lanes: stage_norms' first pass had
                # the same thread mapping and order, so the norms are bitwise its
                ssq = Float32(0.0)
                ssk = Float32(0.0)
                for e in cutlass.range_constexpr(VEC):
                    ssq = ssq + xq[e].to(Float32) * xq[e].to(Float32)
                    ssk = ssk + xk[e].to(Float32) * xk[e].to(Float32)
                ssq = cute.arch.warp_reduction(ssq, lambda a, b: a + b, threads_in_group=vk)
                ssk = cute.arch.warp_reduction(ssk, lambda a, b: a + b, threads_in_group=vk)
                rq = cute.math.rsqrt(ssq + Float32(1e-6))
                rk = cute.math.rsqrt(ssk + Float32(1e-6))
                if cv == 0:
                    s.rq[r] = rq
                    s.rk[r] = rk
            yq = cute.make_rmem_tensor((VEC,), BFloat16)
            yk = cute.make_rmem_tensor((VEC,), BFloat16)
            ykb = cute.make_rmem_tensor((VEC,), BFloat16)
            for e in cutlass.range_constexpr(VEC):
                kh = (xk[e].to(Float32) * rk).to(BFloat16)
                yq[e] = (xq[e].to(Float32) * rq).to(BFloat16)
                yk[e] = kh
                ykb[e] = (kh.to(Float32) * bt).to(BFloat16)
            cute.autovec_copy(yq, cute.local_tile(s_qr[r, None], (VEC,), (cv,)))
            cute.autovec_copy(yk, cute.local_tile(s_kr[r, None], (VEC,), (cv,)))
            cute.autovec_copy(ykb, cute.local_tile(s_kbr[r, None], (VEC,), (cv,)))
        cute.arch.cp_async_wait_group(0)
        if cutlass.const_expr(self.io is not BFloat16):
            self.convert_rows(s, tid)
        if tid < C:
            gl = s_g[C - 1]
            s.ea[tid] = cute.arch.exp(s_g[tid])
            s.ekd[tid] = cute.arch.exp(gl - s_g[tid])

    @cute.jit
    def convert_rows(self, s, tid):
        """dO [C, V] holding raw io rows (do_io_view) -> bf16 in place: each thread converts
        the slices its own copy_rows_async copies wrote (visible to it after its wait)."""
        V, C = self.cfg.V, CHUNK
        vv = V // VEC
        r0, cv = tid // vv, tid % vv
        dst = s.do
        raw = self.do_io_view(s)
        for u in cutlass.range_constexpr(C * vv // THREADS):
            r = r0 + u * (THREADS // vv)
            x = load_vec(cute.local_tile(raw[r, None], (VEC,), (cv,)))
            y = cute.make_rmem_tensor((VEC,), BFloat16)
            for e in cutlass.range_constexpr(VEC):
                y[e] = x[e].to(Float32).to(BFloat16)
            cute.autovec_copy(y, cute.local_tile(dst[r, None], (VEC,), (cv,)))

    @cute.jit
    def operand_mn(self, thr, lane, tile: cute.Tensor) -> cute.Tensor:
        """B operand registers [N, Kt] from a tile whose N mode is contiguous in shared
        memory (the V-major S and dS seen as [K, V]): ldmatrix.x4.trans. (FrostFwdMma's
        ldmatrix knob, which forward test tooling turns off, is never off here.)"""
        frag = thr.make_fragment_B(thr.partition_B(tile))
        atom = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 4), BFloat16)
        copy = cute.make_tiled_copy_B(atom, warp_mma())
        thr_copy = copy.get_slice(lane)
        cute.copy(copy, thr_copy.partition_S(tile), thr_copy.retile(frag))
        return frag

    @cute.jit
    def channels_first(self, rows: cute.Tensor) -> cute.Tensor:
        """A row-major [C, K] shared operand (q-hat, k-hat, kb) seen as [K, C]."""
        K = self.cfg.K
        return cute.make_tensor(rows.iterator, cute.make_layout((K, CHUNK), stride=(1, K + PAD16)))

    @cute.jit
    def state_kv(self, st: cute.Tensor) -> cute.Tensor:
        """The V-major [V, K] shared state seen as [K, V] (K mode contiguous)."""
        K, V = self.cfg.K, self.cfg.V
        return cute.make_tensor(st.iterator, cute.make_layout((K, V), stride=(1, K + PAD16)))

    # ------------------------------------------------------------------ 2: scores
    @cute.jit
    def stage_scores(self, s, scale, thr, lane, wid):
        """dZp and dZm on the lower 16x16 tiles, each warp looping over its own tiles
        (gram_schedule's deal: the tile code exists once)."""
        slots = self.gram_slots()
        count = Int32(len(slots[0]))
        for w in cutlass.range_constexpr(1, WARPS):
            if wid == w:
                count = Int32(len(slots[w]))
        for jj in cutlass.range(count, unroll=1):
            bi = Int32(0)
            bj = Int32(0)
            for w in cutlass.range_constexpr(WARPS):
                for k in cutlass.range_constexpr(len(slots[w])):
                    if wid == w and jj == k:
                        bi = Int32(GRAM_TILES[slots[w][k]][0])
                        bj = Int32(GRAM_TILES[slots[w][k]][1])
            self.score_tile(s, bi, bj, scale, thr, lane)

    @cute.jit
    def score_tile(self, s, bi, bj, scale, thr, lane):
        s_do = s.do
        s_dr = s.dr
        s_u = s.u
        s_g = s.g
        s_dzp = s.dzp
        s_dzm = s.dzm
        V = self.cfg.V
        mma = warp_mma()
        acc_p = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
        acc_m = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
        acc_p.fill(0.0)
        acc_m.fill(0.0)
        a_do = self.operand(thr, lane, cute.local_tile(s_do, (SUB, V), (bi, 0)), True)
        a_dr = self.operand(thr, lane, cute.local_tile(s_dr, (SUB, V), (bi, 0)), True)
        b_u = self.operand(thr, lane, cute.local_tile(s_u, (SUB, V), (bj, 0)), False)
        for kk in cutlass.range_constexpr(V // 16):
            cute.gemm(mma, acc_p, a_do[None, None, kk], b_u[None, None, kk], acc_p)
            cute.gemm(mma, acc_m, a_dr[None, None, kk], b_u[None, None, kk], acc_m)
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        yp = cute.make_rmem_tensor(acc_p.layout, BFloat16)
        ym = cute.make_rmem_tensor(acc_p.layout, BFloat16)
        for e in cutlass.range_constexpr(cute.size(acc_p)):
            ts = crd[e]
            t = bi * SUB + ts[0]
            u = bj * SUB + ts[1]
            f = Float32(1.0)  # vector gates: the decays enter the adjoints (bwd_grads_vec.py)
            if cutlass.const_expr(not self.cfg.gate_per_channel):
                f = cute.arch.exp(cute.arch.fmin(s_g[t] - s_g[u], Float32(0.0)))
            pv = acc_p[e] * scale * f
            mv = -(acc_m[e] * f)
            if u > t:
                pv = Float32(0.0)
            if u >= t:
                mv = Float32(0.0)
            yp[e] = pv.to(BFloat16)
            ym[e] = mv.to(BFloat16)
        store_fragment(yp, cute.local_tile(s_dzp, (SUB, SUB), (bi, bj)))
        store_fragment(ym, cute.local_tile(s_dzm, (SUB, SUB), (bi, bj)))

    # ------------------------------------------------------------------ 3-4: dq, dk
    @cute.jit
    def operand_t(self, thr, lane, tile: cute.Tensor) -> cute.Tensor:
        """A operand registers [16, Kt] from a tile whose M mode is contiguous in shared
        memory (dZp^T, dZm^T as views of the row-major score tiles): ldmatrix.x4.trans
        (v1.2 copied element-wise: 16 two-byte shared loads per tile)."""
        frag = thr.make_fragment_A(thr.partition_A(tile))
        atom = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 4), BFloat16)
        copy = cute.make_tiled_copy_A(atom, warp_mma())
        thr_copy = copy.get_slice(lane)
        cute.copy(copy, thr_copy.partition_S(tile), thr_copy.retile(frag))
        return frag

    @cute.jit
    def scores_and_products(self, s, scale, thr, lane, wid, tid):
        """The score tiles, a barrier, e^Gam_last sum S dS (the last reader of S and dS
        besides the state products), then the state products and their barrier. The
        warpgroup-MMA variant (bwd_grads_wgmma.py) issues the products first instead."""
        self.stage_scores(s, scale, thr, lane, wid)
        cute.arch.sync_threads()
        self.state_sum(s, tid)
        return self.stage_products(s, thr, lane, wid)

    @cute.jit
    def stage_products(self, s, thr, lane, wid):
        """Warp w's state products (rows of block w % 4, channels of half w / 4), then a
        barrier: S and dS are dead after it (state_sum read them before)."""
        bi = wid % NBLK
        hc = wid // NBLK
        acc_q, acc_kb, acc_k, crd = self.products_with_states(s, thr, lane, bi, hc)
        cute.arch.sync_threads()
        return acc_q, acc_kb, acc_k, crd, bi, hc

    @cute.jit
    def stage_adjoints(self, s, acc_q, acc_kb, acc_k, crd, heads, t0, eos, scale, thr, lane, wid, bi, hc,
                       between=None):
        """The state products scaled by their decays, plus the score adjoints, into dq^,
        dkb, dk^_dir; the row sums and the KD partial per warp; a barrier. between (traced
        inline when given: the next item's S and dS copies) runs where adjoint_products
        puts it. Returns row_fragments' tuple (None: the rows are read from shared memory),
        which write_qk's L2-norm adjoint takes instead of loading it again."""
        s_ea = s.ea
        s_ekd = s.ekd
        s_part = s.part
        DN = self.cfg.K // 2
        frags = self.row_fragments(s, bi, hc, lane)
        kd_sum = Float32(0.0)  # sum k^ e^(Gam_last - Gam) dKD over this lane's elements
        for e in cutlass.range_constexpr(cute.size(acc_q)):
            td = crd[e]
            t = bi * SUB + td[0]
            d = hc * DN + td[1]
            acc_q[e] = acc_q[e] * (scale * s_ea[t])
            acc_kb[e] = acc_kb[e] * (-s_ea[t])
            kdv = acc_k[e] * s_ekd[t]
            acc_k[e] = kdv
            kv = self.k_value(s, t, d) if cutlass.const_expr(frags is None) else frags[1][e].to(Float32)
            kd_sum = kd_sum + kv * kdv
        self.adjoint_products(s, acc_q, acc_kb, acc_k, thr, lane, wid, bi, hc, between)
        self.row_sums(s, acc_q, acc_kb, acc_k, crd, None, heads[3], t0, eos, lane, bi, hc, frags)
        kd_sum = cute.arch.warp_reduction(kd_sum, lambda a, b: a + b)
        if lane == 0:
            s_part[0, wid] = kd_sum
        cute.arch.sync_threads()
        return frags

    @cute.jit
    def adjoint_products(self, s, acc_q, acc_kb, acc_k, thr, lane, wid, bi, hc, between=None):
        """This warp's score adjoints on mma.sync: dZp k^, dZm k^ into dq^, dkb (s blocks
        <= bi); dZp^T q^ + dZm^T kb into dk^_dir (t blocks >= bi). between runs first."""
        if cutlass.const_expr(between is not None):
            between()
        s_qt = self.channels_first(s.qr)
        s_kt = self.channels_first(s.kr)
        s_kbt = self.channels_first(s.kbr)
        s_dzp = s.dzp
        s_dzm = s.dzm
        C = CHUNK
        DN = self.cfg.K // 2
        mma = warp_mma()
        for sb in cutlass.range(bi + 1, unroll=1):
            a_p = self.operand(thr, lane, cute.local_tile(s_dzp, (SUB, SUB), (bi, sb)), True)
            a_m = self.operand(thr, lane, cute.local_tile(s_dzm, (SUB, SUB), (bi, sb)), True)
            b_k = self.operand_mn(thr, lane, cute.local_tile(s_kt, (DN, SUB), (hc, sb)))
            cute.gemm(mma, acc_q, a_p[None, None, 0], b_k[None, None, 0], acc_q)
            cute.gemm(mma, acc_kb, a_m[None, None, 0], b_k[None, None, 0], acc_kb)
        dzp_t = cute.make_tensor(s_dzp.iterator, cute.make_layout((C, C), stride=(1, C + PAD16)))
        dzm_t = cute.make_tensor(s_dzm.iterator, cute.make_layout((C, C), stride=(1, C + PAD16)))
        for tb in cutlass.range(bi, NBLK, unroll=1):
            a_p = self.operand_t(thr, lane, cute.local_tile(dzp_t, (SUB, SUB), (bi, tb)))
            a_m = self.operand_t(thr, lane, cute.local_tile(dzm_t, (SUB, SUB), (bi, tb)))
            b_q = self.operand_mn(thr, lane, cute.local_tile(s_qt, (DN, SUB), (hc, tb)))
            b_kb = self.operand_mn(thr, lane, cute.local_tile(s_kbt, (DN, SUB), (hc, tb)))
            cute.gemm(mma, acc_k, a_p[None, None, 0], b_q[None, None, 0], acc_k)
            cute.gemm(mma, acc_k, a_m[None, None, 0], b_kb[None, None, 0], acc_k)

    @cute.jit
    def products_with_states(self, s, thr, lane, bi, hc):
        """dO S^T, dR S^T, U dS^T for this warp's tile (rows of block bi, channels of half
        hc; contraction over V) as three fresh accumulators, and their coordinates."""
        s_do = s.do
        s_dr = s.dr
        s_u = s.u
        s_sf = s.sf
        s_dsf = s.dsf
        DN = self.cfg.K // 2
        mma = warp_mma()
        acc_q = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), Float32)
        acc_kb = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), Float32)
        acc_k = cute.make_rmem_tensor(thr.partition_shape_C((SUB, DN)), Float32)
        acc_q.fill(0.0)
        acc_kb.fill(0.0)
        acc_k.fill(0.0)
        sf_kv = self.state_kv(s_sf)
        dsf_kv = self.state_kv(s_dsf)
        for kk in cutlass.range_constexpr(self.cfg.V // 16):
            a_do = self.operand(thr, lane, cute.local_tile(s_do, (SUB, 16), (bi, kk)), True)
            a_dr = self.operand(thr, lane, cute.local_tile(s_dr, (SUB, 16), (bi, kk)), True)
            a_u = self.operand(thr, lane, cute.local_tile(s_u, (SUB, 16), (bi, kk)), True)
            b_s = self.operand_mn(thr, lane, cute.local_tile(sf_kv, (DN, 16), (hc, kk)))
            b_ds = self.operand_mn(thr, lane, cute.local_tile(dsf_kv, (DN, 16), (hc, kk)))
            cute.gemm(mma, acc_q, a_do[None, None, 0], b_s[None, None, 0], acc_q)
            cute.gemm(mma, acc_kb, a_dr[None, None, 0], b_s[None, None, 0], acc_kb)
            cute.gemm(mma, acc_k, a_u[None, None, 0], b_ds[None, None, 0], acc_k)
        return acc_q, acc_kb, acc_k, thr.partition_C(cute.make_identity_tensor((SUB, DN)))

    @cute.jit
    def row_sums(self, s, acc_q, acc_kb, acc_k, crd, mdb, h, t0, eos, lane, bi, hc, frags=None):
        """q^.dq^, kb.dkb, k^.dk^_d, k^.dkb per row of this warp's tile (the sum over its
        channel half) into s.sums[hc]; visit_element sees every element on the way. An
        m16n8 accumulator holds rows g and g + 8 of the block (g = lane // 4): each sum is
        kept as a (row g, row g + 8) pair, then reduced over the quad in a fixed order.
        Which of the pair an element joins is known while tracing (row_halves; up to v1.10
        it was a 0 / 1 factor per element, two multiply-adds per sum instead of one add).
        frags: row_fragments' (q-hat, k-hat, kb) of the tile, else row_pair / row_values
        read the elements from shared memory."""
        s_sums = s.sums
        DN = self.cfg.K // 2
        halves = row_halves(DN)
        lo = [Float32(0.0)] * ROW_SUMS
        hi = [Float32(0.0)] * ROW_SUMS
        pair = None
        for e in cutlass.range_constexpr(cute.size(acc_q)):
            td = crd[e]
            t = bi * SUB + td[0]
            d = hc * DN + td[1]
            if cutlass.const_expr(frags is not None):
                qv, kv, kbv = (f[e].to(Float32) for f in frags)
            else:
                if cutlass.const_expr(e % 2 == 0):
                    pair = self.row_pair(s, t, d)
                qv, kv, kbv = self.row_values(s, pair, e % 2, t, d)
            self.visit_element(s, mdb, h, t0, eos, t, d, qv, kv, kbv, acc_q[e], acc_kb[e], acc_k[e])
            terms = (qv * acc_q[e], kbv * acc_kb[e], kv * acc_k[e], kv * acc_kb[e])
            for i in cutlass.range_constexpr(ROW_SUMS):
                if cutlass.const_expr(halves[e]):
                    hi[i] = hi[i] + terms[i]
                else:
                    lo[i] = lo[i] + terms[i]
        for i in cutlass.range_constexpr(ROW_SUMS):
            for half in cutlass.range_constexpr(2):
                v = cute.arch.warp_reduction(hi[i] if half else lo[i], lambda a, b: a + b, threads_in_group=4)
                if lane % 4 == 0:
                    s_sums[hc, i, bi * SUB + lane // 4 + 8 * half] = v

    def row_fragments(self, s, bi, hc, lane):
        """(q-hat, k-hat, kb) of this warp's [16, K / 2] tile (rows of block bi, channels of
        half hc) as bf16 fragments in the accumulators' layout, or None (here): the row
        sums, the KD sum and the dq/dk epilogue then read each element from shared memory.
        Runs at trace time (a kernel class may load them with ldmatrix instead)."""
        return None

    def row_pair(self, s, t, d):
        """Operands of accumulator values e, e + 1 (row t, columns d, d + 1) read together,
        or None: row_values reads each element (traced inline, not a kernel function)."""
        return None

    def row_values(self, s, pair, i, t, d):
        """(q-hat, k-hat, kb) at row t, channel d, value i of row_pair's pair."""
        return self.q_value(s, t, d), self.k_value(s, t, d), self.kb_value(s, t, d)

    @cute.jit
    def visit_element(self, s, mdb, h, t0, eos, t, d, qv, kv, kbv, dq, dkb, dk):
        """Per-element work of the row-sum pass (scalar gates: none)."""
        pass

    @cute.jit
    def kb_value(self, s, t, d):
        return s.kbr[t, d].to(Float32)

    @cute.jit
    def q_value(self, s, t, d):
        """q-hat (bf16, as the products used it) at row t, channel d."""
        return s.qr[t, d].to(Float32)

    @cute.jit
    def k_value(self, s, t, d):
        return s.kr[t, d].to(Float32)

    @cute.jit
    def beta_at(self, s, t, d):
        """beta at row t (scalar beta: the same for every channel d)."""
        return s.beta[t]

    def staging(self, s):
        """(bf16 pointer, bytes) of shared memory dead when write_qk runs, for the dq/dk
        staging. Runs at trace time."""
        return s.do.iterator, staging_bytes(self.cfg, self.smem_plan(self.cfg), self.staged)

    @cute.jit
    def qk_element(self, s, acc_q, acc_kb, acc_k, e, t, d, rows=None):
        """dq, dk at row t, channel d from the accumulators' element e: the L2-norm adjoint
        with the full-row sums (q-hat, k-hat from rows, row_fragments' tuple, when given)."""
        s_sums = s.sums
        dqh = acc_q[e]
        dkh = acc_k[e] + self.beta_at(s, t, d) * acc_kb[e]
        if cutlass.const_expr(self.cfg.use_l2norm):
            sq = s_sums[0, 0, t] + s_sums[1, 0, t]
            # k^.dk^ = k^.dk^_d + sum_d beta k^ dkb = k^.dk^_d + kb.dkb
            sk = (s_sums[0, 2, t] + s_sums[1, 2, t]) + (s_sums[0, 1, t] + s_sums[1, 1, t])
            qv = self.q_value(s, t, d) if cutlass.const_expr(rows is None) else rows[0][e].to(Float32)
            kv = self.k_value(s, t, d) if cutlass.const_expr(rows is None) else rows[1][e].to(Float32)
            dqh = s.rq[t] * (dqh - qv * sq)
            dkh = s.rk[t] * (dkh - kv * sk)
        return dqh, dkh

    @cute.jit
    def write_qk(self, s, mdq, mdk, acc_q, acc_kb, acc_k, crd, heads, t0, eos, bi, hc, frags=None):
        """dq, dk of this warp's tile. Staged (staging() gives room for at least one [C, K]
        tile): the CTA writes its tiles into shared memory, then every thread stores 16-byte
        row slices (v1.2 stored each element, 2 bytes at a time, with the pointer reloaded
        per store: 39% of the kernel's profile samples). Else (no room for a tile: the
        vector-gate kernel's fp32 dq/dk at K = 128, V = 64) element-wise global stores."""
        c = self.cfg
        K, C = c.K, CHUNK
        DN = K // 2
        hq, hk, _, h = heads
        oq = h if cutlass.const_expr(self.bcfg.q_grouped) else hq
        ok = h if cutlass.const_expr(self.bcfg.k_grouped) else hk
        room = self.staging(s)
        tiles = staging_tiles(K, mdq.element_type.width, room[1])
        rows = None  # q-hat and k-hat of the tile for the L2-norm adjoint (row_fragments)
        if cutlass.const_expr(c.use_l2norm):
            rows = frags if cutlass.const_expr(frags is not None) else self.row_fragments(s, bi, hc, cute.arch.lane_idx())
        if cutlass.const_expr(tiles == 0):
            for e in cutlass.range_constexpr(cute.size(acc_q)):
                t = bi * SUB + crd[e][0]
                d = hc * DN + crd[e][1]
                dqh, dkh = self.qk_element(s, acc_q, acc_kb, acc_k, e, t, d, rows)
                if t0 + t < eos:
                    mdq[t0 + t, oq, d] = dqh.to(mdq.element_type)
                    mdk[t0 + t, ok, d] = dkh.to(mdk.element_type)
        else:
            tid, _, _ = cute.arch.thread_idx()
            dt = mdq.element_type
            ld = K + 128 // dt.width  # 16 bytes of padding per row
            base = cute.recast_ptr(room[0], dtype=dt)
            st_q = cute.make_tensor(base, cute.make_layout((C, K), stride=(ld, 1)))
            st_k = cute.make_tensor(base + C * ld, cute.make_layout((C, K), stride=(ld, 1)))
            if cutlass.const_expr(tiles == 1):
                st_k = st_q
            frags = None  # fp32 dq/dk (grouped heads): stored element-wise into the staging
            if cutlass.const_expr(dt.width == 16):
                yq = cute.make_rmem_tensor(acc_q.layout, dt)  # the accumulators' fragment, 16-bit
                yk = cute.make_rmem_tensor(acc_q.layout, dt)
                for e in cutlass.range_constexpr(cute.size(acc_q)):
                    t = bi * SUB + crd[e][0]
                    d = hc * DN + crd[e][1]
                    dqh, dkh = self.qk_element(s, acc_q, acc_kb, acc_k, e, t, d, rows)
                    yq[e] = dqh.to(dt)
                    yk[e] = dkh.to(dt)
                frags = (yq, yk)
            self.stage_qk(s, acc_q, acc_kb, acc_k, crd, bi, hc, frags, st_q, st_k if tiles == 2 else None, rows)
            cute.arch.sync_threads()
            self.store_rows(st_q, mdq, oq, t0, eos, tid)
            if cutlass.const_expr(tiles == 1):
                cute.arch.sync_threads()
                self.stage_qk(s, acc_q, acc_kb, acc_k, crd, bi, hc, frags, None, st_k, rows)
                cute.arch.sync_threads()
            self.store_rows(st_k, mdk, ok, t0, eos, tid)

    @cute.jit
    def stage_qk(self, s, acc_q, acc_kb, acc_k, crd, bi, hc, frags, st_q, st_k, rows=None):
        """This warp's part of the staged dq tile st_q and dk tile st_k (either None: not
        this time). 16-bit outputs: from frags, their fragments, by stmatrix (stage_tile);
        fp32 (frags None, grouped heads): one 4-byte shared store per element, from the
        accumulators (qk_element; for dk alone, after dq's tile left, computed again)."""
        if cutlass.const_expr(frags is not None):
            if cutlass.const_expr(st_q is not None):
                self.stage_tile(frags[0], st_q, bi, hc)
            if cutlass.const_expr(st_k is not None):
                self.stage_tile(frags[1], st_k, bi, hc)
        else:
            DN = self.cfg.K // 2
            for e in cutlass.range_constexpr(cute.size(acc_q)):
                t = bi * SUB + crd[e][0]
                d = hc * DN + crd[e][1]
                dqh, dkh = self.qk_element(s, acc_q, acc_kb, acc_k, e, t, d, rows)
                if cutlass.const_expr(st_q is not None):
                    st_q[t, d] = dqh.to(st_q.element_type)
                if cutlass.const_expr(st_k is not None):
                    st_k[t, d] = dkh.to(st_k.element_type)

    @cute.jit
    def stage_tile(self, frag: cute.Tensor, dst: cute.Tensor, bi, hc):
        """This warp's [16, K/2] dq or dk tile (rows of block bi, channels of half hc) into
        the staged [C, K] tile dst (store_fragment)."""
        DN = self.cfg.K // 2
        store_fragment(frag, cute.local_tile(dst, (SUB, DN), (bi, hc)))

    @cute.jit
    def store_rows(self, src, dst, head, t0, eos, tid):
        """A staged [C, K] tile into rows [t0, t0 + C) of dst[:, head, :], rows before eos
        only: 16-byte shared loads and global stores, a warp over consecutive slices."""
        K, C = self.cfg.K, CHUNK
        vec = 128 // dst.element_type.width
        vk = K // vec
        r0, cv = tid // vk, tid % vk
        for u in cutlass.range_constexpr(C * vk // THREADS):
            r = r0 + u * (THREADS // vk)
            if t0 + r < eos:
                x = load_vec(cute.local_tile(src[r, None], (vec,), (cv,)))
                cute.autovec_copy(x, cute.local_tile(dst[t0 + r, head, None], (vec,), (cv,)))

    # ------------------------------------------------------------------ 4: dv, dbeta, dg
    @cute.jit
    def stage_values(self, s, mv, mdv, heads, t0, eos, tid, mw, mdw):
        """dv = beta dR (GDN-2: w dR, and dw = v dR), and sum_v v dR per row (a row's slices on
        consecutive lanes)."""
        s_dr = s.dr
        s_beta = s.beta
        s_dbv = s.dbv
        c = self.cfg
        V, C = c.V, CHUNK
        _, _, hv, h = heads
        ov = h if cutlass.const_expr(self.bcfg.v_grouped) else hv
        vv = V // VEC
        r0, cv = tid // vv, tid % vv
        for u in cutlass.range_constexpr(C * vv // THREADS):
            r = r0 + u * (THREADS // vv)
            x = load_vec(cute.local_tile(s_dr[r, None], (VEC,), (cv,)))
            ok = t0 + r < eos
            xv = self.value_row_slice(s, "vr", mv, hv, t0, r, cv, ok)
            bt = s_beta[r]
            part = Float32(0.0)
            y = cute.make_rmem_tensor((VEC,), mdv.element_type)
            if cutlass.const_expr(c.has_w):
                xw = self.value_row_slice(s, "wr", mw, h, t0, r, cv, ok)
                yw = cute.make_rmem_tensor((VEC,), mdw.element_type)
                for e in cutlass.range_constexpr(VEC):
                    dr = x[e].to(Float32)
                    y[e] = (xw[e].to(Float32) * dr).to(mdv.element_type)
                    yw[e] = (xv[e].to(Float32) * dr).to(mdw.element_type)
                if ok:
                    cute.autovec_copy(yw, cute.local_tile(mdw[t0 + r, h, None], (VEC,), (cv,)))
            else:
                for e in cutlass.range_constexpr(VEC):
                    dr = x[e].to(Float32)
                    part = part + xv[e].to(Float32) * dr
                    y[e] = (bt * dr).to(mdv.element_type)
            if ok:
                cute.autovec_copy(y, cute.local_tile(mdv[t0 + r, ov, None], (VEC,), (cv,)))
            part = cute.arch.warp_reduction(part, lambda a, b: a + b, threads_in_group=vv)
            if cv == 0:
                s_dbv[r] = part

    @cute.jit
    def value_row_slice(self, s, tile: cutlass.Constexpr, src, head, t0, r, cv, ok):
        """Slice cv (VEC elements, io dtype) of row r of v or w: from the tile the load phase
        copied it into when the kernel's plan has one (named `tile`; zero past eos), else
        from global memory (zero unless ok)."""
        x = cute.make_rmem_tensor((VEC,), self.io)
        if cutlass.const_expr(hasattr(s, tile)):
            cute.autovec_copy(cute.local_tile(self.io_view(getattr(s, tile))[r, None], (VEC,), (cv,)), x)
        else:
            x.fill(0.0)
            if ok:
                cute.autovec_copy(cute.local_tile(src[t0 + r, head, None], (VEC,), (cv,)), x)
        return x

    @cute.jit
    def state_sum(self, s, tid):
        """e^Gam_last sum_{d, v} S dS as per-warp partials (scalar gates; run before the
        state products, so that S and dS are dead once they end). A thread reads 8-channel
        slices of value rows with 16-byte loads (a warp: consecutive slices of whole rows,
        as copy_state_async wrote them): up to v1.5 it read one element per 2-byte load
        (K V / 128 LDS.U16 per thread, 128 at K = V = 128, with their address arithmetic:
        two thirds of the products region's instructions)."""
        s_sf = s.sf
        s_dsf = s.dsf
        s_part = s.part
        s_g = s.g
        K, V, C = self.cfg.K, self.cfg.V, CHUNK
        vk = K // VEC
        jv0, cv = tid // vk, tid % vk
        acc = Float32(0.0)
        for u in cutlass.range_constexpr(V * vk // THREADS):
            jv = jv0 + u * (THREADS // vk)
            xs = load_vec(cute.local_tile(s_sf[jv, None], (VEC,), (cv,)))
            xd = load_vec(cute.local_tile(s_dsf[jv, None], (VEC,), (cv,)))
            for e in cutlass.range_constexpr(VEC):
                acc = acc + xs[e].to(Float32) * xd[e].to(Float32)
        acc = cute.arch.warp_reduction(acc, lambda a, b: a + b)
        if tid % 32 == 0:
            s_part[1, tid // 32] = acc * cute.arch.exp(s_g[C - 1])

    @cute.jit
    def stage_gates(self, s, mdg, mdb, heads, t0, eos, tid):
        """Warp 0: dGam per row, the chunk-level terms at its last real row, the reverse
        cumsum (two rows per lane, shuffles) -> dg; dbeta."""
        s_sums = s.sums
        s_dbv = s.dbv
        s_part = s.part
        h = heads[3]
        if tid < 32:
            last = cutlass.min(eos - 1 - t0, CHUNK - 1)  # the chunk's last real row
            tail = Float32(0.0)
            for w in cutlass.range_constexpr(WARPS):
                tail = tail + s_part[0, w]
            for w in cutlass.range_constexpr(WARPS):
                tail = tail + s_part[1, w]
            dgam = []
            for half in cutlass.range_constexpr(2):
                r = 2 * tid + half
                v = ((s_sums[0, 0, r] + s_sums[1, 0, r]) + (s_sums[0, 1, r] + s_sums[1, 1, r])
                     - (s_sums[0, 2, r] + s_sums[1, 2, r]))
                if r == last:
                    v = v + tail
                if r > last:
                    v = Float32(0.0)
                dgam.append(v)
            # reverse inclusive cumsum over rows: suffix sums of (row 2i, row 2i+1) pairs
            x = dgam[0] + dgam[1]
            for off in cutlass.range_constexpr(5):
                x_dn = cute.arch.shuffle_sync_down(x, 1 << off)
                if tid + (1 << off) < 32:
                    x = x + x_dn
            for half in cutlass.range_constexpr(2):
                r = 2 * tid + half
                val = x
                if half == 1:
                    val = x - dgam[0]
                if t0 + r < eos:
                    mdg[t0 + r, h, 0] = val
                    mdb[t0 + r, h, 0] = (s_sums[0, 3, r] + s_sums[1, 3, r]) + s_dbv[r]
