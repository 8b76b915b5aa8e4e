"""FROST forward, pipelined layer: the base layer's tensor-core algorithm (fwd_mma.py) with
its per-chunk serial overheads removed.

The product's forward kernel on archs other than sm_90a (plain and training forwards:
state checkpoints, U), and the base of the wgmma layer (fwd_wgmma.py), which the product
compiles for every forward on sm_90a, training ones included
(compile_kernel.product_algorithm).

Same grid, warps, state registers, MMA algebra and chain as the base layer
(FrostFwdPipelined derives from FrostFwdMma and overrides its extension points); what
changes is how a chunk's operands reach shared memory and how the state-independent
stages spend their time:

1. prefetch  the next chunk's q, k, gates, beta (GDN-2: b, w) are copied by cp.async
             while this chunk's chain runs, into the shared tensors the next rows and
             operand stages read (q, k, g, beta; GDN-2 b -> qr, w -> kbr), all of them
             dead during the chain; v goes into W0's slot column by column, each warp
             after it has read its own W0 columns. Rows >= eos are zero-filled. The rows
             stage then works in place from shared memory: no global round trip left on
             the chunk's critical path (the base layer has three in a row: rows, beta,
             gates).
2. operands  rows-fastest thread mapping (a warp covers 32 rows of one 8-channel slice):
             the transposed KD^T stores hit 32 different banks (base layer: 16-way
             conflicts, 32 per thread per chunk), the gate rows load as 16-byte vectors,
             and the decays the later stages need are made here, by every thread:
             e^Gam_last (the chain's state decay, no exp there), KE = k e^(Gam_e - Gam_s)
             with e the last row of s's block and, per Gram tile (i, j),
             X_ij = e^(Gam_r_i - Gam_e_j) per channel (vector gates).
3. Gram      vector gates: the B side of tile (i, j) is KE_j (ldmatrix) times X_ij per
             channel, i.e. k_s e^(Gam_r_i - Gam_s) as in the base layer but with one
             multiply per element instead of three shared loads and an exp (one more bf16
             rounding: +7% output error in the emulation, state error unchanged). Tiles
             are dealt to warps by gram_schedule (a diagonal tile, which carries the
             16x16 inverse, counts double), so no warp holds a diagonal tile and a second
             tile.

Everything else (the exact diagonal-block fallback, block inverses, the chain) is the base
layer's code. Compiled with write_checkpoints (FrostFwdPipelinedCheckpoints: one more
pointer), the base layer's chunk loop also stores the state entering every chunk to the
state_checkpoints output (checkpoints.py; the backward then skips its serial recompute,
NOTES_bwd.md v1.2); with write_values as well (FrostFwdPipelinedValues: two more pointers)
the chain also stores U per token, so the backward needs neither its states nor its values
kernel (v1.3). Shared memory, K = V = 128: KDA / GDN-2 223 KB, GDN 133 KB (see smem_plan).
"""
from __future__ import annotations

from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import cpasync

from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_rows
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fragment_stores import store_rows_vectorised
from cudnn.linear_attention.frost.kernels.fwd_mma import (
    CHUNK,
    GRAM_TILES,
    PAD16,
    SPAN_LIMIT,
    SUB,
    VEC,
    FrostFwdMma,
    load_vec,
)
from cudnn.linear_attention.frost.kernels.fwd_mma import smem_plan as mma_smem_plan
from cudnn.linear_attention.frost.kernels.gmem_views import _packed, operand_views


def smem_plan(c: FrostFwdConfig):
    """The base layer's plan plus e^Gam_last; vector gates: KE and the per-tile channel factors X;
    GDN-2 with K != V: a staging tensor for w (with K == V it is staged in kbr)."""
    K, C = c.K, CHUNK
    gk = K if c.gate_per_channel else 1
    plan = mma_smem_plan(c) + [("alast", "f32", (gk,), (1,))]
    if c.gate_per_channel:
        plan += [
            ("ke", "bf16", (C, K), (K + PAD16, 1)),                 # k e^(Gam_e(s) - Gam_s)
            ("xg", "f32", (len(GRAM_TILES), K), (K, 1)),            # X per Gram tile and channel
        ]
    if c.has_w and c.K != c.V:
        plan.append(("wst", "bf16", (C, c.V), (c.V + PAD16, 1)))    # staged w (io dtype)
    return plan


def gram_schedule(warps: int) -> tuple[int, ...]:
    """Owner warp of each GRAM_TILES entry: longest first onto the least-loaded warp, a
    diagonal tile (Gram tile + 16x16 inverse) costing two off-diagonal ones. 8 warps:
    the four diagonal tiles on warps 0-3, the six others two, two, one, one on warps 4-7."""
    cost = [2 if i == j else 1 for i, j in GRAM_TILES]
    load = [0] * warps
    owner = [0] * len(GRAM_TILES)
    for p in sorted(range(len(GRAM_TILES)), key=lambda p: (-cost[p], p)):
        w = min(range(warps), key=lambda w: (load[w], w))
        owner[p] = w
        load[w] += cost[p]
    return tuple(owner)


class FrostFwdPipelined(FrostFwdMma):
    """Callable for cute.compile; see the module docstring for what differs from v1."""

    smem_plan = staticmethod(smem_plan)
    OUTPUT_OPTIONAL = True  # write_output=False: no q prefetch, rows, operands or P (below)

    def __init__(self, cfg: FrostFwdConfig):
        super().__init__(cfg)
        self.owners = gram_schedule(self.warps)

    def gram_owner(self, p: int) -> int:
        return self.owners[p]

    #: True in the kernels that stage bf16 rows raw into SW128 tiles (the wgmma Gram, the
    #: scaled-decay chains): io_view must keep the tensor as it is there
    RAW_ROWS_SWIZZLED = False

    # ------------------------------------------------------------------ staging
    @cute.jit
    def io_view(self, t: cute.Tensor) -> cute.Tensor:
        """A bf16 shared tensor seen with the io element type (raw staged rows). With
        RAW_ROWS_SWIZZLED (bf16 io only) the tensor itself: the rows are bf16 already, and
        recast_ptr would drop an SW128 tile's swizzle (CuTe DSL 4.8)."""
        if cutlass.const_expr(self.RAW_ROWS_SWIZZLED):
            return t
        return cute.make_tensor(cute.recast_ptr(t.iterator, dtype=self.io), t.layout)

    @cute.jit
    def w_stage(self, s):
        if cutlass.const_expr(self.cfg.K == self.cfg.V):
            return s.kbr
        return s.wst

    @cute.jit
    def copy_or_zero(self, atom, src: cute.Tensor, t, head, width: cutlass.Constexpr, cv, dst: cute.Tensor, valid,
                     dtype):
        """cp.async of the cv-th width-element slice of global row src[t, head, :] into dst
        (shared) when valid, else zeros; the row's view is formed only when valid (rows past
        the sequence may lie past the tensor)."""
        if valid:
            cute.copy(atom, cute.local_tile(src[t, head, None], (width,), (cv,)), dst)
        else:
            z = cute.make_rmem_tensor((width,), dtype)
            z.fill(0.0)
            cute.autovec_copy(z, dst)

    @cute.jit
    def prefetch_rows_l2(self, rows, t0, eos, tid):
        """prefetch.global.L2 of the chunk's token rows [t0, min(t0 + C, eos)) of each
        (tensor, head, width) in `rows`, in 128-byte lines: thread tid takes row
        t0 + tid % C, and the line jobs of a row go round the CTA's threads // C quarters
        (thread tid is in quarter tid // C). A hint: nothing read changes."""
        t = t0 + tid % CHUNK
        part = tid // CHUNK
        jobs = []
        for src, head, width in rows:
            per_line = 128 * 8 // src.element_type.width  # elements in a 128-byte line
            jobs += [(src, head, off) for off in range(0, width, per_line)]
        if t < eos:
            for i, (src, head, off) in enumerate(jobs):
                if part == i % (self.threads // CHUNK):
                    cute.arch.prefetch((src[t, head, None].iterator + off).llvm_ptr, cache_level="L2")

    @cute.jit
    def copy_gate_rows_async(self, mg, h, s_g, t0, eos, tid, NT: cutlass.Constexpr):
        """cp.async (not committed) of the chunk's per-channel log-gate rows [C, K] (fp32)
        into s_g, zero past eos: 16-byte copies where the forward's alignment check found
        the gate rows 16-byte aligned (gate_align16), else 4-byte ones. s_g's rows are
        16-byte multiples (K + 4 floats)."""
        K, C = self.cfg.K, CHUNK
        if cutlass.const_expr(self.cfg.gate_align16):
            ag = cute.make_copy_atom(cpasync.CopyG2SOp(), Float32, num_bits_per_copy=128)
            vg = K // 4
            r0, cv = tid // vg, tid % vg
            for u in cutlass.range_constexpr(C * vg // NT):
                r = r0 + u * (NT // vg)
                self.copy_or_zero(ag, mg, t0 + r, h, 4, cv, cute.local_tile(s_g[r, None], (4,), (cv,)),
                                  t0 + r < eos, Float32)
        else:
            a4 = cute.make_copy_atom(cpasync.CopyG2SOp(), Float32, num_bits_per_copy=32)
            r0, d = tid // K, tid % K
            for u in cutlass.range_constexpr(C * K // NT):
                r = r0 + u * (NT // K)
                self.copy_or_zero(a4, mg, t0 + r, h, 1, d, cute.local_tile(s_g[r, None], (1,), (d,)),
                                  t0 + r < eos, Float32)

    @cute.jit
    def prefetch_rows(self, s, t0, eos, tid):
        """Issue the copies of chunk t0's q, k, gates, beta (GDN-2: b, w) rows; v is copied
        per warp by prefetch_v. Not committed: the caller commits and waits."""
        c = self.cfg
        K, V, C, NT = c.K, c.V, CHUNK, self.threads
        m = s.gmem
        hq, hk, hv, h = m.heads
        a16 = cute.make_copy_atom(cpasync.CopyG2SOp(), self.io, num_bits_per_copy=128)
        q_in = self.io_view(s.q)
        k_in = self.io_view(s.k)
        vr = K // VEC
        r0, cv = tid // vr, tid % vr  # (tid + u NT) // vr = r0 + u NT / vr: kept out of the loop
        for u in cutlass.range_constexpr(C * vr // NT):
            r = r0 + u * (NT // vr)
            ok = t0 + r < eos
            if cutlass.const_expr(c.write_output):  # q serves only the output
                self.copy_or_zero(a16, m.q, t0 + r, hq, VEC, cv, cute.local_tile(q_in[r, None], (VEC,), (cv,)), ok,
                                  self.io)
            self.copy_or_zero(a16, m.k, t0 + r, hk, VEC, cv, cute.local_tile(k_in[r, None], (VEC,), (cv,)), ok,
                              self.io)
            if cutlass.const_expr(c.beta_per_channel):  # GDN-2 erase gate b -> qr (dead until operands)
                self.copy_or_zero(a16, m.b, t0 + r, h, VEC, cv,
                                  cute.local_tile(self.io_view(s.qr)[r, None], (VEC,), (cv,)), ok, self.io)
        if cutlass.const_expr(c.has_w):
            w_in = self.io_view(self.w_stage(s))
            vv = V // VEC
            r0, cv = tid // vv, tid % vv
            for u in cutlass.range_constexpr(C * vv // NT):
                r = r0 + u * (NT // vv)
                self.copy_or_zero(a16, m.w, t0 + r, h, VEC, cv, cute.local_tile(w_in[r, None], (VEC,), (cv,)),
                                  t0 + r < eos, self.io)
        self.copy_gate_beta_rows(s, t0, eos, tid)

    def bulk_row_jobs(self, s) -> list:
        """prefetch_rows' rows as bulk_rows jobs (q where the output is written, k, GDN-2's
        b and w, the gate rows where 16-byte aligned), for the kernels that copy a chunk's
        rows by bulk copies (the backward chain's chain_bulk_rows, fwd_wgmma.FrostFwdWgmma.rows_by_bulk);
        copy_gate_beta_rows(gates=not gate_align16) copies the rest. Runs at trace time."""
        c = self.cfg
        m = s.gmem
        hq, hk, _, h = m.heads
        jobs = []
        if c.write_output:  # q serves only the output
            jobs.append((self.io_view(s.q), (m.q, hq, None), CHUNK, self.io))
        jobs.append((self.io_view(s.k), (m.k, hk, None), CHUNK, self.io))
        if c.beta_per_channel:  # GDN-2 erase gate b -> qr (dead until operands)
            jobs.append((self.io_view(s.qr), (m.b, h, None), CHUNK, self.io))
        if c.has_w:
            jobs.append((self.io_view(self.w_stage(s)), (m.w, h, None), CHUNK, self.io))
        if c.gate_align16:
            jobs.append((s.g, (m.g, h, None), CHUNK, Float32))
        return jobs

    @cute.jit
    def copy_gate_beta_rows(self, s, t0, eos, tid, gates: cutlass.Constexpr = True):
        """prefetch_rows' copies of chunk t0's gate rows (not with gates=False: the caller
        brought them otherwise) and scalar beta (cp.async, zero past eos, not committed)."""
        c = self.cfg
        C, NT = CHUNK, self.threads
        m = s.gmem
        h = m.heads[3]
        a4 = cute.make_copy_atom(cpasync.CopyG2SOp(), Float32, num_bits_per_copy=32)
        if cutlass.const_expr(gates and c.gate_per_channel):
            self.copy_gate_rows_async(m.g, h, s.g, t0, eos, tid, NT)
        if cutlass.const_expr(gates and not c.gate_per_channel):
            if tid < C:
                self.copy_or_zero(a4, m.g, t0 + tid, h, 1, 0, cute.local_tile(s.g[tid, None], (1,), (0,)),
                                  t0 + tid < eos, Float32)
        if cutlass.const_expr(not c.beta_per_channel):
            if tid >= C and tid < 2 * C:
                r = tid - C
                self.copy_or_zero(a4, m.b, t0 + r, h, 1, 0, cute.local_tile(s.beta, (1,), (r,)), t0 + r < eos,
                                  Float32)

    @cute.jit
    def prefetch_v(self, s, t0, eos, lane, wid):
        """This warp's 16 value columns of chunk t0's v rows into W0's slot (raw io)."""
        m = s.gmem
        hv = m.heads[2]
        a16 = cute.make_copy_atom(cpasync.CopyG2SOp(), self.io, num_bits_per_copy=128)
        v_in = self.io_view(s.w0)
        per_row = SUB // VEC
        r0, cv = lane // per_row, wid * per_row + lane % per_row
        for u in cutlass.range_constexpr(CHUNK * per_row // 32):
            r = r0 + u * (32 // per_row)
            self.copy_or_zero(a16, m.v, t0 + r, hv, VEC, cv, cute.local_tile(v_in[r, None], (VEC,), (cv,)),
                              t0 + r < eos, self.io)

    # ------------------------------------------------------- the base layer's extension points
    @cute.jit
    def before_chunks(self, s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid):
        """Keep the global views for the prefetches and stage the first chunk."""
        s.gmem = SimpleNamespace(q=mq, k=mk, v=mv, g=mg, b=mb, w=mw, heads=heads)
        if bos < eos:
            self.prefetch_rows(s, bos, eos, tid)
            self.prefetch_v(s, bos, eos, lane, wid)
            cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()

    #: True where chunk_chain issues prefetch_next_rows itself, at the point of its choosing
    #: (fwd_wgmma: once its first wgmma groups run); else stage_chain issues it first
    chain_issues_prefetch = False

    @cute.jit
    def stage_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """The base layer's chain with the next chunk's copies in flight; they land before the barrier
        that ends the chunk (the caller's sync_threads after this)."""
        if cutlass.const_expr(not self.chain_issues_prefetch):
            self.prefetch_next_rows(s, t0, eos, lane, wid)
        self.chunk_chain(s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid)
        cute.arch.cp_async_wait_group(0)

    @cute.jit
    def prefetch_next_rows(self, s, t0, eos, lane, wid):
        """The copies of the next chunk's rows (q, k, gates, beta; GDN-2 b, w) as one
        committed group, when there is a next chunk (v: after_rhs_reads)."""
        if t0 + CHUNK < eos:
            self.prefetch_rows(s, t0 + CHUNK, eos, wid * 32 + lane)
            cute.arch.cp_async_commit_group()

    @cute.jit
    def chunk_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """The chain that runs while the next chunk's copies are in flight: the base
        layer's (the wgmma layer and the backward's states kernel put theirs here)."""
        FrostFwdMma.stage_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid)

    @cute.jit
    def after_rhs_reads(self, s, heads, t0, eos, lane, wid):
        """This warp has read its W0 columns: their slot can take the next chunk's v."""
        if t0 + CHUNK < eos:
            cute.arch.sync_warp()  # every lane's W0 reads before any lane's copy lands
            self.prefetch_v(s, t0 + CHUNK, eos, lane, wid)
            cute.arch.cp_async_commit_group()

    # ------------------------------------------------------------------ checkpoints
    @cute.jit
    def store_state(self, mckpt: cute.Tensor, row, rows, h, acc_s, coord_s, wid):
        """This warp's 16 rows of S^T (the fp32 state registers) into mckpt[row, h] as bf16,
        when row < rows (the tensor's row count: a malformed cu_seqlens table may pack past
        it, and those rows are dropped); 16-byte stores after a quad exchange of the
        accumulator's column pairs (fragment_stores.py; the same values and roundings as
        one store per element)."""
        if row < rows:
            store_rows_vectorised(mckpt[row, h, None, None], acc_s, wid * SUB, cute.arch.lane_idx(), self.cfg.K)

    @cute.jit
    def state_decay(self, s, d):
        s_alast = s.alast
        if cutlass.const_expr(self.cfg.gate_per_channel):
            return s_alast[d]
        return s_alast[0]

    # ------------------------------------------------------------------ Gram dispatch
    def gram_slots(self) -> list[list[int]]:
        """GRAM_TILES indices each warp builds, in order (from gram_schedule)."""
        slots = [[] for _ in range(self.warps)]
        for p, w in enumerate(self.owners):
            slots[w].append(p)
        return slots

    @cute.jit
    def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
        """The base layer's Gram stage with the tile dispatched at run time: each warp loops
        over its own tiles (count and coordinates picked by warp index), running ONE copy of
        the tile code. The base layer unrolls all ten tiles behind `if wid == owner`, and
        ptxas if-converted about half of those bodies: every warp then issued every
        instruction of tiles it does not own (predicated off), ~3.8x the Gram stage's HMMA/LDSM/FMUL issue count (ncu source
        counters on the H200)."""
        c = self.cfg
        slots = self.gram_slots()
        count = Int32(len(slots[0]))
        for w in cutlass.range_constexpr(1, self.warps):
            if wid == w:
                count = Int32(len(slots[w]))
        for j in cutlass.range(count, unroll=1):
            bi = Int32(0)
            bj = Int32(0)
            for w in cutlass.range_constexpr(self.warps):
                for jj in cutlass.range_constexpr(len(slots[w])):
                    if wid == w and j == jj:
                        bi = Int32(GRAM_TILES[slots[w][jj]][0])
                        bj = Int32(GRAM_TILES[slots[w][jj]][1])
            if cutlass.const_expr(c.gate_per_channel):
                exact = False
                if bi == bj:
                    exact = self.block_span(s, bi, lane) >= SPAN_LIMIT
                if exact:
                    self.gram_tile_exact(s, mb, heads, t0, eos, bi, scale, lane)
                else:
                    self.gram_tile_mma(s, bi, bj, scale, thr, lane)
            else:
                self.gram_tile_mma(s, bi, bj, scale, thr, lane)
            if bi == bj:
                cute.arch.sync_warp()  # this warp's M_ii stores are visible to its lanes
                self.block_inverse(s, bi, lane)

    @cute.jit
    def store_gram(self, s, bi, bj, t, u, ts, mval, pval):
        """The base layer's store_gram with the diagonal test at run time (bi, bj are dynamic here)."""
        s_mneg = s.mneg
        s_p = s.p
        s_md = s.md
        s_mneg[t, u] = (-mval).to(BFloat16)
        if cutlass.const_expr(self.cfg.write_output):
            s_p[t, u] = pval.to(BFloat16)
        if bi == bj:
            s_md[bi, ts[0], ts[1]] = mval

    @cute.jit
    def gram_b_source(self, s, bi, bj, thr, lane):
        return self.operand(thr, lane, cute.local_tile(s.ke, (SUB, self.cfg.K), (bj, 0)), False)

    @cute.jit
    def gram_b_block(self, s, bi, bj, b_src, crd, kk):
        """KE_j's fragment times X_ij per channel: k_s e^(Gam_r_i - Gam_s)."""
        s_xg = s.xg
        p = bi * (bi + 1) // 2 + bj  # GRAM_TILES is the row-major lower triangle
        src = b_src[None, None, kk]
        b = cute.make_rmem_tensor(crd.shape, BFloat16)
        for e in cutlass.range_constexpr(cute.size(b)):
            b[e] = (src[e].to(Float32) * s_xg[p, crd[e][1]]).to(BFloat16)
        return b

    # ------------------------------------------------------------------ stages
    @cute.jit
    def stage_rows(self, s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid):
        """In place on the staged rows: q-hat, k-hat (bf16), W0 = beta v or w * v (bf16) and
        the inclusive gate scan. beta is already in s.beta."""
        self.rows_from(s, self.io_view(s.q), self.io_view(s.k), self.io_view(s.w0), tid)

    @cute.jit
    def rows_from(self, s, q_in, k_in, v_in, tid, values: cutlass.Constexpr = True):
        """The rows stage from the raw q, k, v rows q_in, k_in, v_in (io dtype; the in-place
        stage passes s.q, s.k, s.w0 themselves, the warp-specialised producer its private
        raw tiles): q-hat, k-hat into s.q, s.k, W0 into s.w0 (not with values=False: the
        full-inverse forward scales v where it reads it), the gate scan in s.g."""
        s_q = s.q
        s_k = s.k
        s_w0 = s.w0
        s_g = s.g
        s_beta = s.beta
        c = self.cfg
        K, V, C, NT = c.K, c.V, CHUNK, self.threads
        vr = K // VEC  # a row's slices on consecutive lanes (qk_hat reduces over them)
        r0, cv = tid // vr, tid % vr
        for u in cutlass.range_constexpr(C * vr // NT):
            r = r0 + u * (NT // vr)
            if cutlass.const_expr(c.write_output):
                xq = load_vec(cute.local_tile(q_in[r, None], (VEC,), (cv,)))
                xk = load_vec(cute.local_tile(k_in[r, None], (VEC,), (cv,)))
                yq, yk = self.qk_hat(xq, xk)
                cute.autovec_copy(yq, cute.local_tile(s_q[r, None], (VEC,), (cv,)))
                cute.autovec_copy(yk, cute.local_tile(s_k[r, None], (VEC,), (cv,)))
            else:  # no q: k-hat alone (bitwise qk_hat's)
                xk = load_vec(cute.local_tile(k_in[r, None], (VEC,), (cv,)))
                yk = self.k_hat(xk)
                cute.autovec_copy(yk, cute.local_tile(s_k[r, None], (VEC,), (cv,)))
        vv = V // VEC
        r0, cv = tid // vv, tid % vv
        for u in cutlass.range_constexpr(C * vv // NT if values else 0):
            r = r0 + u * (NT // vv)
            xv = load_vec(cute.local_tile(v_in[r, None], (VEC,), (cv,)))
            w0 = cute.make_rmem_tensor((VEC,), BFloat16)
            if cutlass.const_expr(c.has_w):
                xw = load_vec(cute.local_tile(self.io_view(self.w_stage(s))[r, None], (VEC,), (cv,)))
                for e in cutlass.range_constexpr(VEC):
                    w0[e] = (xv[e].to(Float32) * xw[e].to(Float32)).to(BFloat16)
            else:
                bt = s_beta[r]
                for e in cutlass.range_constexpr(VEC):
                    w0[e] = (xv[e].to(Float32) * bt).to(BFloat16)
            cute.autovec_copy(w0, cute.local_tile(s_w0[r, None], (VEC,), (cv,)))
        self.scan_gates_in_place(s_g, tid)

    @cute.jit
    def stage_operands(self, s, mb, heads, t0, eos, scale, tid):
        """The decay-folded bf16 operands; a warp takes 32 consecutive rows of one VEC slice.
        Where QA, -KBA and KD land is the class's (put_operands, store_operand_rows: here
        QA, -KBA row-major and KD^T; the backward's chain the other way round); then the
        decay tables."""
        s_q = s.q
        s_k = s.k
        s_g = s.g
        s_beta = s.beta
        c = self.cfg
        K, C, NT = c.K, CHUNK, self.threads
        reads_q = self.operands_read_q()
        if cutlass.const_expr(c.gate_per_channel):
            s_qr = s.qr
            s_kbr = s.kbr
            s_ke = s.ke
        else:
            s_qr = None
            s_kbr = None
            s_ke = None
        if cutlass.const_expr(c.beta_per_channel):
            b_in = self.io_view(s_qr)  # staged b: read here before qr overwrites it, same slice
        else:
            b_in = None
        vr = K // VEC
        r, cv0 = tid % C, tid // C
        for u in cutlass.range_constexpr(C * vr // NT):
            cv = cv0 + u * (NT // C)
            d0 = cv * VEC
            if cutlass.const_expr(reads_q):
                xq = load_vec(cute.local_tile(s_q[r, None], (VEC,), (cv,)))
            xk = load_vec(cute.local_tile(s_k[r, None], (VEC,), (cv,)))
            if cutlass.const_expr(c.beta_per_channel):
                xb = load_vec(cute.local_tile(b_in[r, None], (VEC,), (cv,)))
            else:
                xb = None
            # the three operands' row registers (only those put_operands fills are traced)
            regs = tuple(cute.make_rmem_tensor((VEC,), BFloat16) for _ in range(3))
            qr = cute.make_rmem_tensor((VEC,), BFloat16)
            kbr = cute.make_rmem_tensor((VEC,), BFloat16)
            ke = cute.make_rmem_tensor((VEC,), BFloat16)
            bt = Float32(0.0)
            if cutlass.const_expr(not c.beta_per_channel):  # GDN-2 never stages s_beta
                bt = s_beta[r]
            if cutlass.const_expr(c.gate_per_channel):
                gt = load_vec(cute.local_tile(s_g[r, None], (VEC,), (cv,)))
                gl = load_vec(cute.local_tile(s_g[C - 1, None], (VEC,), (cv,)))
                gr = load_vec(cute.local_tile(s_g[(r // SUB) * SUB, None], (VEC,), (cv,)))
                ge = load_vec(cute.local_tile(s_g[(r // SUB) * SUB + SUB - 1, None], (VEC,), (cv,)))
                a_row = Float32(1.0)
                kd_row = Float32(1.0)
            else:
                gt = None
                gl = None
                gr = None
                ge = None
                a_row = cute.arch.exp(s_g[r, 0])
                kd_row = cute.arch.exp(s_g[C - 1, 0] - s_g[r, 0])
            for e in cutlass.range_constexpr(VEC):
                qv = None
                if cutlass.const_expr(reads_q):
                    qv = xq[e].to(Float32)
                kv = xk[e].to(Float32)
                if cutlass.const_expr(c.beta_per_channel):
                    kb = kv * xb[e].to(Float32)
                else:
                    kb = kv * bt
                a = a_row
                kdf = kd_row
                if cutlass.const_expr(c.gate_per_channel):
                    gam = gt[e]
                    a = cute.arch.exp(gam)
                    kdf = cute.arch.exp(gl[e] - gam)
                    rel = cute.arch.exp(gam - gr[e])
                    if cutlass.const_expr(reads_q):
                        qr[e] = (qv * rel).to(BFloat16)
                    kbr[e] = (kb * rel).to(BFloat16)
                    ke[e] = (kv * cute.arch.exp(ge[e] - gam)).to(BFloat16)
                self.put_operands(s, regs, d0, e, r, qv, kb, kv, a, kdf, scale)
            self.store_operand_rows(s, regs, r, cv)
            if cutlass.const_expr(c.gate_per_channel):
                if cutlass.const_expr(reads_q):
                    cute.autovec_copy(qr, cute.local_tile(s_qr[r, None], (VEC,), (cv,)))
                cute.autovec_copy(kbr, cute.local_tile(s_kbr[r, None], (VEC,), (cv,)))
                cute.autovec_copy(ke, cute.local_tile(s_ke[r, None], (VEC,), (cv,)))
        self.decay_tables(s, tid)

    def operands_read_q(self) -> bool:
        """Whether the operand stage forms QA (and, vector gates, q's Gram rows): not in a
        forward without an output (q is not even loaded)."""
        return self.cfg.write_output

    @cute.jit
    def put_operands(self, s, regs, d0, e, r, qv, kb, kv, a, kdf, scale):
        """Element e of row r's QA, -KBA (into regs, stored as rows after the slice) and KD
        (straight into KD^T's column r)."""
        qa, kba, _ = regs
        if cutlass.const_expr(self.operands_read_q()):
            qa[e] = (qv * a * scale).to(BFloat16)
        kba[e] = (-(kb * a)).to(BFloat16)
        s.kdt[d0 + e, r] = (kv * kdf).to(BFloat16)

    @cute.jit
    def store_operand_rows(self, s, regs, r, cv):
        """Row r's slice cv of QA and -KBA, one vector store each."""
        qa, kba, _ = regs
        if cutlass.const_expr(self.operands_read_q()):
            cute.autovec_copy(qa, cute.local_tile(s.qa[r, None], (VEC,), (cv,)))
        cute.autovec_copy(kba, cute.local_tile(s.kba[r, None], (VEC,), (cv,)))

    @cute.jit
    def decay_tables(self, s, tid):
        """e^Gam_last and (vector gates) the per-tile channel factors X."""
        s_g = s.g
        s_alast = s.alast
        c = self.cfg
        K, C, NT = c.K, CHUNK, self.threads
        if cutlass.const_expr(c.gate_per_channel):
            s_xg = s.xg
            if tid < K:
                s_alast[tid] = cute.arch.exp(s_g[C - 1, tid])
            groups = NT // K  # thread group j = tid // K makes X for the tiles p = j mod groups
            for p in cutlass.range_constexpr(len(GRAM_TILES)):
                bi, bj = GRAM_TILES[p]
                if tid // K == p % groups:
                    d = tid % K
                    s_xg[p, d] = cute.arch.exp(s_g[bi * SUB, d] - s_g[bj * SUB + SUB - 1, d])
        else:
            if tid == 0:
                s_alast[0] = cute.arch.exp(s_g[C - 1, 0])


class FrostFwdPipelinedCheckpoints(FrostFwdPipelined):
    """FrostFwdPipelined compiled with write_checkpoints: the same kernel (the base layer's
    chunk loop stores the fp32 state registers, as bf16, to the state_checkpoints row of
    each chunk before the chunk runs), launched through the ABI with the extra state_checkpoints pointer."""

    def __init__(self, cfg: FrostFwdConfig):
        if not cfg.write_checkpoints:
            raise ValueError("FrostFwdPipelinedCheckpoints: the config must have write_checkpoints=True")
        super().__init__(cfg)

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_g: cute.Pointer,
                 p_beta: cute.Pointer, p_w: cute.Pointer, p_cu: cute.Pointer, p_out: cute.Pointer,
                 p_h0: cute.Pointer, p_ht: cute.Pointer, p_ckpt: cute.Pointer, T: Int32, N: Int32,
                 scale: Float32, stream: cuda.CUstream):
        m = operand_views(self.cfg, p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, T, N)
        ckpt = _packed(p_ckpt, (checkpoint_rows(T, N), self.cfg.HO, self.cfg.V, self.cfg.K))
        # no values operand in this ABI: the kernel's slot gets a view it never touches
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu, m.out, m.h0, m.ht, ckpt, m.out, scale, T, N).launch(
            grid=self.grid(N), block=[self.block_threads, 1, 1], stream=stream)


class FrostFwdPipelinedValues(FrostFwdPipelined):
    """FrostFwdPipelined compiled with write_checkpoints and write_values: the checkpoint kernel whose chain
    also stores U per token (fwd_mma.store_values_block, the backward states kernel's store),
    launched through the ABI with state_checkpoints and values last. The training forward:
    the backward then runs only its chain and grads kernels (NOTES_bwd.md v1.3)."""

    def __init__(self, cfg: FrostFwdConfig):
        if not (cfg.write_checkpoints and cfg.write_values):
            raise ValueError("FrostFwdPipelinedValues: the config must have write_checkpoints=True and write_values=True")
        super().__init__(cfg)

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_g: cute.Pointer,
                 p_beta: cute.Pointer, p_w: cute.Pointer, p_cu: cute.Pointer, p_out: cute.Pointer,
                 p_h0: cute.Pointer, p_ht: cute.Pointer, p_ckpt: cute.Pointer, p_u: cute.Pointer, T: Int32,
                 N: Int32, scale: Float32, stream: cuda.CUstream):
        c = self.cfg
        m = operand_views(c, p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, T, N)
        ckpt = _packed(p_ckpt, (checkpoint_rows(T, N), c.HO, c.V, c.K))
        u = _packed(p_u, (T, c.HO, c.V))
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu, m.out, m.h0, m.ht, ckpt, u, scale, T, N).launch(
            grid=self.grid(N), block=[self.block_threads, 1, 1], stream=stream)
