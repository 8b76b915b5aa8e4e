"""FROST backward, kernel 2, on warpgroup MMA (``FrostBwdConfig.chain_wgmma``, NOTES_bwd.md v1.7).

The serial chain (bwd_chain.py) runs its chain step as per-warp m16n8k16 mma.sync, each warp
on its own 16 value rows of dS^T: 212 of its 232 mma.sync per chunk are the two big
products (dU^T's dS^T KD^T and dO^T P, the update's dO^T QA and dR^T (-KBA)), and every
warp reloads their B operands (P^T, KD, QA^T, -KBA^T) from shared memory by ldmatrix. As
fwd_wgmma did for the forward's state products, those two products move onto Hopper's
warpgroup MMA (wgmma m64nNk16, bf16 in, fp32 accumulate): the 2V / 32 warps are V / 64
warpgroups, each owning the 64 rows of dS^T its four warps already hold, and the B
operands are read by the tensor cores straight from shared memory, once per warpgroup.

1. dU^T [64, C] = dO^T P + dS^T KD^T (one wgmma group, N = C): A = dO^T (the warp's
   ldmatrix fragment, bwd_chain.chain_do) for C / 16 k-blocks, then bf16(dS^T) for K / 16
   (dS^T's decay by e^Gam_last runs while the group does: it reads the bf16 copy);
   B = P^T [t, s] and KD [t, k], both SW128 (K-major: the reduction index contiguous, as
   the serial chain already stores them). P^T's blocks below the diagonal (P[s, t] = 0 for
   s < t), never written by the Gram stage, are zeroed once (before_chunks). Waited for
   at once: the back substitution needs it.
2. dR^T: the serial chain's per-warp back substitution (chain_dr, mma.sync on (-M)^T and
   D^-T, 20 per warp; the dR rows into the warp's store buffer), fed with the warpgroup
   accumulator's four 16 x 16 blocks (block bi is values [per bi, per (bi + 1)) of each
   thread's accumulator).
3. dS^T <- dS^T Diag(e^Gam_last) + dO^T QA + dR^T (-KBA) (one group, N = K) into the
   fp32 dS^T registers themselves: A = dO^T and dR^T blocks, B = QA^T [k, t] and -KBA^T
   [k, t] (SW128); per token block QA before KBA, the serial chain's order. The staged dR
   rows go to global memory while it runs (flush_dr). Waited for at the chain's end (the
   next chunk's checkpoint store reads dS^T, its operand stage rewrites QA^T and -KBA^T),
   or, with ``FrostBwdConfig.chain_async`` (below), after the next chunk's rows stage.

Asynchronous update (``chain_async``, NOTES_bwd.md v1.10): the update group stays in
flight across the chunk boundary. What it reads until retired: QA^T and -KBA^T (shared,
through the async proxy), dO^T's and dR^T's A fragments and the dS^T accumulator
(registers, written by it). The end of the chunk (the cp.async wait of the prefetched
rows, the barrier), the next chunk's rows stage and, scalar gates, its Gram stage touch
none of them: the rows stage reads the prefetched q, k, gates, beta (and dO) slots and
writes q-hat, k-hat, dO^T and the gate scan in place; the scalar Gram reads q-hat, k-hat,
the scan and beta and writes P^T, (-M)^T, M's diagonal blocks and their inverses (P^T is
dU's operand, retired a chunk earlier); none is an update operand, and no register of the
group is written. So each warpgroup retires its group (wait_group 0) after those stages,
before the barrier behind which the operand stage rewrites QA^T and -KBA^T (every
warpgroup's reads done before any thread's write: the barrier orders them; a generic write
after an async-proxy read that was waited for needs no proxy fence), and only then stores
the dS^T checkpoint (prep_chunk). Vector gates keep the Gram after the operand stage (it
reads the operand stage's qr, kbr, KE and X tables): only their rows stage runs under the
group. After the last chunk, after_chunks retires it before d_initial_state is read. The
products, their operands and k16 order are the synchronous schedule's: the gradients are
bitwise the same. The operand stage cannot run under the group: it rewrites the group's B
tiles, and a second QA^T and -KBA^T (32 KB at K = 128) does not fit beside the vector
plans; the GDN plan has room, but its rows and Gram stages already outlast the group
(NOTES_bwd.md v1.10).

The warp fragments (the fp32 dS^T accumulator over [16, K], the bf16 A fragments of
dO^T, dS^T and dR^T) are handed to the warpgroup MMA unchanged: fwd_wgmma.check_fragment_orders
checks, on the layouts this CuTe DSL traces, that a warp's m16n8k16 fragment is the
warpgroup's m64nNk16 fragment value for value (the compile fails otherwise). The operand
and Gram stages write the four SW128 tiles with ordinary stores (the tensors carry the
swizzle) and fence the generic proxy against the async proxy before their barriers.

Rows, operands, Gram, inverses, prefetch and the dR stores are the serial chain's code.
The sums are the serial chain's terms in another order inside a k16 step (the tensor
core's, not mma.sync's) and, for dU, P's blocks before KD's over all four blocks at once:
gradients match the serial chain within fp32 rounding, not bitwise.

Vector gates (KDA, GDN-2; NOTES_bwd.md "Vector-gate chain on warpgroup MMA") run the
same class: their per-channel decays live inside the operand tiles (QA^T, -KBA^T and KD
carry e^Gam per channel and token, made by the serial operand stage) and in e^Gam_last
per channel (chain_decay, on the registers), so the four B operands are plain [C, K] /
[K, C] bf16 tiles as for GDN. What differs lies around the products: the vector Gram
(KE, X, qr, kbr tables; the exact diagonal fallback stores P^T through the same
store_gram), dO^T staged from global memory in the rows stage (no raw dO slot), and at
K = V = 128 no room for the dR store buffers (dR leaves element-wise, as in the serial
vector chain).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import warpgroup

from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
from cudnn.linear_attention.frost.kernels.bwd_chain import FrostBwdChain, _base_plan
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fragment_stores import store_rows_vectorised
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, SW128, to_a_operand, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma import (
    WG_ROWS,
    WG_THREADS,
    _tv,
    assemble_a,
    block_of,
    check_fragment_orders,
    wgmma,
)
from cudnn.linear_attention.frost.kernels.wgmma_fragments import blocks_view_match, tv_size

#: the chain's B operands, read by wgmma from shared memory: SW128 tiles, unpadded
WGMMA_B = ("pt", "kd", "qat", "kbat")


def smem_plan(c: FrostFwdConfig):
    """The serial chain's plan with P^T [C, C], KD [C, K], QA^T and -KBA^T [K, C] as SW128
    tiles, first (1024-byte aligned without padding), then the per-warp dR buffers where
    they fit (every scalar-gate plan; vector gates at K = 64 only)."""
    base = _base_plan(c)
    tiles = [(name, "bf16", shape, SW128) for name, _, shape, _ in base if name in WGMMA_B]
    assert len(tiles) == len(WGMMA_B), base
    return vio.with_warp_buffers(tiles + [e for e in base if e[0] not in WGMMA_B], c)


def check_block_order(wg, mma, n: int) -> None:
    """Trace-time check: the warpgroup accumulator (N = n) holds, per thread, the warp's
    16 x 16 accumulator blocks 0 .. n / 16 - 1 one after the other (what cutting acc_du
    into blocks and running the update into dS^T's warp registers assume)."""
    wg_tv, warp_tv = _tv(wg.tv_layout_C), _tv(mma.tv_layout_C_tiled)
    per = tv_size(warp_tv)[1]
    if not blocks_view_match(wg_tv, WG_ROWS, warp_tv, SUB, per, n // SUB):
        raise ValueError(f"bwd_chain_wgmma: the wgmma m64n{n}k16 accumulator {wg_tv} is not the warp's "
                         f"16 x 16 blocks {warp_tv} in order; the register hand-over would be wrong")


class FrostBwdChainWgmma(FrostBwdChain):
    """Callable for cute.compile (bwd_abi's argument list), as FrostBwdChain."""

    smem_plan = staticmethod(smem_plan)

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_wgmma or cfg.stage != "chain":
            raise ValueError("FrostBwdChainWgmma: a chain config with chain_wgmma set")
        super().__init__(cfg)
        self.staged = vio.has_warp_buffers(smem_plan(cfg.fwd))

    # ------------------------------------------------------------------ staging
    @cute.jit
    def before_chunks(self, s, tid):
        """Zero P^T's blocks below the diagonal (P[s, t] = 0 for s < t): the Gram stage
        writes only the blocks at and above it, and dU's wgmma reads the whole tile."""
        s_pt = s.pt
        C = CHUNK
        for u in cutlass.range_constexpr(C * C // self.threads):
            idx = tid + u * self.threads
            t, col = idx // C, idx % C
            if t // SUB > col // SUB:
                s_pt[t, col] = BFloat16(0.0)
        cute.arch.fence_proxy("async.shared", space="cta")

    @cute.jit
    def stage_operands(self, s, mb, heads, t0, eos, scale, tid):
        """The serial operand stage (KD, QA^T, -KBA^T into their SW128 tiles), then a proxy
        fence: the generic stores must be visible to wgmma after the stage's barrier."""
        FrostBwdChain.stage_operands(self, s, mb, heads, t0, eos, scale, tid)
        cute.arch.fence_proxy("async.shared", space="cta")

    @cute.jit
    def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
        """The serial Gram stage, then the same fence for its P^T stores."""
        FrostBwdChain.stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid)
        cute.arch.fence_proxy("async.shared", space="cta")

    @cute.jit
    def prep_chunk(self, s, mckpt, acc_ds, mq, mk, mv, mg, mb, mw, heads, t0, eos, scale, tid, thr, lane, wid):
        """Synchronous update: the serial order (checkpoint store, rows, operands, Gram).
        Asynchronous: the rows stage and, scalar gates, the Gram stage (it reads only the
        rows stage's q-hat, k-hat, gate scan and beta, and writes P^T, (-M)^T and the
        inverses, none read by the update) under the previous chunk's update group; then
        its retirement (dS^T final; QA^T and -KBA^T free for the operand stage behind the
        next barrier), the checkpoint store of dS^T and the operand stage; vector gates
        (their Gram reads the operand stage's tables) the Gram stage after it. The first
        chunk's wait finds no group (a no-op). Three barriers either way."""
        if cutlass.const_expr(self.bcfg.chain_async):
            self.stage_rows(s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid)
            if cutlass.const_expr(not self.cfg.gate_per_channel):
                cute.arch.sync_threads()  # the Gram reads every warp's rows
                self.stage_gram(s, mb, heads, t0, eos, scale, thr, lane, wid)
            warpgroup.wait_group(0)
            store_rows_vectorised(mckpt, acc_ds, wid * SUB, lane, self.cfg.K)
            cute.arch.sync_threads()
            self.stage_operands(s, mb, heads, t0, eos, scale, tid)
            if cutlass.const_expr(self.cfg.gate_per_channel):
                cute.arch.sync_threads()
                self.stage_gram(s, mb, heads, t0, eos, scale, thr, lane, wid)
        else:
            FrostBwdChain.prep_chunk(self, s, mckpt, acc_ds, mq, mk, mv, mg, mb, mw, heads, t0, eos, scale, tid,
                                     thr, lane, wid)

    @cute.jit
    def after_chunks(self):
        """Asynchronous update: the last chunk's group, before dS^T is read as
        d_initial_state (and before the kernel exits with it in flight)."""
        if cutlass.const_expr(self.bcfg.chain_async):
            warpgroup.wait_group(0)

    # ------------------------------------------------------------------ chain
    @cute.jit
    def chain(self, s, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid):
        """dU^T on wgmma, dR^T per warp (the serial chain_dr), the dS^T update on wgmma."""
        K, C = self.cfg.K, CHUNK
        mma = warp_mma()
        wg_du = wgmma(C)  # dU^T: N = C
        wg_st = wgmma(K)  # the dS^T update: N = K
        check_fragment_orders(wg_du, mma, C)
        check_fragment_orders(wg_st, mma, K)
        check_block_order(wg_du, mma, C)
        check_block_order(wg_st, mma, K)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane  # thread index inside the warpgroup
        g_du = wg_du.get_slice(wtid)
        g_st = wg_st.get_slice(wtid)
        if cutlass.const_expr(not self.bcfg.chain_async):
            # a no-op at run time (the previous step waited for its update at its end), but
            # without it ptxas did not see that wait on the loop's back edge and injected one
            # after the dU group's commit (C7517), so the dS^T decay waited for dU
            warpgroup.wait_group(0)

        # dO^T [64, C] (this warp's 16 rows, every token block) as the warpgroup's A
        a_do = self.chain_do(s, thr, lane, wid)
        a_dow = assemble_a([a_do[None, None, kk] for kk in range(NBLK)], g_st.partition_shape_A((WG_ROWS, C)))

        # 1. dU^T = dO^T P + dS^T KD^T (one group; the solve waits for it)
        acc_du = cute.make_rmem_tensor(g_du.partition_shape_C((WG_ROWS, C)), Float32)
        acc_du.fill(0.0)
        a_ds = to_a_operand(acc_ds, g_du.partition_shape_A((WG_ROWS, K)))
        b_p = wg_du.make_fragment_B(g_du.partition_B(s.pt))
        b_kd = wg_du.make_fragment_B(g_du.partition_B(s.kd))
        wg_du.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.fence()
        for kk in cutlass.range_constexpr(C // 16):
            cute.gemm(wg_du, acc_du, a_dow[None, None, kk], b_p[None, None, kk], acc_du)
        for kk in cutlass.range_constexpr(K // 16):
            cute.gemm(wg_du, acc_du, a_ds[None, None, kk], b_kd[None, None, kk], acc_du)
        warpgroup.commit_group()
        # dS^T's decay while dU runs (dU reads its bf16 copy; the update's fence follows)
        self.chain_decay(s, acc_ds, coord)
        warpgroup.wait_group(0)

        # 2. dR^T per warp (mma.sync), from the accumulator's four 16 x 16 blocks
        du_blocks = [block_of(acc_du, bi, thr.partition_shape_C((SUB, SUB))) for bi in range(NBLK)]
        a_dr = self.chain_dr(s, mdr, du_blocks, heads, t0, eos, thr, lane, wid, False)
        a_drw = assemble_a(a_dr, g_st.partition_shape_A((WG_ROWS, C)))

        # 3. dS^T <- dS^T Diag(e^Gam_last) + dO^T QA + dR^T (-KBA), in the dS^T registers
        acc_w = cute.make_tensor(acc_ds.iterator, cute.make_layout(g_st.partition_shape_C((WG_ROWS, K))))
        b_qa = wg_st.make_fragment_B(g_st.partition_B(s.qat))
        b_kb = wg_st.make_fragment_B(g_st.partition_B(s.kbat))
        wg_st.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.fence()
        for bi in cutlass.range_constexpr(NBLK):
            cute.gemm(wg_st, acc_w, a_dow[None, None, bi], b_qa[None, None, bi], acc_w)
            cute.gemm(wg_st, acc_w, a_drw[None, None, bi], b_kb[None, None, bi], acc_w)
        warpgroup.commit_group()
        if cutlass.const_expr(self.staged):
            self.flush_dr(s, mdr, heads, t0, eos, lane, wid)  # the dR rows while the update runs
        if cutlass.const_expr(not self.bcfg.chain_async):
            warpgroup.wait_group(0)  # dS^T is final before the checkpoint store reads it
        # else: retired in the next chunk's prep_chunk, or in after_chunks
