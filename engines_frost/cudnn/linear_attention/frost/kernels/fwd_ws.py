"""FROST forward for scalar gates (GDN), warp-specialised: an experiment kernel.

Not a product kernel: on the H200 it computes the scaled kernel's results bit for bit but
takes 28 % longer (NOTES.md "The scalar-gate forwards on the H200": the roles' times add
instead of overlapping). The test and bench tooling builds it (frost_fwd_experiments.py,
knob decay="scaled-ws", la_frost_smoke.py wgmmascaledws; NOTES.md "Warp-specialised GDN
forward on the scaled-decay chain").

Every chunk of the wgmma layer is a serial row of stages (rows, operands, Gram, chain) that all eight
warps run one after the other, each latency-bound; only the chain depends on the state.
With the decays scaled onto the chain's results (fwd_wgmma_scaled.py) the state-independent
work of a chunk is its rows (q-hat, k-hat, W0, gate scan), the factor rows and the Gram
(M, P, the diagonal inverses). Here a CTA of 16 warps runs them in two roles:

- consumers, warps 0-7 (warpgroups 0 and 1): the wgmma layer's chain exactly as the scaled kernel runs
  it (same warp indices, the same state registers, value rows [16 w, 16 w + 16)), chunk
  after chunk, reading the chunk's operand set;
- producer, warps 8-15 (warpgroups 2 and 3): the rows, factor and Gram stages of chunk
  c + 1 (the stages' code unchanged, with producer thread / warp indices 0-255 / 0-7)
  into the other operand set while the consumers run chunk c, and the copies of chunk
  c + 2's rows into its private raw tiles as soon as chunk c + 1's rows stage has read
  them.

Operand sets (two, by chunk parity): q-hat, k-hat, P ([C, K] / [C, C] SW128: wgmma's
operands), W0, -M, the inverses, the factor rows and e^Gam_last; the producer's own: the raw
q, k, v rows (one set: free after the rows stage), the gate and beta rows (two: the Gram
reads them after the next copies are issued) and M's diagonal blocks. ~200 KB at
K = V = 128.

Hand-over through named barriers (bar.sync / bar.arrive, 512 threads each, ids below):
FULL[b] - the producer arrives after the set b stages (each thread's generic stores
fenced for the async proxy first), the consumers wait before the chain; EMPTY[b] - the
consumers arrive once chunk c's chain has retired its last wgmma group (the state update
reads k-hat), the producer waits before writing set b for chunk c + 2. Producer-internal
ordering (raw rows landed, rows stage done before the Gram reads it) is a 256-thread
named barrier. No barrier is left with arrivals nobody waits for: EMPTY is arrived only
for chunks c with c + 2 < chunks.

Registers: the 512-thread CTA starts at 128 per thread; the consumers raise theirs to
CONSUMER_REGS and the producer lowers its own to PRODUCER_REGS (setmaxnreg, per
warpgroup; 2 x 128 x 216 + 2 x 128 x 40 = 65,536).

GDN, bf16, K = V = 128, sm_90a: the plain forward, the training launchers (the consumers
store the state entering each chunk, from registers final at the chunk's top since each
chain retires its update, and the chain stores U as the scaled kernel's does) and the
output-free build (the backward's recompute: no q copy, q-hat, P or O): the configs the
knob reaches (frost_fwd_experiments.ws_applies).
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16
from cutlass.cute.nvgpu import warpgroup

from cudnn.linear_attention.frost.kernels.checkpoints_dsl import packed_row0
from cudnn.linear_attention.frost.kernels.config import WS_ROLE_THREADS, FrostFwdConfig, register_split_ok
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, PAD16, SUB, SW128, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import lane_in_loop, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import ScaledDecayChain
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds

CONSUMER_WARPS = 8
PRODUCER_WARPS = 8
ROLE_THREADS = WS_ROLE_THREADS  # threads of either role
BLOCK_THREADS = 32 * (CONSUMER_WARPS + PRODUCER_WARPS)
# 216 leaves the chain (the scaled kernel's, 223 registers with everything) unspilled; the
# producer's 40 spill its Gram tiles' swizzled ldmatrix addresses (~50 local loads and
# stores per chunk, sm_90a build: frost_compile_ws_test), the cheaper side to spill
CONSUMER_REGS = 216
PRODUCER_REGS = 40
# with the wgmma Gram in the producer (gram knob): at 40 ptxas ignores the producer's
# setmaxnreg ("to maintain minimum register requirements": every role at 128, the chain
# spilled 576 bytes), at 48 the m64n32 Gram's wgmma are serialized for want of registers
# and the m64n16 one's are not; 208 costs the chain a few spills (sm_90a builds)
GRAM_WGMMA_REGS = (208, 48)
assert register_split_ok((CONSUMER_REGS, PRODUCER_REGS)) and register_split_ok(GRAM_WGMMA_REGS)
SETS = 2  # operand sets, by chunk parity
# named barrier ids (0 is __syncthreads, used once before the roles split)
BAR_PRODUCER = 1
BAR_FULL = 2  # + set
BAR_EMPTY = BAR_FULL + SETS  # + set


@cute.jit
def zero_blocks(tile: cute.Tensor, tid, threads: cutlass.Constexpr, above: cutlass.Constexpr):
    """Zero the 16 x 16 blocks above (or below) the diagonal blocks of every [C, C] square
    stacked in tile ([SETS C, C]: each operand set's), threads tid of `threads` sharing
    the work: the blocks no Gram stage or solve writes and a wgmma reads whole."""
    C = CHUNK
    rows = cute.size(tile, mode=[0])
    for u in cutlass.range_constexpr(rows * C // threads):
        idx = tid + u * threads
        t, col = idx // C, idx % C
        if cutlass.const_expr(above):
            if (t % C) // SUB < col // SUB:
                tile[t, col] = BFloat16(0.0)
        else:
            if (t % C) // SUB > col // SUB:
                tile[t, col] = BFloat16(0.0)


def waits_for_release(i):
    """Whether the producer waits on EMPTY before writing chunk i's set (i % SETS): the
    set's previous chunk, i - SETS, exists."""
    return i >= SETS


def releases(i, chunks):
    """Whether the consumers arrive on EMPTY after chunk i's chain: only where the producer
    will wait for it (chunk i + SETS exists), so no barrier keeps arrivals at exit."""
    return i + SETS < chunks


def smem_plan(c: FrostFwdConfig):
    """Two operand sets stacked as double-height tiles (set b = rows [C b, C b + C)), the
    producer's raw rows and M's diagonal blocks."""
    K, V, C = c.K, c.V, CHUNK

    def rows(name, r, cols):
        return (name, "bf16", (r, cols), (cols + PAD16, 1))

    return [
        ("q", "bf16", (2 * C, K), SW128), ("k", "bf16", (2 * C, K), SW128), ("p", "bf16", (2 * C, C), SW128),
        rows("w0", 2 * C, V), rows("mneg", 2 * C, C),
        ("dinv", "bf16", (2 * NBLK, SUB, SUB), (SUB * 24, 24, 1)),
        ("fac", "f32", (2, 3, C), (3 * C, C, 1)), ("alast", "f32", (2,), (1,)),
        rows("rq", C, K), rows("rk", C, K), rows("rv", C, V),  # raw rows (the producer's)
        ("g", "f32", (2 * C, 1), (1, 1)), ("beta", "f32", (2 * C,), (1,)),  # raw, then scanned
        ("md", "f32", (NBLK, SUB, SUB), (SUB * 17, 17, 1)),
    ]


class WarpSpecialisedChain(ScaledDecayChain):
    """Mixin over FrostFwdWgmma: the scaled-decay GDN forward with a producer and a consumer
    role per CTA (module docstring). Put first in the bases."""

    smem_plan = staticmethod(smem_plan)
    warp_specialised = True
    #: (consumer, producer) setmaxnreg (multiples of 8; 256 x their sum <= 65,536): the
    #: tooling's override (ws_regs); None: split_mma_gram, or split_wgmma_gram beside the
    #: wgmma Gram knob (the kernel's own defaults)
    register_split = None
    split_mma_gram = (CONSUMER_REGS, PRODUCER_REGS)
    split_wgmma_gram = GRAM_WGMMA_REGS

    def __init__(self, cfg: FrostFwdConfig):
        if (cfg.K, cfg.V) != (128, 128):
            raise ValueError(f"{type(self).__name__}: built for K = V = 128 (two consumer warpgroups), got "
                             f"K={cfg.K}, V={cfg.V}")
        super().__init__(cfg)
        default = self.split_wgmma_gram if getattr(self, "gram_wgmma", False) else self.split_mma_gram
        self.take_register_split(self.register_split or default)

    def take_register_split(self, regs):
        """The setmaxnreg counts per role, from the override or the kernel's default."""
        self.consumer_regs, self.producer_regs = regs

    @property
    def block_threads(self) -> int:
        return BLOCK_THREADS

    # ------------------------------------------------------------------ operand sets
    def set_views(self, s, b):
        """Operand set b (0 or 1, a run-time value) as the stages' tile names."""
        K, V, C = self.cfg.K, self.cfg.V, CHUNK
        return SimpleNamespace(
            q=cute.local_tile(s.q, (C, K), (b, 0)), k=cute.local_tile(s.k, (C, K), (b, 0)),
            p=cute.local_tile(s.p, (C, C), (b, 0)), w0=cute.local_tile(s.w0, (C, V), (b, 0)),
            mneg=cute.local_tile(s.mneg, (C, C), (b, 0)), dinv=cute.local_tile(s.dinv, (NBLK, SUB, SUB), (b, 0, 0)),
            fac=s.fac[b, None, None], alast=cute.local_tile(s.alast, (1,), (b,)),
            g=cute.local_tile(s.g, (C, 1), (b, 0)), beta=cute.local_tile(s.beta, (C,), (b,)),
            md=s.md, gmem=s.gmem, values=s.values)

    def raw_views(self, s, b):
        """The producer's copy targets for a chunk of parity b, named as the pipelined layer's prefetch
        (prefetch_rows, prefetch_v) names them."""
        C = CHUNK
        return SimpleNamespace(q=s.rq, k=s.rk, w0=s.rv, g=cute.local_tile(s.g, (C, 1), (b, 0)),
                               beta=cute.local_tile(s.beta, (C,), (b,)), gmem=s.gmem)

    def chunk_tiles(self, s, t0):
        """The consumers pass the chunk's set itself (set_views)."""
        return s

    @cute.jit
    def prefetch_next_rows(self, s, t0, eos, lane, wid):
        """The producer copies the rows; the chain issues none."""
        pass

    @cute.jit
    def after_rhs_reads(self, s, heads, t0, eos, lane, wid):
        pass

    # ------------------------------------------------------------------ the CTA's work
    def roles_setup(self, s, mq, mk, mv, mg, mb, mw, mcu, T, n, h):
        """(tid, lane, warp, heads, bos, eos, chunks) of the CTA's sequence n on output head
        h, with the global views kept in s.gmem for the copies. Traced inline."""
        c = self.cfg
        tid, _, _ = cute.arch.thread_idx()
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        heads = c.heads_of(h)
        bos, eos = sequence_bounds(mcu, n, T)
        chunks = (eos - bos + CHUNK - 1) // CHUNK
        s.gmem = SimpleNamespace(q=mq, k=mk, v=mv, g=mg, b=mb, w=mw, heads=heads)
        return tid, lane, wid, heads, bos, eos, chunks

    @cute.jit
    def sequence(self, s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h):
        """Sequence n on output head h (the base layer's kernel calls it, its grid's zeroing row as
        before): P's blocks above the diagonal zeroed in both sets (every thread), then the
        roles."""
        c = self.cfg
        tid, lane, wid, heads, bos, eos, chunks = self.roles_setup(s, mq, mk, mv, mg, mb, mw, mcu, T, n, h)
        if cutlass.const_expr(c.write_output):  # P serves the output only
            zero_blocks(s.p, tid, BLOCK_THREADS, True)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()
        if wid >= CONSUMER_WARPS:
            cute.arch.setmaxregister_decrease(self.producer_regs)
            self.produce(s, mb, heads, bos, eos, chunks, scale, tid - ROLE_THREADS, wid - CONSUMER_WARPS, lane)
        else:
            cute.arch.setmaxregister_increase(self.consumer_regs)
            self.consume(s, mo, mh0, mht, mckpt, mcu, T, N, heads, n, h, bos, eos, chunks, wid, lane)

    # ------------------------------------------------------------------ producer
    @cute.jit
    def copy_rows(self, s, t0, bos, eos, ptid, pwid, lane):
        """Chunk t0's q, k, v into the raw tiles and its gates and beta into their parity's
        rows (the pipelined layer's copies at producer indices), one committed group."""
        raw = self.raw_views(s, ((t0 - bos) // CHUNK) % SETS)
        self.prefetch_rows(raw, t0, eos, ptid)
        self.prefetch_v(raw, t0, eos, lane, pwid)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def produce(self, s, mb, heads, bos, eos, chunks, scale, ptid, pwid, lane):
        C = CHUNK
        if chunks > 0:
            self.copy_rows(s, bos, bos, eos, ptid, pwid, lane)
        for i in cutlass.range(chunks, unroll=1):
            t0 = bos + i * C
            b = i % SETS
            # thread indices read again per chunk (volatile): hoisted, the addresses made
            # from them stay live across the loop and spill at the producer's registers
            ptid = tid_in_loop() - ROLE_THREADS
            lane = lane_in_loop()
            thr = warp_mma().get_slice(lane)
            cute.arch.cp_async_wait_group(0)
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)  # raw rows landed
            if waits_for_release(i):  # set b free: chunk i - SETS's chain retired its reads
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            self.rows_from(st, s.rq, s.rk, s.rv, ptid)  # the pipelined layer's rows stage, raw tiles into set b
            cute.arch.barrier(barrier_id=BAR_PRODUCER, number_of_threads=ROLE_THREADS)  # raw rows read
            if i + 1 < chunks:
                self.copy_rows(s, t0 + C, bos, eos, ptid, pwid, lane)
            self.write_factors(st, scale, ptid)
            self.producer_gram(st, mb, heads, t0, eos, scale, thr, lane, pwid)  # ends with the proxy fence
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    @cute.jit
    def producer_gram(self, st, mb, heads, t0, eos, scale, thr, lane, pwid):
        """The Gram stage on set st at producer warp pwid: the wgmma layer's (mma.sync tiles dealt to the
        8 warps), or with the wgmma Gram knob (fwd_wgmma_gram.GramWgmma in the bases, the
        tooling's gram="wgmma"), M on the producer's first warpgroup and P on its second,
        whose SS wgmma need no per-thread ldmatrix addresses (what spills at 40 registers).
        Either ends with the proxy fence."""
        if cutlass.const_expr(getattr(self, "gram_wgmma", False)):
            from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma

            GramWgmma.stage_gram(self, st, mb, heads, t0, eos, scale, thr, lane, pwid)
        else:
            FrostFwdWgmma.stage_gram(self, st, mb, heads, t0, eos, scale, thr, lane, pwid)

    # ------------------------------------------------------------------ consumers
    @cute.jit
    def consumer_chain(self, st, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """One chunk's chain on operand set st: the scaled kernel's (fwd_ws_wy.py's has its own)."""
        ScaledDecayChain.chunk_chain(self, st, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid)

    def chunk_views(self, s, i):
        """What chunk i's chain reads: operand set i mod SETS. Traced inline."""
        return self.set_views(s, i % SETS)

    @cute.jit
    def release_chunk(self, i, chunks):
        """After chunk i's chain retired its reads: EMPTY for its set, where the producer
        waits for it."""
        if releases(i, chunks):
            cute.arch.barrier_arrive(barrier_id=BAR_EMPTY + i % SETS, number_of_threads=BLOCK_THREADS)

    @cute.jit
    def consume(self, s, mo, mh0, mht, mckpt, mcu, T, N, heads, n, h, bos, eos, chunks, wid, lane):
        c = self.cfg
        C = CHUNK
        row0 = 0
        if cutlass.const_expr(c.write_checkpoints):
            row0 = packed_row0(mcu, n, T, lane)  # checkpoints_dsl.py
        thr = warp_mma().get_slice(lane)
        acc_s, coord_s = self.initial_state(mh0, n, h, thr, wid)
        for i in cutlass.range(chunks, unroll=1):
            t0 = bos + i * C
            b = i % SETS
            if cutlass.const_expr(c.write_checkpoints):  # the state entering chunk i: final (retired below)
                self.store_state(mckpt, row0 + i, T // C + N, h, acc_s, coord_s, wid)
            cute.arch.barrier(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)
            if cutlass.const_expr("chain" not in self.skip_stages):  # skipped: a timing experiment's
                self.consumer_chain(self.chunk_views(s, i), mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid)
            warpgroup.wait_group(0)  # the state update read k-hat: retired before set b is released
            self.release_chunk(i, chunks)
        if cutlass.const_expr(c.has_final_state):
            coord_ht = self.final_state_coords(coord_s)
            for e in cutlass.range_constexpr(cute.size(acc_s)):
                jd = coord_ht[e]
                mht[n, h, wid * SUB + jd[0], jd[1]] = acc_s[e].to(self.st)
