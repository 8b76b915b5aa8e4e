"""FROST forward, base layer: the fused chunked kernel on warp-level tensor cores (mma.sync bf16 -> fp32).

One CTA per (sequence, output head) owns the whole value width (BV = V, 2V threads: one
warp per 16 value columns); one more grid row of N CTAs only zeroes the output rows no
sequence covers (FrostFwdMma.grid). It walks the sequence's chunks of C = 64 tokens; per
chunk:

1. rows      q-hat, k-hat (16-byte loads, L2 norms reduced across the lanes of a row),
             the write term W0 = beta v or w*v, beta, the cumulative log gate Gam
             (per-channel scan, one thread per key channel; scalar gates: shuffle scan);
2. operands  bf16 MMA operands with every decay folded in (all factors <= 1):
             QA = scale q e^Gam, KBA = -kb e^Gam, KDt = (k e^(Gam_last - Gam))^T and, for
             vector gates, the Gram A sides QR, KBR = (q, kb) e^(Gam_t - Gam_r(t)), r(t) = the
             first row of t's 16-row block;
3. Gram      M (strictly lower) and P (lower with diagonal, scaled) per 16x16 block pair on
             tensor cores; vector gates factor e^(Gam_t - Gam_s) = e^(Gam_t - Gam_r) e^(Gam_r - Gam_s)
             (B side built in registers), a diagonal block whose decay span exceeds
             SPAN_LIMIT nats falls back to the exact pairwise sum; scalar gates apply
             beta_t e^(Gam_t - Gam_s) in the epilogue;
             The warp that builds a diagonal block M_ii then inverts I + M_ii (a lane per
             column of the 16x16 unit-lower inverse Dinv_i);
4. chain     per warp, in registers, on its 16 value columns j (transposed: S^T [16, K]):
             R^T = W0^T - S^T KBA^T, O^T = S^T QA^T, block forward substitution
             U_i = Dinv_i (R_i - sum_{j<i} M_ij U_j), O^T += U^T P^T (stored), and
             S^T <- S^T Diag(e^Gam_last) + U^T KD.

The state S^T lives in the MMA accumulator registers for the whole sequence (fp32); its
bf16 copy feeds the next chunk's products directly as the A operand (an accumulator of
m16n8 tiles is, element for element, the A operand of m16n8k16: checked by
frost_compile_test). The algebra is engines_frost/tests/frost_chunk_model.py with
decay_mode="factored" (blocked solve). Padded rows of a partial chunk load as zero.
Sequence bounds are clamped into [0, T] and rows no sequence covers are zeroed (by the
extra grid row's CTAs), whatever cu_seqlens holds (seq_bounds.py).

The product never launches FrostFwdMma itself: it is the base class of the pipelined layer
(fwd_pipelined.py, the product kernel on archs other than sm_90a; fwd_wgmma.py builds on
that) and of the backward kernels, and this module holds the tile constants and MMA helpers
they share; the test and bench tooling still builds this layer on its own ("mma",
engines_frost/tests/frost_fwd_experiments.py) to compare against.
"""
from __future__ import annotations

from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, Int64
from cutlass.cute.nvgpu import warp

from cudnn.linear_attention.frost.kernels.checkpoints_dsl import packed_row0
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.gmem_views import operand_views
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds, zero_uncovered_heads

CHUNK = 64
SUB = 16  # rows per block: the MMA M extent and the decay-factorisation block
NBLK = CHUNK // SUB
SPAN_LIMIT = 80.0  # nats: e^80 is far from the fp32/bf16 overflow at e^88
VEC = 8  # bf16/fp16 elements per 16-byte vector access
PAD16 = 8  # bf16 row padding (16 bytes): conflict-free fragment loads, aligned rows
GRAM_TILES = [(i, j) for i in range(NBLK) for j in range(i + 1)]
SMEM_LIMIT = 227 * 1024  # sm_90 opt-in shared memory per block
_DTYPES = {"bf16": BFloat16, "f32": Float32, "i32": Int32, "i64": Int64}


def smem_plan(c: FrostFwdConfig):
    """Shared-memory tensors of one CTA: (name, dtype, shape, stride), allocated in order."""
    K, BV, C = c.K, c.V, CHUNK
    gk = K if c.gate_per_channel else 1

    def rows(name, dtype, r, cols, pad):
        return (name, dtype, (r, cols), (cols + pad, 1))

    plan = [
        rows("q", "bf16", C, K, PAD16),      # q-hat (scalar gates: the P Gram A side)
        rows("k", "bf16", C, K, PAD16),      # k-hat
        rows("w0", "bf16", C, BV, PAD16),    # beta v or w * v
        rows("g", "f32", C, gk, 4 if gk > 1 else 0),  # cumulative log gate
        rows("qa", "bf16", C, K, PAD16),     # scale q e^Gam
        rows("kba", "bf16", C, K, PAD16),    # -kb e^Gam
        rows("kdt", "bf16", K, C, PAD16),    # (k e^(Gam_last - Gam))^T
        rows("mneg", "bf16", C, C, PAD16),   # -M (its strictly lower blocks are read)
        rows("p", "bf16", C, C, PAD16),      # P (scaled, lower)
        ("md", "f32", (NBLK, SUB, SUB), (SUB * 17, 17, 1)),     # diagonal blocks of M
        ("dinv", "bf16", (NBLK, SUB, SUB), (SUB * 24, 24, 1)),  # their (I + M_ii)^-1
        ("beta", "f32", (C,), (1,)),
    ]
    if c.gate_per_channel:
        plan += [
            rows("qr", "bf16", C, K, PAD16),   # q e^(Gam_t - Gam_r(t))
            rows("kbr", "bf16", C, K, PAD16),  # kb e^(Gam_t - Gam_r(t))
        ]
    return plan


# A plan entry whose stride is SW128 is a bf16 [rows, cols] tile in the 128-byte swizzled
# K-major layout warpgroup MMA (WGMMA) reads its shared-memory operands in (cols: the
# contiguous K extent, cols * 2 bytes a multiple of 128); 1024-byte aligned. fwd_wgmma uses it.
SW128 = "sw128"
SW128_ALIGN = 1024
# The same with the 64-byte swizzle (8-row x 32-column atoms, cols * 2 a multiple of 64):
# the grads kernel's S and dS at K = 64, read by wgmma as 32-channel MN-major B operands.
SW64 = "sw64"
SWIZZLED = (SW128, SW64)


def smem_bytes(c: FrostFwdConfig, plan=smem_plan) -> int:
    """Bytes a plan (smem_plan or a derived kernel's) occupies, allocated in order: each
    tensor starts 16-byte aligned (SW128 tiles 1024-byte aligned: the padding is counted)."""
    total = 0
    for _, dtype, shape, stride in plan(c):
        if stride in SWIZZLED:
            total = -(-total // SW128_ALIGN) * SW128_ALIGN + shape[0] * shape[1] * 2
            continue
        span = 1 + sum((extent - 1) * st for extent, st in zip(shape, stride))
        total += -(-span * (2 if dtype == "bf16" else 4) // 16) * 16
    return total


def sw128_layout(shape, kind: str = SW128):
    """The SW128 layout of a bf16 [rows, cols] tile: the 8-row x 64-column swizzle atom
    tiled rows first (the canonical K-major WGMMA operand layout), as a composed layout.
    kind SW64: the 8-row x 32-column atom of the 64-byte swizzle, tiled the same way."""
    from cutlass.cute.nvgpu import warpgroup

    atom_kind = warpgroup.SmemLayoutAtomKind.K_SW128 if kind == SW128 else warpgroup.SmemLayoutAtomKind.K_SW64
    atom = warpgroup.make_smem_layout_atom(atom_kind, BFloat16)
    return cute.tile_to_shape(atom, shape, order=(0, 1))


def allocate_smem(plan) -> SimpleNamespace:
    """The shared tensors of a plan (smem_plan's format) by name; called while a kernel is
    traced. SW128 tiles carry their swizzle in the pointer (what WGMMA's operand
    descriptors are built from); indexing them goes through the swizzle as usual."""
    smem = cutlass.memory.SmemAllocator()
    s = SimpleNamespace()
    for name, dtype, shape, stride in plan:
        if stride in SWIZZLED:
            sw = sw128_layout(shape, stride)
            setattr(s, name, smem.allocate_tensor(BFloat16, sw.outer, SW128_ALIGN, swizzle=sw.inner))
            continue
        setattr(s, name, smem.allocate_tensor(_DTYPES[dtype], cute.make_layout(shape, stride=stride), 16))
    return s


def warp_mma():
    """The single-warp tiled MMA every stage uses: m16n8k16 bf16, fp32 accumulate, N tile 16."""
    op = warp.MmaF16BF16Op(BFloat16, Float32, (16, 8, 16))
    return cute.make_tiled_mma(op, (1, 1, 1), permutation_mnk=(SUB, 16, 16))


class FrostFwdMma:
    """Callable for cute.compile (host launcher in __call__, device code in kernel()).

    fwd_pipelined.FrostFwdPipelined derives from it; the methods marked "extension point" are where it
    differs (no-ops or this layer's choice here)."""

    smem_plan = staticmethod(smem_plan)
    # Experiment knobs, read at trace time and left at these values by the product (and by
    # the backward kernels that derive from this class); only the test and bench tooling's
    # subclasses set others (engines_frost/tests/frost_fwd_experiments.py, keyed there):
    # per-chunk stages compiled out of the loop ("rows", "operands", "gram", "chain"; and
    # "bounds", the cu_seqlens safety of seq_bounds.py), so the results are wrong and only
    # timings mean something; and element-wise shared-memory operand loads instead of ldmatrix.
    skip_stages: tuple[str, ...] = ()
    ldmatrix: bool = True
    #: True: the chain leaves the state registers final (mma, pipelined); False: its last products
    #: are still in flight until settle_state (fwd_wgmma), so the checkpoint store of the state
    #: entering a chunk runs after that chunk's rows stage instead of before it
    STATE_FINAL_AT_CHAIN_END = True
    #: whether this class compiles write_output=False configs (FrostFwdConfig): the
    #: pipelined and wgmma layers do (their rows, operand and Gram stages drop the q side);
    #: this layer's own stages do not
    OUTPUT_OPTIONAL = False

    def __init__(self, cfg: FrostFwdConfig):
        if not cfg.write_output and not self.OUTPUT_OPTIONAL:
            raise ValueError(f"{type(self).__name__}: write_output=False is compiled by the pipelined "
                             f"and wgmma forwards only")
        self.cfg = cfg
        self.io = cutlass_dtype(cfg.io_dtype)
        self.st = cutlass_dtype(cfg.state_dtype) if cfg.state_dtype else Float32
        self.bv = cfg.V
        self.warps = self.bv // SUB
        self.threads = 32 * self.warps
        used = smem_bytes(cfg, self.smem_plan)
        if used > SMEM_LIMIT:
            raise ValueError(f"{type(self).__name__}: {used} bytes of shared memory exceed {SMEM_LIMIT} for {cfg}")

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_g: cute.Pointer,
                 p_beta: cute.Pointer, p_w: cute.Pointer, p_cu: cute.Pointer, p_out: cute.Pointer,
                 p_h0: cute.Pointer, p_ht: cute.Pointer, T: Int32, N: Int32, scale: Float32,
                 stream: cuda.CUstream):
        m = operand_views(self.cfg, p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, T, N)
        # no checkpoint or values operand in this ABI: the kernel's slots for them get views
        # it never touches (write_checkpoints / write_values are off; fwd_pipelined's
        # FrostFwdPipelinedCheckpoints and FrostFwdPipelinedValues pass the real ones)
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu, m.out, m.h0, m.ht, m.ht, m.out, scale, T, N).launch(
            grid=self.grid(N), block=[self.block_threads, 1, 1], stream=stream)

    @property
    def block_threads(self) -> int:
        """Threads per CTA at launch: self.threads, the ones the stages are written for
        (fwd_ws: more, in roles)."""
        return self.threads

    def grid(self, N):
        """One CTA per (sequence n, output head h): [N, HO] CTAs, plus one more row of N
        CTAs (blockIdx.y == HO, the last ones launched) that only zero the output rows no
        sequence covers (seq_bounds.zero_uncovered_heads), unless the bounds are compiled
        out. Kept off the chunk loop's CTAs: zeroing code on that path changed the
        registers ptxas gave the loop (GDN 172 instead of 233, NOTES.md)."""
        return [N, self.cfg.HO + (0 if "bounds" in self.skip_stages or not self.cfg.write_output else 1), 1]

    # ------------------------------------------------------------------ kernel
    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor,
               mb: cute.Tensor, mw: cute.Tensor, mcu: cute.Tensor, mo: cute.Tensor,
               mh0: cute.Tensor, mht: cute.Tensor, mckpt: cute.Tensor, mu: cute.Tensor, scale: Float32, T: Int32,
               N: Int32):
        c = self.cfg
        n, h, _ = cute.arch.block_idx()
        s = allocate_smem(self.smem_plan(c))
        s.values = mu  # U per token, stored by the chain under write_values (a pipelined training forward)
        if cutlass.const_expr("bounds" in self.skip_stages or not c.write_output):  # no zeroing row
            self.sequence(s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h)
        else:
            if h < c.HO:
                self.sequence(s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h)
            else:  # the grid's zeroing row: warp 0 of CTA n zeroes heads n, n + N, ...
                lane = cute.arch.lane_idx()
                wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
                if wid == 0:
                    zero_uncovered_heads(mcu, N, T, mo, c.HO, c.V, n, N, lane)

    @cute.jit
    def sequence(self, s, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor,
                 mb: cute.Tensor, mw: cute.Tensor, mcu: cute.Tensor, mo: cute.Tensor, mh0: cute.Tensor,
                 mht: cute.Tensor, mckpt: cute.Tensor, scale: Float32, T: Int32, N: Int32, n, h):
        """Sequence n's chunks on output head h: the state from mh0 (or zero), every chunk's
        stages, the final state into mht."""
        c = self.cfg
        C = CHUNK
        tid, _, _ = cute.arch.thread_idx()
        heads = c.heads_of(h)

        mma = warp_mma()
        lane = cute.arch.lane_idx()
        wid = cute.arch.warp_idx()
        wid = cute.arch.make_warp_uniform(wid)
        thr = mma.get_slice(lane)

        acc_s, coord_s = self.initial_state(mh0, n, h, thr, wid)

        skip = self.skip_stages  # empty except in timing experiments (the class's knobs)
        if cutlass.const_expr("bounds" in skip):  # timing the safety: the table as it is
            bos, eos = mcu[n], mcu[n + 1]
        else:
            bos, eos = sequence_bounds(mcu, n, T)  # inside [0, T] whatever cu_seqlens holds
        self.before_chunks(s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid)
        row0 = Int32(0)
        if cutlass.const_expr(c.write_checkpoints):
            row0 = packed_row0(mcu, n, T, lane)  # checkpoints_dsl.py
        final_early = self.STATE_FINAL_AT_CHAIN_END
        for t0 in cutlass.range(bos, eos, C):
            # the state entering this chunk, as soon as the state registers are final
            if cutlass.const_expr(c.write_checkpoints and final_early):
                self.store_state(mckpt, row0 + (t0 - bos) // C, T // C + N, h, acc_s, coord_s, wid)
            if cutlass.const_expr("rows" not in skip):
                self.stage_rows(s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid)
            self.settle_state()
            cute.arch.sync_threads()
            if cutlass.const_expr(c.write_checkpoints and not final_early):
                self.store_state(mckpt, row0 + (t0 - bos) // C, T // C + N, h, acc_s, coord_s, wid)
            if cutlass.const_expr("operands" not in skip):
                self.stage_operands(s, mb, heads, t0, eos, scale, tid)
            cute.arch.sync_threads()
            if cutlass.const_expr("gram" not in skip):
                self.stage_gram(s, mb, heads, t0, eos, scale, thr, lane, wid)
            cute.arch.sync_threads()
            if cutlass.const_expr("chain" not in skip):
                self.stage_chain(s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid)
            cute.arch.sync_threads()

        self.settle_state()
        if cutlass.const_expr(c.has_final_state):
            coord_ht = self.final_state_coords(coord_s)
            for e in cutlass.range_constexpr(cute.size(acc_s)):
                jd = coord_ht[e]
                mht[n, h, wid * SUB + jd[0], jd[1]] = acc_s[e].to(self.st)

    def initial_state(self, mh0, n, h, thr, wid):
        """(acc_s, coord_s): this warp's rows j in [16 wid, 16 wid + 16) of S^T, all K
        columns, as the persistent fp32 state registers (from mh0[n, h], or zero without an
        initial state) and their (row, column) coordinates. Traced inline; every kernel that
        carries the state starts here (fwd_ws, the backward's states kernel)."""
        acc_s = cute.make_rmem_tensor(thr.partition_shape_C((SUB, self.cfg.K)), Float32)
        coord_s = thr.partition_C(cute.make_identity_tensor((SUB, self.cfg.K)))
        for e in range(cute.size(acc_s)):  # traced inline (a plain method): a Python loop
            val = Float32(0.0)
            if self.cfg.has_initial_state:
                jd = coord_s[e]
                val = mh0[n, h, wid * SUB + jd[0], jd[1]].to(Float32)
            acc_s[e] = val
        return acc_s, coord_s

    @cute.jit
    def settle_state(self):
        """Extension point (here: nothing; this chain leaves the state registers final): the
        state registers and the operand tiles the chain's last products read are settled
        after this, which runs at the end of each chunk's rows stage, before its barrier
        (the operand stage then rewrites those tiles), and after the chunk loop. fwd_wgmma
        retires its state update here, so the update runs under the rows stage."""
        pass

    def final_state_coords(self, coord_s):
        """Extension point (traced inline): the state registers' coordinates for the final
        state's stores (here: coord_s itself). fwd_wgmma_gram recomputes them after the loop so
        the store offsets are not the initial state's, kept live across the chunk loop."""
        return coord_s

    @cute.jit
    def before_chunks(self, s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid):
        """Extension point before the chunk loop (here: nothing)."""
        pass

    @cute.jit
    def operand(self, thr, lane, tile: cute.Tensor, is_a: cutlass.Constexpr) -> cute.Tensor:
        """Registers holding an MMA operand tile from shared memory: A [16, Kt] or B [N, Kt]
        (rows Kt-contiguous), every k-block, as (values, M or N, k-block). ldmatrix.x4 by
        default; element-wise copies of the MMA partition when self.ldmatrix is False."""
        if cutlass.const_expr(is_a):
            frag = thr.make_fragment_A(thr.partition_A(tile))
        else:
            frag = thr.make_fragment_B(thr.partition_B(tile))
        if cutlass.const_expr(self.ldmatrix):
            atom = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, 4), BFloat16)
            mma = warp_mma()
            if cutlass.const_expr(is_a):
                copy = cute.make_tiled_copy_A(atom, mma)
            else:
                copy = cute.make_tiled_copy_B(atom, mma)
            thr_copy = copy.get_slice(lane)
            cute.copy(copy, thr_copy.partition_S(tile), thr_copy.retile(frag))
        else:
            if cutlass.const_expr(is_a):
                cute.autovec_copy(thr.partition_A(tile), frag)
            else:
                cute.autovec_copy(thr.partition_B(tile), frag)
        return frag

    # ------------------------------------------------------------------ stages
    @cute.jit
    def stage_rows(self, s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid):
        """q-hat, k-hat rows (16-byte vector loads; the L2 norm reduced over the lanes that
        hold a row), W0 = beta v or w * v, beta, and the inclusive gate scan (vector gates:
        thread d owns channel d; scalar gates: a warp shuffle scan). Rows >= eos are zero."""
        s_q = s.q
        s_k = s.k
        s_w0 = s.w0
        s_g = s.g
        s_beta = s.beta
        c = self.cfg
        K, BV, C, NT = c.K, self.bv, CHUNK, self.threads
        hq, hk, hv, h = heads
        vr = K // VEC  # vectors per q/k row = lanes sharing a row's norm
        for u in cutlass.range_constexpr(C * vr // NT):
            vid = tid + u * NT
            r = vid // vr
            cv = vid % vr
            xq = cute.make_rmem_tensor((VEC,), self.io)
            xk = cute.make_rmem_tensor((VEC,), self.io)
            xq.fill(0.0)
            xk.fill(0.0)
            if t0 + r < eos:
                cute.autovec_copy(cute.local_tile(mq[t0 + r, hq, None], (VEC,), (cv,)), xq)
                cute.autovec_copy(cute.local_tile(mk[t0 + r, hk, None], (VEC,), (cv,)), xk)
            yq, yk = self.qk_hat(xq, xk)
            cute.autovec_copy(yq, cute.local_tile(s_q[r, None], (VEC,), (cv,)))
            cute.autovec_copy(yk, cute.local_tile(s_k[r, None], (VEC,), (cv,)))
        vv = BV // VEC
        for u in cutlass.range_constexpr(C * vv // NT):
            vid = tid + u * NT
            r = vid // vv
            cv = vid % vv
            xv = cute.make_rmem_tensor((VEC,), self.io)
            xw = cute.make_rmem_tensor((VEC,), self.io)
            xv.fill(0.0)
            xw.fill(0.0)
            bt = Float32(0.0)
            if t0 + r < eos:
                cute.autovec_copy(cute.local_tile(mv[t0 + r, hv, None], (VEC,), (cv,)), xv)
                if cutlass.const_expr(c.has_w):
                    cute.autovec_copy(cute.local_tile(mw[t0 + r, h, None], (VEC,), (cv,)), xw)
                else:
                    bt = mb[t0 + r, h, 0]
            w0 = cute.make_rmem_tensor((VEC,), BFloat16)
            for e in cutlass.range_constexpr(VEC):
                if cutlass.const_expr(c.has_w):
                    w0[e] = (xv[e].to(Float32) * xw[e].to(Float32)).to(BFloat16)
                else:
                    w0[e] = (xv[e].to(Float32) * bt).to(BFloat16)
            cute.autovec_copy(w0, cute.local_tile(s_w0[r, None], (VEC,), (cv,)))
        if tid < C:
            bv = Float32(0.0)
            if cutlass.const_expr(not c.beta_per_channel):
                if t0 + tid < eos:
                    bv = mb[t0 + tid, h, 0]
            s_beta[tid] = bv
        if cutlass.const_expr(not c.gate_per_channel):
            if tid < 32:  # warp 0: inclusive scan of the 64 scalar gates, two rows per lane
                ga, gb = self.gate_pair(mg, h, t0, eos, tid)
                self.scalar_gate_scan(s_g, ga, gb, tid)
        if cutlass.const_expr(c.gate_per_channel):
            if tid < K:
                acc = Float32(0.0)
                for r in cutlass.range_constexpr(C):
                    gv = Float32(0.0)
                    if t0 + r < eos:
                        gv = mg[t0 + r, h, tid]
                    acc = acc + gv
                    s_g[r, tid] = acc

    @cute.jit
    def qk_hat(self, xq: cute.Tensor, xk: cute.Tensor):
        """bf16 q-hat, k-hat of one VEC slice of a q and a k row (io dtype registers): with
        use_l2norm, the squared norms are summed over the K/VEC consecutive lanes that hold
        the row (the caller maps a row's slices to consecutive lanes)."""
        vr = self.cfg.K // VEC
        inv_q = Float32(1.0)
        inv_k = Float32(1.0)
        if cutlass.const_expr(self.cfg.use_l2norm):
            ssq = Float32(0.0)
            ssk = Float32(0.0)
            for e in cutlass.range_constexpr(VEC):
                ssq = ssq + xq[e].to(Float32) * xq[e].to(Float32)
                ssk = ssk + xk[e].to(Float32) * xk[e].to(Float32)
            ssq = cute.arch.warp_reduction(ssq, lambda a, b: a + b, threads_in_group=vr)
            ssk = cute.arch.warp_reduction(ssk, lambda a, b: a + b, threads_in_group=vr)
            inv_q = cute.math.rsqrt(ssq + Float32(1e-6))
            inv_k = cute.math.rsqrt(ssk + Float32(1e-6))
        yq = cute.make_rmem_tensor((VEC,), BFloat16)
        yk = cute.make_rmem_tensor((VEC,), BFloat16)
        for e in cutlass.range_constexpr(VEC):
            yq[e] = (xq[e].to(Float32) * inv_q).to(BFloat16)
            yk[e] = (xk[e].to(Float32) * inv_k).to(BFloat16)
        return yq, yk

    @cute.jit
    def k_hat(self, xk: cute.Tensor):
        """qk_hat's k half alone (write_output=False: no q): the same operations on xk in
        the same order, so k-hat is bitwise qk_hat's."""
        vr = self.cfg.K // VEC
        inv_k = Float32(1.0)
        if cutlass.const_expr(self.cfg.use_l2norm):
            ssk = Float32(0.0)
            for e in cutlass.range_constexpr(VEC):
                ssk = ssk + xk[e].to(Float32) * xk[e].to(Float32)
            ssk = cute.arch.warp_reduction(ssk, lambda a, b: a + b, threads_in_group=vr)
            inv_k = cute.math.rsqrt(ssk + Float32(1e-6))
        yk = cute.make_rmem_tensor((VEC,), BFloat16)
        for e in cutlass.range_constexpr(VEC):
            yk[e] = (xk[e].to(Float32) * inv_k).to(BFloat16)
        return yk

    @cute.jit
    def scan_gates_in_place(self, s_g, tid):
        """The chunk's staged log gates s_g [C, K or 1] turned into their inclusive scan over
        the rows: vector gates, thread d < K scans channel d; scalar gates, warp 0
        (scalar_gate_scan). No barrier: the caller's stage ends with one."""
        if cutlass.const_expr(self.cfg.gate_per_channel):
            if tid < self.cfg.K:
                acc = Float32(0.0)
                for r in cutlass.range_constexpr(CHUNK):
                    acc = acc + s_g[r, tid]
                    s_g[r, tid] = acc
        else:
            if tid < 32:
                self.scalar_gate_scan(s_g, s_g[2 * tid, 0], s_g[2 * tid + 1, 0], tid)

    @cute.jit
    def scalar_gate_scan(self, s_g, ga, gb, tid):
        """Warp 0 (tid < 32): inclusive scan of the chunk's 64 scalar log gates, lane tid
        holding rows 2 tid (ga) and 2 tid + 1 (gb); results into s_g[:, 0]."""
        lo, hi = self.gate_scan_pair(ga, gb, tid)
        s_g[2 * tid, 0] = lo
        s_g[2 * tid + 1, 0] = hi

    @cute.jit
    def gate_scan_pair(self, ga, gb, tid):
        """Warp 0 (tid < 32): the inclusive scan of the chunk's 64 scalar log gates at rows
        2 tid and 2 tid + 1, lane tid holding those rows' gates ga and gb."""
        x = ga + gb
        for off in cutlass.range_constexpr(5):
            x_up = cute.arch.shuffle_sync_up(x, 1 << off)
            if tid >= (1 << off):
                x = x + x_up
        return x - gb, x

    @cute.jit
    def gate_pair(self, mg, h, t0, eos, tid):
        """The scalar log gates of rows 2 tid and 2 tid + 1 (zero past eos), plain loads."""
        ga = Float32(0.0)
        gb = Float32(0.0)
        if t0 + 2 * tid < eos:
            ga = mg[t0 + 2 * tid, h, 0]
        if t0 + 2 * tid + 1 < eos:
            gb = mg[t0 + 2 * tid + 1, h, 0]
        return ga, gb

    @cute.jit
    def gate(self, s, r, d):
        s_g = s.g
        if cutlass.const_expr(self.cfg.gate_per_channel):
            return s_g[r, d]
        return s_g[r, 0]

    @cute.jit
    def stage_operands(self, s, mb, heads, t0, eos, scale, tid):
        """The decay-folded bf16 operands, VEC channels of one row per thread and step."""
        s_q = s.q
        s_k = s.k
        s_g = s.g
        s_qa = s.qa
        s_kba = s.kba
        s_kdt = s.kdt
        s_beta = s.beta
        if cutlass.const_expr(self.cfg.gate_per_channel):
            s_qr = s.qr
            s_kbr = s.kbr
        else:
            s_qr = None
            s_kbr = None
        c = self.cfg
        K, C, NT = c.K, CHUNK, self.threads
        h = heads[3]
        vr = K // VEC
        for u in cutlass.range_constexpr(C * vr // NT):
            vid = tid + u * NT
            r = vid // vr
            cv = vid % vr
            d0 = cv * VEC
            xq = load_vec(cute.local_tile(s_q[r, None], (VEC,), (cv,)))
            xk = load_vec(cute.local_tile(s_k[r, None], (VEC,), (cv,)))
            xb = cute.make_rmem_tensor((VEC,), self.io)
            if cutlass.const_expr(c.beta_per_channel):
                xb.fill(0.0)
                if t0 + r < eos:
                    cute.autovec_copy(cute.local_tile(mb[t0 + r, h, None], (VEC,), (cv,)), xb)
            qa = cute.make_rmem_tensor((VEC,), BFloat16)
            kba = cute.make_rmem_tensor((VEC,), BFloat16)
            qr = cute.make_rmem_tensor((VEC,), BFloat16)
            kbr = cute.make_rmem_tensor((VEC,), BFloat16)
            a_row = Float32(1.0)
            kd_row = Float32(1.0)
            if cutlass.const_expr(not c.gate_per_channel):
                a_row = cute.arch.exp(s_g[r, 0])
                kd_row = cute.arch.exp(s_g[C - 1, 0] - s_g[r, 0])
            for e in cutlass.range_constexpr(VEC):
                qv = xq[e].to(Float32)
                kv = xk[e].to(Float32)
                kb = kv * s_beta[r]
                if cutlass.const_expr(c.beta_per_channel):
                    kb = kv * xb[e].to(Float32)
                a = a_row
                kd = kd_row
                if cutlass.const_expr(c.gate_per_channel):
                    gam = s_g[r, d0 + e]
                    a = cute.arch.exp(gam)
                    kd = cute.arch.exp(s_g[C - 1, d0 + e] - gam)
                    rel = cute.arch.exp(gam - s_g[(r // SUB) * SUB, d0 + e])
                    qr[e] = (qv * rel).to(BFloat16)
                    kbr[e] = (kb * rel).to(BFloat16)
                qa[e] = (qv * a * scale).to(BFloat16)
                kba[e] = (-(kb * a)).to(BFloat16)
                s_kdt[d0 + e, r] = (kv * kd).to(BFloat16)
            cute.autovec_copy(qa, cute.local_tile(s_qa[r, None], (VEC,), (cv,)))
            cute.autovec_copy(kba, cute.local_tile(s_kba[r, None], (VEC,), (cv,)))
            if cutlass.const_expr(c.gate_per_channel):
                cute.autovec_copy(qr, cute.local_tile(s_qr[r, None], (VEC,), (cv,)))
                cute.autovec_copy(kbr, cute.local_tile(s_kbr[r, None], (VEC,), (cv,)))

    @cute.jit
    def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
        """M and P per lower 16x16 block pair; tiles dealt round-robin to the warps."""
        c = self.cfg
        for p in cutlass.range_constexpr(len(GRAM_TILES)):
            bi, bj = GRAM_TILES[p]
            if wid == self.gram_owner(p):
                if cutlass.const_expr(c.gate_per_channel and bi == bj):
                    span = self.block_span(s, bi, lane)
                    if span < SPAN_LIMIT:
                        self.gram_tile_mma(s, bi, bj, scale, thr, lane)
                    else:
                        self.gram_tile_exact(s, mb, heads, t0, eos, bi, scale, lane)
                else:
                    self.gram_tile_mma(s, bi, bj, scale, thr, lane)
                if cutlass.const_expr(bi == bj):
                    cute.arch.sync_warp()  # this warp's M_ii stores are visible to its lanes
                    self.block_inverse(s, bi, lane)

    def gram_owner(self, p: int) -> int:
        """Extension point: the warp that builds Gram tile GRAM_TILES[p] (here: round robin)."""
        return p % self.warps

    @cute.jit
    def block_span(self, s, bi, lane):
        """max over channels of Gam_first - Gam_last inside row block bi (warp-uniform)."""
        s_g = s.g
        K = self.cfg.K
        span = Float32(0.0)
        for u in cutlass.range_constexpr(K // 32):
            d = lane + 32 * u
            span = cute.arch.fmax(span, s_g[bi * SUB, d] - s_g[bi * SUB + SUB - 1, d])
        return cute.arch.warp_reduction(span, cute.arch.fmax)

    @cute.jit
    def gram_tile_mma(self, s, bi, bj, scale, thr, lane):
        s_q = s.q
        s_k = s.k
        s_g = s.g
        s_beta = s.beta
        if cutlass.const_expr(self.cfg.gate_per_channel):
            s_qr = s.qr
            s_kbr = s.kbr
        else:
            s_qr = None
            s_kbr = None
        c = self.cfg
        K = c.K
        mma = warp_mma()
        wo = c.write_output  # False: M alone (P only serves the output)
        acc_m = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
        if cutlass.const_expr(wo):
            acc_p = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
        acc_m.fill(0.0)
        if cutlass.const_expr(wo):
            acc_p.fill(0.0)
        if cutlass.const_expr(c.gate_per_channel):
            a_m_all = self.operand(thr, lane, cute.local_tile(s_kbr, (SUB, K), (bi, 0)), True)
            if cutlass.const_expr(wo):
                a_p_all = self.operand(thr, lane, cute.local_tile(s_qr, (SUB, K), (bi, 0)), True)
            b_src = self.gram_b_source(s, bi, bj, thr, lane)
        else:
            a_m_all = self.operand(thr, lane, cute.local_tile(s_k, (SUB, K), (bi, 0)), True)
            if cutlass.const_expr(wo):
                a_p_all = self.operand(thr, lane, cute.local_tile(s_q, (SUB, K), (bi, 0)), True)
            b_all = self.operand(thr, lane, cute.local_tile(s_k, (SUB, K), (bj, 0)), False)
        b_crd = thr.partition_B(cute.make_identity_tensor((SUB, K)))
        for kk in cutlass.range_constexpr(K // 16):
            a_m = a_m_all[None, None, kk]
            if cutlass.const_expr(wo):
                a_p = a_p_all[None, None, kk]
            if cutlass.const_expr(c.gate_per_channel):
                b = self.gram_b_block(s, bi, bj, b_src, b_crd[None, None, kk], kk)
            else:
                b = b_all[None, None, kk]
            cute.gemm(mma, acc_m, a_m, b, acc_m)
            if cutlass.const_expr(wo):
                cute.gemm(mma, acc_p, a_p, b, acc_p)
        crd_c = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        for e in cutlass.range_constexpr(cute.size(acc_m)):
            ts = crd_c[e]
            t = bi * SUB + ts[0]
            u = bj * SUB + ts[1]
            mval = acc_m[e]
            pval = Float32(0.0)  # write_output=False: never stored (store_gram)
            if cutlass.const_expr(wo):
                pval = acc_p[e] * scale
            if cutlass.const_expr(not c.gate_per_channel):
                f = cute.arch.exp(cute.arch.fmin(s_g[t, 0] - s_g[u, 0], Float32(0.0)))
                mval = mval * f * s_beta[t]
                if cutlass.const_expr(wo):
                    pval = pval * f
            if u >= t:
                mval = Float32(0.0)
            if cutlass.const_expr(wo):
                if u > t:
                    pval = Float32(0.0)
            self.store_gram(s, bi, bj, t, u, ts, mval, pval)

    @cute.jit
    def gram_b_source(self, s, bi, bj, thr, lane):
        """Extension point: registers the vector-gate B side of tile (bi, bj) is built from
        (here: none, gram_b_block reads shared memory)."""
        return None

    @cute.jit
    def gram_b_block(self, s, bi, bj, b_src, crd, kk):
        """Vector-gate Gram B fragment of k-block kk (coordinates crd, rows s of block bj):
        k_s e^(Gam_r - Gam_s), r the first row of block bi."""
        s_k = s.k
        s_g = s.g
        b = cute.make_rmem_tensor(crd.shape, BFloat16)
        for e in cutlass.range_constexpr(cute.size(b)):
            sd = crd[e]
            row = bj * SUB + sd[0]
            val = s_k[row, sd[1]].to(Float32) * cute.arch.exp(s_g[bi * SUB, sd[1]] - s_g[row, sd[1]])
            b[e] = val.to(BFloat16)
        return b

    @cute.jit
    def store_gram(self, s, bi, bj, t, u, ts, mval, pval):
        s_mneg = s.mneg
        s_p = s.p
        s_md = s.md
        s_mneg[t, u] = (-mval).to(BFloat16)
        if cutlass.const_expr(self.cfg.write_output):
            s_p[t, u] = pval.to(BFloat16)
        if cutlass.const_expr(bi == bj):
            s_md[bi, ts[0], ts[1]] = mval

    @cute.jit
    def gram_tile_exact(self, s, mb, heads, t0, eos, bi, scale, lane):
        """Diagonal block with a decay span too wide to factor: exact pairwise exps (SIMT)."""
        s_q = s.q
        s_k = s.k
        s_g = s.g
        s_beta = s.beta
        c = self.cfg
        K = c.K
        h = heads[3]
        for e in cutlass.range_constexpr(SUB * SUB // 32):
            idx = lane + 32 * e
            tl = idx // SUB
            ul = idx % SUB
            t = bi * SUB + tl
            u = bi * SUB + ul
            mval = Float32(0.0)
            pval = Float32(0.0)
            if ul <= tl:
                for d in cutlass.range(K):
                    kbt = s_k[t, d].to(Float32) * s_beta[t]
                    if cutlass.const_expr(c.beta_per_channel):
                        bv = Float32(0.0)
                        if t0 + t < eos:
                            bv = mb[t0 + t, h, d].to(Float32)
                        kbt = s_k[t, d].to(Float32) * bv
                    f = s_k[u, d].to(Float32) * cute.arch.exp(s_g[t, d] - s_g[u, d])
                    mval = mval + kbt * f
                    if cutlass.const_expr(c.write_output):  # else pval stays 0, never stored
                        pval = pval + s_q[t, d].to(Float32) * f
                if cutlass.const_expr(c.write_output):
                    pval = pval * scale
                if ul == tl:
                    mval = Float32(0.0)
            self.store_gram(s, bi, bi, t, u, (tl, ul), mval, pval)

    @cute.jit
    def block_inverse(self, s, bi, lane):
        """(I + M_ii)^-1 of diagonal block bi by the warp that built M_ii: lane c < 16
        forward-substitutes column c."""
        self.block_inverse_at(s.md, s.dinv, bi, lane)

    @cute.jit
    def block_inverse_at(self, s_md, s_dinv, bi, lane):
        """block_inverse on given M and Dinv tensors (a staged branch passes local aliases:
        it must not read the shared tensors through the namespace, NOTES.md, "Plan after this step", item 2)."""
        if lane < SUB:
            x = []
            for t in cutlass.range_constexpr(SUB):
                acc = Float32(0.0)
                if lane == t:
                    acc = Float32(1.0)
                for u in cutlass.range_constexpr(t):
                    acc = acc - s_md[bi, t, u] * x[u]
                x.append(acc)
            for t in cutlass.range_constexpr(SUB):
                s_dinv[bi, t, lane] = x[t].to(BFloat16)

    def solve_block(self, mma, thr, lane, r, a_u, s_mneg, s_dinv, bi, first=0):
        """Block bi of the chunk's solve, U_bi = Dinv_bi (R_bi - sum_{j<bi} M_bi,j U_j), on
        mma.sync per warp: r (R_bi's accumulator) is updated in place, U_bi's A operand is
        appended to a_u (the earlier blocks' operands), U_bi's fp32 accumulator returned.
        With `first`, blocks before it are zero and skipped (a_u starts at block first: the
        full-inverse producer's column blocks of A, fwd_ws_wy.py). A plain method, traced
        inline, shared by the mma / pipelined and wgmma chains and the backward's states kernel."""
        for bj in range(first, bi):  # bi is a Python int (the callers unroll over blocks)
            b_m = self.operand(thr, lane, cute.local_tile(s_mneg, (SUB, SUB), (bi, bj)), False)
            cute.gemm(mma, r, a_u[bj - first][None, None, 0], b_m[None, None, 0], r)
        a_x = to_a_operand(r, thr.partition_shape_A((SUB, SUB)))
        u = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
        u.fill(0.0)
        b_d = self.operand(thr, lane, s_dinv[bi, None, None], False)
        cute.gemm(mma, u, a_x[None, None, 0], b_d[None, None, 0], u)
        a_u.append(to_a_operand(u, thr.partition_shape_A((SUB, SUB))))
        return u

    @cute.jit
    def stage_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """This warp's 16 value columns: state reads, block solve, output, state update."""
        s_w0 = s.w0
        s_qa = s.qa
        s_kba = s.kba
        s_kdt = s.kdt
        s_mneg = s.mneg
        s_p = s.p
        s_dinv = s.dinv
        c = self.cfg
        K = c.K
        h = heads[3]
        mma = warp_mma()
        j0 = wid * SUB
        a_s = to_a_operand(acc_s, thr.partition_shape_A((SUB, K)))
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        wo = c.write_output  # False: no O products, no o stores (the state path as is)
        acc_r = []
        acc_o = []
        for bi in cutlass.range_constexpr(NBLK):
            r = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
            for e in cutlass.range_constexpr(cute.size(r)):
                jt = crd[e]
                r[e] = s_w0[bi * SUB + jt[1], j0 + jt[0]].to(Float32)
            if cutlass.const_expr(wo):
                o = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
                o.fill(0.0)
            b_kba = self.operand(thr, lane, cute.local_tile(s_kba, (SUB, K), (bi, 0)), False)
            if cutlass.const_expr(wo):
                b_qa = self.operand(thr, lane, cute.local_tile(s_qa, (SUB, K), (bi, 0)), False)
            for kk in cutlass.range_constexpr(K // 16):
                cute.gemm(mma, r, a_s[None, None, kk], b_kba[None, None, kk], r)
                if cutlass.const_expr(wo):
                    cute.gemm(mma, o, a_s[None, None, kk], b_qa[None, None, kk], o)
            acc_r.append(r)
            if cutlass.const_expr(wo):
                acc_o.append(o)
        self.after_rhs_reads(s, heads, t0, eos, lane, wid)
        a_u = []
        for bi in cutlass.range_constexpr(NBLK):
            r = acc_r[bi]
            u = self.solve_block(mma, thr, lane, r, a_u, s_mneg, s_dinv, bi)
            if cutlass.const_expr(c.write_values):  # the backward's U, as its states kernel writes it
                store_values_block(s.values, u, crd, t0 + bi * SUB, eos, h, j0)
        for bi in cutlass.range_constexpr(NBLK if wo else 0):
            o = acc_o[bi]
            for bj in cutlass.range_constexpr(bi + 1):
                b_p = self.operand(thr, lane, cute.local_tile(s_p, (SUB, SUB), (bi, bj)), False)
                cute.gemm(mma, o, a_u[bj][None, None, 0], b_p[None, None, 0], o)
            for e in cutlass.range_constexpr(cute.size(o)):
                jt = crd[e]
                t = t0 + bi * SUB + jt[1]
                if t < eos:
                    mo[t, h, j0 + jt[0]] = o[e].to(mo.element_type)
        for e in cutlass.range_constexpr(cute.size(acc_s)):
            d = coord_s[e][1]
            acc_s[e] = acc_s[e] * self.state_decay(s, d)
        for bj in cutlass.range_constexpr(NBLK):
            b_kd = self.operand(thr, lane, cute.local_tile(s_kdt, (K, SUB), (0, bj)), False)
            cute.gemm(mma, acc_s, a_u[bj][None, None, 0], b_kd[None, None, 0], acc_s)

    @cute.jit
    def after_rhs_reads(self, s, heads, t0, eos, lane, wid):
        """Extension point in the chain once this warp has read its W0 columns (here: nothing)."""
        pass

    @cute.jit
    def state_decay(self, s, d):
        """e^Gam_last at key channel d: the state's decay over the chunk."""
        return cute.arch.exp(self.gate(s, CHUNK - 1, d))


@cute.jit
def load_vec(src: cute.Tensor) -> cute.Tensor:
    """A register copy of a small contiguous (vectorisable) tensor."""
    dst = cute.make_rmem_tensor(src.shape, src.element_type)
    cute.autovec_copy(src, dst)
    return dst


@cute.jit
def store_values_block(mu: cute.Tensor, u: cute.Tensor, crd: cute.Tensor, t_first, eos, h, j0):
    """One warp's 16 x 16 block of U^T (fp32 accumulator u, coordinates crd = (value column
    j, row t) from partition_C) into mu[t, h, j0 + j] as bf16, rows t_first + t < eos: the
    rows the backward's grads kernel reads. The one store of U, shared by the pipelined forward
    (write_values) and the backward's states / values kernels, so both write the same bits."""
    for e in cutlass.range_constexpr(cute.size(u)):
        jt = crd[e]
        t = t_first + jt[1]
        if t < eos:
            mu[t, h, j0 + jt[0]] = u[e].to(BFloat16)


@cute.jit
def to_a_operand(acc: cute.Tensor, a_shape) -> cute.Tensor:
    """bf16 A operand from an fp32 accumulator of the same [16, N] tile (same flat order)."""
    a = cute.make_rmem_tensor(a_shape, BFloat16)
    for e in cutlass.range_constexpr(cute.size(acc)):
        a[e] = acc[e].to(BFloat16)
    return a
