"""FROST forward for scalar gates (GDN) in four roles per CTA. RawRingInChain is the
product's GDN forward for long sequences (compile_kernel.four_roles_apply,
four_role_class); FourRoles and RawRing are experiment kernels the test and bench tooling
builds (frost_fwd_experiments.py knob decay="wy-ws4", "wy-ws4raw"; "wyc-ws4raw" is the
product's). FourRoles.math also serves the timing bounds (skip_stages "gram", "inverse":
math_forms_inverse False).

fwd_ws_wy.py's full-inverse kernel runs its state-free work on one producer role of eight
warps at 64 registers: the copies, the rows stage, the Gram and the solves of A and W'.
Profiled, that role needs ~6 us per chunk against the chain's ~2.7 (kernels/NOTES.md "The
full inverse on the producer, measured"): each of its warps issues one dependent stream at
~0.1 instructions per cycle, its Gram tiles per warp on mma.sync. Here the producer's work
is split by what it needs, as the published Hopper design for this problem splits it:

- warps 0-7 (warpgroups 0, 1), the chain at CHAIN_REGS: fwd_ws_wy.py's consumers unchanged
  (U^T = W0^T A^T + S^T W'^T, then the scaled chain's ending);
- warps 8-11 (warpgroup 2), math at MATH_REGS: the rows stage, the factor rows, both Gram
  products as SS wgmma on this one warpgroup (fwd_wgmma_gram.GramWgmma, m64n64, M then P
  built as P^T so that every warp stores five blocks: one accumulator live at a time),
  the diagonal inverses, A's column blocks (a warp each) and W' (two row blocks of K per
  warp; RawRingInChain: none, its chain applies A to its R);
- warps 12-15 (warpgroup 3), copies at COPY_REGS: chunk c's raw q, k, gate and beta rows
  into the math warpgroup's tiles as soon as it has read chunk c - 1's, and chunk c's v
  straight into its operand set once the chain has released that set.

Hand-over (named barriers; ids below, fwd_ws.py's FULL / EMPTY kept):
RAW_FULL - the copies arrive once chunk c's q, k, gate and beta rows have landed, the math
warpgroup waits before its rows stage; RAW_FREE - the math warpgroup arrives once its rows
stage has read the raw tiles (only where a next chunk exists), the copies wait before
writing them again; FULL[b] - math (A, W', P, q-hat, k-hat, the factor rows; proxy-fenced)
and copies (v landed) arrive, the chain waits: 512 threads; EMPTY[b] - the chain arrives
once chunk c's last wgmma group retired, math and copies wait before writing set b for
chunk c + 2: 512 threads. The gate and beta rows are per chunk parity, as before: the
copies write parity c only after RAW_FREE(c - 1), by when chunk c - 2's math is done.

Registers (setmaxnreg per warpgroup): 2 x 128 x CHAIN_REGS + 128 x (MATH_REGS + COPY_REGS)
<= 65,536. GDN, bf16, K = V = 128, with an output (the Gram builds P) or without one
(the backward's recompute of its states and U: M alone), sm_90a.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import Float32

from cudnn.linear_attention.frost.kernels.config import REGISTER_FILE, FrostFwdConfig, register_split_ok
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, VEC, load_vec, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import NORM_K, NORM_Q, GramWgmma, lane_in_loop, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import FK, FO, FR
from cudnn.linear_attention.frost.kernels.fwd_ws import BAR_EMPTY, BAR_FULL, BLOCK_THREADS, SETS, \
    waits_for_release, zero_blocks
from cudnn.linear_attention.frost.kernels.fwd_ws_wy import FB, FullInverseChain
from cudnn.linear_attention.frost.kernels.fwd_ws_wy import smem_plan as wy_smem_plan

CHAIN_WARPS = 8
MATH_WARP0 = 8  # warpgroup 2
COPY_WARP0 = 12  # warpgroup 3
MATH_TID0 = 32 * MATH_WARP0
COPY_TID0 = 32 * COPY_WARP0
#: (chain, math, copies) setmaxnreg: the chain's 192 are wy-ws's unspilled split; the math
#: warpgroup's 104 built the wgmma Gram and the solves unspilled (NOTES.md "The wgmma Gram
#: inside the full-inverse producers, on the H200"); the copies keep 24
REGISTER_SPLIT = (192, 104, 24)
# named barriers beyond fwd_ws.py's (1: the producer's own, here the math warpgroup's)
BAR_MATH = 1
BAR_RAW_FULL = BAR_EMPTY + SETS
BAR_RAW_FREE = BAR_RAW_FULL + 1
PAIR_THREADS = 2 * WG_THREADS  # copies + math on RAW_FULL / RAW_FREE


assert register_split_ok(REGISTER_SPLIT, (3,))


class FourRoles(FullInverseChain):
    """Mixin over GramWgmma and a FrostFwdWgmma class (module docstring). Put first in the
    bases; the tooling composes (FourRoles, GramWgmma, wgmma-layer class) with gram_n 64."""

    #: both Gram products on the math warpgroup (fwd_wgmma_gram.GramWgmma.stage_gram)
    gram_warpgroups = 1
    #: P built as P^T: five epilogue blocks per warp of M and P, not 2 (warp 0) to 8 (warp 3)
    gram_p_transposed = True
    #: without an output (the backward's recompute of its states) the Gram is M alone
    gram_output_optional = True
    split_mma_gram = REGISTER_SPLIT
    split_wgmma_gram = REGISTER_SPLIT

    def __init__(self, cfg: FrostFwdConfig):
        if not isinstance(self, GramWgmma) or self.gram_n != 64:
            raise ValueError(f"{type(self).__name__}: the math warpgroup runs the wgmma Gram at m64n64 "
                             f"(GramWgmma in the bases, gram_n 64)")
        FullInverseChain.__init__(self, cfg)

    def take_register_split(self, regs):
        if not register_split_ok(regs, (3,)):
            raise ValueError(f"{type(self).__name__}: register_split must be (chain, math, copies), multiples of "
                             f"8 in [24, 256] with 128 x (2 chain + math + copies) <= {REGISTER_FILE}, got {regs!r}")
        self.chain_regs, self.math_regs, self.copy_regs = regs

    def as_role(self, threads: int, fn, *args, **kwargs):
        """fn traced with self.threads = threads: the stages written for the CTA's threads
        (rows_from, prefetch_rows) dealt to one warpgroup. A plain function, traced inline."""
        saved = self.threads
        self.threads = threads
        try:
            return fn(*args, **kwargs)
        finally:
            self.threads = saved

    # ------------------------------------------------------------------ the CTA's work
    @cute.jit
    def sequence(self, s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h):
        """fwd_ws.py's set-up (P's and A's blocks above the diagonal zeroed by every thread:
        one loop of 512 threads, where the math warpgroup alone unrolled 64 steps per
        thread with spills), then the roles."""
        tid, lane, wid, heads, bos, eos, chunks = self.roles_setup(s, mq, mk, mv, mg, mb, mw, mcu, T, n, h)
        zero_blocks(s.p, tid, BLOCK_THREADS, True)
        zero_blocks(s.ainv, tid, BLOCK_THREADS, True)  # A above its diagonal blocks: never written per chunk
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()
        if wid >= COPY_WARP0:
            cute.arch.setmaxregister_decrease(self.copy_regs)
            self.copies(s, bos, eos, chunks)
        elif wid >= MATH_WARP0:
            cute.arch.setmaxregister_decrease(self.math_regs)
            self.math(s, mb, heads, bos, eos, chunks, scale)
        else:
            cute.arch.setmaxregister_increase(self.chain_regs)
            self.consume(s, mo, mh0, mht, mckpt, mcu, T, N, heads, n, h, bos, eos, chunks, wid, lane)

    # ------------------------------------------------------------------ copies
    @cute.jit
    def copies(self, s, bos, eos, chunks):
        C = CHUNK
        for i in cutlass.range(chunks, unroll=1):
            t0 = bos + i * C
            b = i % SETS
            ctid = tid_in_loop() - COPY_TID0  # per chunk (volatile): hoisted addresses spill
            lane = lane_in_loop()
            cwid = ctid // 32
            if i >= 1:  # the math warpgroup read chunk i - 1's raw rows
                cute.arch.barrier(barrier_id=BAR_RAW_FREE, number_of_threads=PAIR_THREADS)
            self.as_role(WG_THREADS, self.prefetch_rows, self.raw_views(s, b), t0, eos, ctid)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(0)
            cute.arch.barrier_arrive(barrier_id=BAR_RAW_FULL, number_of_threads=PAIR_THREADS)
            if i >= SETS:  # set b free: chunk i - SETS's chain retired its reads
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            for part in cutlass.range_constexpr(CHAIN_WARPS // 4):  # v's 16-column slices, two per warp
                self.prefetch_v(st, t0, eos, lane, cwid + 4 * part)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(0)
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    # ------------------------------------------------------------------ math
    @cute.jit
    def math(self, s, mb, heads, bos, eos, chunks, scale):
        """Per chunk, in the kernel's walk (chunk_start: forwards here, backwards in
        bwd_chain_ws4.py, which runs this loop too): the set's release, the chunk's inputs
        (math_inputs), the factor rows, the Gram, then W' (row blocks mwid + 4 and mwid)
        and A's column block mwid, FULL."""
        for i in cutlass.range(chunks, unroll=1):
            t0 = self.chunk_start(bos, i, chunks)
            b = i % SETS
            mtid = tid_in_loop() - MATH_TID0
            lane = lane_in_loop()
            mwid = cute.arch.make_warp_uniform(mtid // 32)
            thr = warp_mma().get_slice(lane)
            if waits_for_release(i):
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.chunk_set(s, i)
            self.math_inputs(s, st, i, chunks, heads, t0, eos, mtid)  # ends with the math warpgroup's barrier
            self.math_factors(st, scale, mtid)
            # timing experiments only (bench/frost_stage_times.py): "gram" leaves the Gram and
            # the solves out, "inverse" M, its inverses and the solves (P stays)
            skip = getattr(self, "skip_stages", ())
            if cutlass.const_expr("gram" not in skip):
                GramWgmma.stage_gram(self, st, mb, heads, t0, eos, scale, thr, lane, mwid)  # ends with the fence
            if cutlass.const_expr(self.math_forms_inverse):
                cute.arch.barrier(barrier_id=BAR_MATH, number_of_threads=WG_THREADS)  # -M, inverses, factors
                if cutlass.const_expr(not self.inverse_in_chain):
                    self.w_prime_rows(st, thr, lane, mwid + 4)
                self.solve_products(st, thr, lane, mwid)  # W' rows mwid (not in chain), A's columns mwid
            cute.arch.fence_proxy("async.shared", space="cta")  # A and W': the chain's wgmma operands
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    @property
    def math_forms_inverse(self) -> bool:
        """Whether the math warpgroup forms M, its inverses and A: not where a timing
        experiment leaves them out."""
        skip = getattr(self, "skip_stages", ())
        return not ("gram" in skip or "inverse" in skip)

    def chunk_start(self, bos, i, chunks):
        """The first token of the i-th chunk the math warpgroup takes: chunk i. Traced inline."""
        return bos + i * CHUNK

    def chunk_set(self, s, i):
        """What the i-th chunk's math reads and writes (chunk_views). Traced inline."""
        return self.chunk_views(s, i)

    @cute.jit
    def math_inputs(self, s, st, i, chunks, heads, t0, eos, mtid):
        """RAW_FULL, the rows stage from the raw tiles into set st (q-hat, k-hat, the gate
        scan: raw_rows_stage), RAW_FREE where a next chunk exists, the proxy fence (q-hat
        and k-hat are the Gram's wgmma operands) and the math warpgroup's barrier."""
        cute.arch.barrier(barrier_id=BAR_RAW_FULL, number_of_threads=PAIR_THREADS)
        self.raw_rows_stage(s, st, heads, t0, eos, mtid)
        if i + 1 < chunks:  # this thread's raw reads are done
            cute.arch.barrier_arrive(barrier_id=BAR_RAW_FREE, number_of_threads=PAIR_THREADS)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier(barrier_id=BAR_MATH, number_of_threads=WG_THREADS)  # rows and the gate scan

    @cute.jit
    def raw_rows_stage(self, s, st, heads, t0, eos, mtid):
        """The forward's rows stage on the math warpgroup (no U rows here)."""
        self.as_role(WG_THREADS, self.rows_from, st, s.rq, s.rk, None, mtid, values=False)

    @cute.jit
    def math_factors(self, st, scale, mtid):
        """fwd_wgmma_scaled's factor rows and beta (FB, for the chain's W0)."""
        self.write_factors(st, scale, mtid)
        if mtid < CHUNK:
            st.fac[FB, mtid] = st.beta[mtid]

# ---------------------------------------------------------------------- raw operands, ring
#: chunks of raw q / k rows (and their gate and beta rows) in flight or in use at once
RING = 3
BAR_RING_FULL = BAR_EMPTY + SETS  # + stage: the copies arrive, math waits (256)
BAR_RING_EMPTY = BAR_RING_FULL + RING  # + stage: the chain arrives, the copies wait (384)
RING_EMPTY_THREADS = CHAIN_WARPS * 32 + WG_THREADS
BAR_COPIES = BAR_RING_EMPTY + RING  # the copy warpgroup's own (128)
#: fwd_ws_wy.py's per-parity tiles that become ring stages here, and its raw tiles (gone)
RING_TILES = ("q", "k", "g", "beta")
DROPPED = ("rq", "rk")


def ring_smem_plan(c: FrostFwdConfig, with_wp: bool = True):
    """fwd_ws_wy.py's plan with q, k, the gate and beta rows RING stages tall (the caller's
    raw rows: no q-hat / k-hat tiles, no raw copies beside them) and the inverse norms
    per stage [2 RING, C] (fp32, rows 2 r + NORM_K, 2 r + NORM_Q); with_wp False: no W'."""
    plan = []
    for name, dtype, shape, stride in wy_smem_plan(c, with_wp):
        if name in DROPPED:
            continue
        if name in RING_TILES:
            shape = (shape[0] // SETS * RING, *shape[1:])
        plan.append((name, dtype, shape, stride))
    return plan + [("norm", "f32", (2 * RING, CHUNK), (CHUNK, 1))]


class RawRing(FourRoles):
    """FourRoles without the rows stage (module docstring, "raw operands"): the copies bring
    chunk c + 1's raw q, k, gate and beta rows into ring stage (c + 1) mod RING as soon as
    chunk c + 1 - RING's chain released it, so a chunk's rows are in flight a whole chain
    ahead of the math warpgroup that reads them; math forms the l2 norms' inverses (a row
    per thread), folds them into the factor rows (fr = -beta e^Gam nk, fo = scale e^Gam nq,
    fk = e^(Gam_last - Gam) nk) and the Gram's epilogue (M_ts beta_t nk_t nk_s, P_ts scale
    nq_t nk_s: GramWgmma.gram_norms), and the chain's wgmma read the raw rows themselves.
    Rounding: frost_mma_precision.py's "wy-raw" model (8-33 % below the product's error).
    Hand-over: RING_FULL[r] (copies arrive once the stage's rows landed and are fenced for
    the async proxy; math waits), RING_EMPTY[r] (the chain arrives after the chunk's last
    group retired, where chunk c + RING exists; the copies wait), FULL / EMPTY per operand
    set as FourRoles (v still goes into the set)."""

    smem_plan = staticmethod(ring_smem_plan)
    gram_log2 = True

    @property
    def gram_norms(self) -> bool:
        """The Gram's epilogue applies the norms where the caller asked for l2norm."""
        return self.cfg.use_l2norm

    def ring_view(self, s, r):
        """Ring stage r's raw q, k, gate and beta rows, named as prefetch_rows names them."""
        C, K = CHUNK, self.cfg.K
        return SimpleNamespace(q=cute.local_tile(s.q, (C, K), (r, 0)), k=cute.local_tile(s.k, (C, K), (r, 0)),
                               g=cute.local_tile(s.g, (C, 1), (r, 0)), beta=cute.local_tile(s.beta, (C,), (r,)),
                               norm=cute.local_tile(s.norm, (2, C), (r, 0)), gmem=s.gmem)

    def chunk_views(self, s, i):
        """Chunk i's operand set (i mod SETS) with its raw rows from ring stage i mod RING."""
        st = self.set_views(s, i % SETS)
        ring = self.ring_view(s, i % RING)
        st.q, st.k, st.g, st.beta, st.norm = ring.q, ring.k, ring.g, ring.beta, ring.norm
        return st

    @cute.jit
    def release_chunk(self, i, chunks):
        FourRoles.release_chunk(self, i, chunks)
        if i + RING < chunks:
            cute.arch.barrier_arrive(barrier_id=BAR_RING_EMPTY + i % RING, number_of_threads=RING_EMPTY_THREADS)

    # ------------------------------------------------------------------ copies
    #: True: the copy warpgroup forms the stage's inverse norms once its rows landed (a
    #: chain ahead of their use), False: the math warpgroup, before its Gram
    norms_in_copies = True

    @cute.jit
    def stage_landed(self, s, r):
        """The copies' side of RING_FULL[r] once the stage's group landed: the norms
        (norms_in_copies), the proxy fence (the wgmma read the rows), the arrive."""
        if cutlass.const_expr(self.cfg.use_l2norm and self.norms_in_copies):
            # a row's slices were copied by 16 threads: every copy thread's wait first
            cute.arch.barrier(barrier_id=BAR_COPIES, number_of_threads=WG_THREADS)
            self.inverse_norms(self.ring_view(s, r), tid_in_loop() - COPY_TID0)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier_arrive(barrier_id=BAR_RING_FULL + r, number_of_threads=PAIR_THREADS)

    def ring_rows_landed(self, s, r, t0, eos):
        """The copies' side of ring stage r once its group (chunk t0's rows) landed:
        stage_landed. A plain method, traced inline: the tooling's tensor-memory-copy
        experiment (frost_fwd_tma_rows.py) also waits for its mbarrier here."""
        self.stage_landed(s, r)

    @cute.jit
    def copy_ring_rows(self, s, r, t0, eos):
        """Chunk t0's raw q, k, gate and beta rows into ring stage r, one committed group."""
        self.as_role(WG_THREADS, self.prefetch_rows, self.ring_view(s, r), t0, eos, tid_in_loop() - COPY_TID0)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def copies(self, s, bos, eos, chunks):
        C = CHUNK
        if chunks > 0:
            self.copy_ring_rows(s, 0, bos, eos)
            cute.arch.cp_async_wait_group(0)
            self.ring_rows_landed(s, 0, bos, eos)
        for i in cutlass.range(chunks, unroll=1):
            t0 = bos + i * C
            b = i % SETS
            r = (i + 1) % RING
            lane = lane_in_loop()
            cwid = (tid_in_loop() - COPY_TID0) // 32
            # chunk i + 1's rows and chunk i's v: both wait for chunk i - 2's chain
            if i + 1 < chunks:
                if i + 1 >= RING:
                    cute.arch.barrier(barrier_id=BAR_RING_EMPTY + r, number_of_threads=RING_EMPTY_THREADS)
                self.copy_ring_rows(s, r, t0 + C, eos)
            if i >= SETS:
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            for part in cutlass.range_constexpr(CHAIN_WARPS // 4):
                self.prefetch_v(st, t0, eos, lane, cwid + 4 * part)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(0)
            if i + 1 < chunks:
                self.ring_rows_landed(s, r, t0 + C, eos)
            else:
                cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    # ------------------------------------------------------------------ math
    @cute.jit
    def math_inputs(self, s, st, i, chunks, heads, t0, eos, mtid):
        """RING_FULL of the chunk's stage, the norms (unless the copies formed them), the gate
        scan in the stage, the math warpgroup's barrier (no rows stage: the Gram and the
        chain read the raw rows)."""
        cute.arch.barrier(barrier_id=BAR_RING_FULL + i % RING, number_of_threads=PAIR_THREADS)
        if cutlass.const_expr(self.cfg.use_l2norm and not self.norms_in_copies):
            self.inverse_norms(st, mtid)
        self.scan_gates_in_place(st.g, mtid)
        cute.arch.barrier(barrier_id=BAR_MATH, number_of_threads=WG_THREADS)  # norms and the gate scan

    @cute.jit
    def inverse_norms(self, st, mtid):
        """1 / sqrt(|row|^2 + 1e-6) (qk_hat's) of k row mtid (threads 0 .. C-1) or q row
        mtid - C (threads C .. 2C-1) into st.norm; rows past the sequence are zeros there."""
        K, C = self.cfg.K, CHUNK
        row = mtid % C
        src = st.k
        if mtid >= C:
            src = st.q
        ss = Float32(0.0)
        for cv in cutlass.range_constexpr(K // VEC):
            x = load_vec(cute.local_tile(src[row, None], (VEC,), (cv,)))
            for e in cutlass.range_constexpr(VEC):
                ss = ss + x[e].to(Float32) * x[e].to(Float32)
        st.norm[mtid // C, row] = cute.math.rsqrt(ss + Float32(1e-6))

    @cute.jit
    def math_factors(self, st, scale, mtid):
        """ring_decay_factors, with beta (FB, for the chain's W0)."""
        ring_decay_factors(st, scale, mtid, self.cfg.use_l2norm, True)


@cute.jit
def ring_decay_factors(st, scale, mtid, l2norm: cutlass.Constexpr, with_beta: cutlass.Constexpr):
    """fwd_wgmma_scaled.write_decay_factors' rows for raw q / k rows, the inverse norms st.norm
    folded in (fr = -beta e^Gam nk, fo = scale e^Gam nq, fk = e^(Gam_last - Gam) nk; the raw
    rows then stand for q-hat and k-hat in every product that reads them), threads 0 .. C-1
    a row each; with_beta: beta too (row FB). The forward's RawRing and the backward's
    four-role chain on raw rows (bwd_chain_ws4.py) share it."""
    if mtid < CHUNK:
        nk = Float32(1.0)
        nq = Float32(1.0)
        if cutlass.const_expr(l2norm):
            nk = st.norm[NORM_K, mtid]
            nq = st.norm[NORM_Q, mtid]
        gam = st.g[mtid, 0]
        last = st.g[CHUNK - 1, 0]
        bt = st.beta[mtid]
        a = cute.arch.exp(gam)
        st.fac[FR, mtid] = -(bt * a) * nk
        st.fac[FO, mtid] = a * scale * nq
        st.fac[FK, mtid] = cute.arch.exp(last - gam) * nk
        if cutlass.const_expr(with_beta):
            st.fac[FB, mtid] = bt
        if mtid == 0:
            st.alast[0] = cute.arch.exp(last)


def ring_smem_plan_in_chain(c: FrostFwdConfig):
    return ring_smem_plan(c, with_wp=False)


#: RawRingInChain's (chain, math, copies) setmaxnreg, FourRoles' own, kept as a measured
#: trade: here ptxas serializes the kernel's wgmma (C7512: the chain's X, R and U live
#: together; also at 200 / 88 and with S^T Q^T after U), at 208 / 72 it does not but the
#: math warpgroup spills ~60 registers: 0.304 against 0.509 ms kernel time on the H100
IN_CHAIN_REGISTER_SPLIT = REGISTER_SPLIT


class RawRingInChain(RawRing):
    """RawRing without W' (knob decay="wyc-ws4raw"): the math warpgroup forms A only and the
    chain applies it to its R, fwd_ws_wy.FullInverseInChain's u_through_r (X = S^T K^T on
    the raw k rows, R = W0 + X diag(fr) with the norm in fr, U^T = bf16(R^T) A^T): a second
    dependent product group on the chain for the W' row blocks, a quarter of the math
    warpgroup's instructions per chunk, and 32 KB of shared memory."""

    smem_plan = staticmethod(ring_smem_plan_in_chain)
    inverse_in_chain = True
    #: S^T Q^T after U's group (fewer registers live while R is formed; ptxas serializes
    #: the wgmma at IN_CHAIN_REGISTER_SPLIT either way); the H100 times are this order's
    sq_with_x = False


def four_role_class(base):
    """The product's four-role forward over a wgmma-layer class (compile_kernel.product_class):
    RawRingInChain with the m64n64 wgmma Gram, composed as the test tooling composes its
    decay="wyc-ws4raw" experiment, so both build the same kernel."""
    from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma

    return type(f"{base.__name__}FourRoles", (RawRingInChain, GramWgmma, base), {"gram_n": 64})
