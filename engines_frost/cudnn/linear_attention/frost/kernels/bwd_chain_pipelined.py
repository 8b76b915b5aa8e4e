"""FROST backward, kernel 2, pipelined (``FrostBwdConfig.chain_pipeline``, NOTES_bwd.md v1.6).

The serial chain (bwd_chain.py) runs, per chunk, its prep (rows, operands, Gram and
inverses: nothing there depends on dS) and then its chain (dU, dR, the dS update), each
stage behind a CTA barrier. Here the same 8 warps run chunk j's chain and chunk j - 1's
prep in the same barrier phases (three per chunk instead of the serial chain's four; two of
them hold both streams), so a warp stalled on the chain's MMAs has prep work to issue.
Same stages, same code (FrostBwdChain's), same grid and threads; scalar gates only.

Which shared tensors need a second copy follows from when each is read and written:
the chain reads P^T, KD in its dU part, (-M)^T and D^-T in its dR part, QA^T, -KBA^T and
e^Gam_last in the dS update, dO^T in both dU and the update (read twice from shared
memory: held in registers from dU to the update, ptxas ran out of them at 255 with an
8-byte stack); the prep writes dO^T (rows), KD, QA^T, -KBA^T, e^Gam_last (operands) and
P^T, (-M)^T, M_ii, D^-T (Gram). dO^T, QA^T, -KBA^T and e^Gam_last are written while the
chain still reads them, so they alone have two copies (chunk j's in copy j % 2; GDN
K = V = 128: 225.6 KB of the 227 KB, the dR store buffers included).

Protocol (b = j % 2; every barrier is bar.sync 0 over all 2V threads and none sits inside a
data-dependent branch, so all threads pass the same barriers in the same order):

  prologue  cp.async rows + dO rows of chunk nch-1; wait_group 0; BAR;
            rows(nch-1); BAR; operands(nch-1); BAR; Gram(nch-1); BAR   (copy (nch-1) % 2)
            cp.async rows + dO rows of chunk nch-2 (if nch >= 2).
  per chunk j = nch-1 .. 0 (the prep is chunk j-1's, into copy 1-b):
  A  dO^T[b] -> registers; dU (P^T, KD);
     wait_group 0 (chunk j-1's rows landed);                                     BAR 1
  B  dR (-M^T, D^-T; warp-private store buffer, warp barriers only); dS -> its
     checkpoint row; rows(j-1): q^, k^ in place, dO^T[1-b], gate scan            BAR 2
  C  dO^T[b] -> registers; dS *= e^Gam_last[b];
     dS += dO^T QA[b] + dR^T (-KBA[b]) for token blocks 0, 1;
     operands(j-1) -> KD, QA[1-b], KBA[1-b], e^Gam_last[1-b];
     Gram + inverses(j-1) -> P^T, (-M)^T, M_ii, D^-T                            BAR 3
     cp.async q, k, gate, beta and dO rows of chunk j-2 (if j >= 2)
  D  dO^T[b] -> registers; the update for blocks 2, 3 (no barrier: D runs into the
     next chunk's A, so the copies issued after BAR 3 land during D and A, not A alone)

Hazards this excludes: P^T, KD are read in A and written in C (after BAR 1); (-M)^T, D^-T
read in B, written in C (after BAR 2); copy b of the doubled tensors is read during chunk
j's phases and the following D, copy 1-b only written; copy 1-b's last reader (chunk
j+1's D) runs before this chunk's BAR 1, and its writers (rows in B, operands in C) after
it. For scalar gates the Gram reads q^, k^, the gate scan and beta (rows stage, B) and
nothing the operand stage writes, so operands and Gram share phase C (the serial chain has
a barrier between them). The staging (q, k, g, beta, dO rows) is read in B and C and
refilled after BAR 3; its next reader (rows, phase B) is behind the next BAR 1, which
follows the wait_group. The copies have D and A (half the update and dU, ~1.2 us) to
land: with one staging buffer they cannot start earlier, and a second one does not fit.
(Issuing the dO rows alone at the start of C, where their staging is already free, took
the recompute-path config with l2norm to 255 registers and a 16-byte stack.) For j = 0
the prep runs for a "chunk -1" on the stale staging: for scalar gates its stages touch
shared memory only and its outputs are never read, and it keeps the prep out of a branch.
engines_frost/tests/frost_chain_pipeline_protocol_test.py checks this protocol
(bwd_chain_schedule.PHASES) for races and for every read seeing its own chunk's data.

The dS update is the serial chain's in the same order per accumulator (decay, then blocks
0..3, QA before KBA), so dS, dR and d_initial_state are meant to be bitwise the serial
chain's.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
from cudnn.linear_attention.frost.kernels.bwd_chain import FrostBwdChain, _base_plan
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.bwd_states import FrostBwdStates
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fragment_stores import store_rows_vectorised
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, allocate_smem, warp_mma

from cudnn.linear_attention.frost.kernels.bwd_chain_schedule import COPIES, DOUBLED


def _copy_stride(dtype: str, shape, stride) -> int:
    """Elements between the two copies of a plan tensor: its span rounded up to 16 bytes."""
    size = 2 if dtype == "bf16" else 4
    span = 1 + sum((extent - 1) * st for extent, st in zip(shape, stride))
    return -(-span * size // 16) * 16 // size


def smem_plan(c: FrostFwdConfig):
    """The serial chain's plan with DOUBLED given a trailing copy mode ([..., 2]), then the
    per-warp dR buffers where they still fit (GDN: at every head dim)."""
    if c.gate_per_channel:
        raise ValueError("the pipelined chain serves scalar gates only (NOTES_bwd.md v1.6)")
    plan = []
    for name, dtype, shape, stride in _base_plan(c):
        if name in DOUBLED:
            shape = (*shape, COPIES)
            stride = (*stride, _copy_stride(dtype, shape[:-1], stride))
        plan.append((name, dtype, shape, stride))
    return vio.with_warp_buffers(plan, c)


def operand_set(s, b):
    """The shared tensors as the stages see them, with copy b of the doubled ones."""
    view = SimpleNamespace(**vars(s))
    for name in DOUBLED:
        t = getattr(s, name)
        setattr(view, name, t[(None,) * (cute.rank(t) - 1) + (b,)])
    return view


class FrostBwdChainPipelined(FrostBwdChain):
    """Callable for cute.compile (bwd_abi's argument list), as FrostBwdChain."""

    smem_plan = staticmethod(smem_plan)

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_pipeline or cfg.stage != "chain":
            raise ValueError("FrostBwdChainPipelined: a chain config with chain_pipeline set")
        super().__init__(cfg)
        self.staged = vio.has_warp_buffers(smem_plan(cfg.fwd))

    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor, mb: cute.Tensor,
               mw: cute.Tensor, mcu: cute.Tensor, mdo: cute.Tensor, mdht: cute.Tensor, mdh0: cute.Tensor,
               mdckpt: cute.Tensor, mdr: cute.Tensor, scale: Float32, T: Int32, N: Int32, mdq: cute.Tensor,
               mdk: cute.Tensor, mdv: cute.Tensor, mdg: cute.Tensor, mdb: cute.Tensor, mdw: cute.Tensor):
        c = self.cfg
        K = c.K
        tid, _, _ = cute.arch.thread_idx()
        n, h, _ = cute.arch.block_idx()
        heads = c.heads_of(h)
        s = allocate_smem(self.smem_plan(c))
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        thr = warp_mma().get_slice(lane)
        acc_ds, coord = self.initial_ds(mdht, n, h, thr, wid)
        bos, eos, nch, row0 = self.chunk_span(mcu, n, T)
        s.gmem = SimpleNamespace(q=mq, k=mk, v=mv, g=mg, b=mb, w=mw, do=mdo, heads=heads)

        # prologue: the last chunk's prep into copy (nch - 1) % 2 (nch = 0: a prep of
        # nothing, shared memory only, never read); then the next chunk's rows in flight
        tl = bos + (nch - 1) * CHUNK
        if nch > 0:
            self.prefetch_chunk(s, tl, eos, tid)
            cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()
        first = operand_set(s, (nch + 1) % 2)  # = (nch - 1) % 2, never negative
        self.stage_rows(first, mq, mk, mv, mg, mb, mw, heads, tl, eos, tid)
        cute.arch.sync_threads()
        self.stage_operands(first, mb, heads, tl, eos, scale, tid)
        cute.arch.sync_threads()
        self.stage_gram(first, mb, heads, tl, eos, scale, thr, lane, wid)
        cute.arch.sync_threads()
        if nch > 1:
            self.prefetch_chunk(s, tl - CHUNK, eos, tid)
            cute.arch.cp_async_commit_group()

        for jj in cutlass.range(nch, unroll=1):
            j = nch - 1 - jj
            t0 = bos + j * CHUNK
            tp = t0 - CHUNK  # the chunk whose prep runs beside this chain
            cur = operand_set(s, j % 2)
            nxt = operand_set(s, (j + 1) % 2)
            # A: dU; the previous chunk's rows land
            a_do = self.chain_do(cur, thr, lane, wid)
            acc_du = self.chain_du(cur, acc_ds, a_do, thr, lane)
            cute.arch.cp_async_wait_group(0)
            cute.arch.sync_threads()
            # B: dR and dS out (before the update in C) beside the rows stage (which
            # writes dO^T's other copy)
            a_dr = self.chain_dr(cur, mdr, acc_du, heads, t0, eos, thr, lane, wid)
            store_rows_vectorised(mdckpt[row0 + j, h, None, None], acc_ds, wid * SUB, lane, K)
            self.stage_rows(nxt, mq, mk, mv, mg, mb, mw, heads, tp, eos, tid)
            cute.arch.sync_threads()
            # C: the dS update (dO^T read again from its copy: not held in registers
            # through B) beside the operand stage and the Gram stage (scalar gates: the
            # Gram reads only the rows stage's q^, k^, gate scan and beta, not what the
            # operand stage writes, so the two need no barrier between them)
            a_do = self.chain_do(cur, thr, lane, wid)
            self.chain_decay(cur, acc_ds, coord)
            self.chain_update(cur, acc_ds, a_do, a_dr, 0, NBLK // 2, thr, lane)
            self.stage_operands(nxt, mb, heads, tp, eos, scale, tid)
            self.stage_gram(nxt, mb, heads, tp, eos, scale, thr, lane, wid)
            cute.arch.sync_threads()
            if j > 1:  # q, k, gates, beta: read by the operand and Gram stages until BAR 3
                self.prefetch_chunk(s, tp - CHUNK, eos, tid)
                cute.arch.cp_async_commit_group()
            # D (no barrier: it runs into the next chunk's A, beside those copies): the
            # update's other half. Its tensors (copy b) are next written by chunk j-2's
            # rows and operand stages, behind the next chunk's BAR 1 and BAR 2.
            a_do = self.chain_do(cur, thr, lane, wid)
            self.chain_update(cur, acc_ds, a_do, a_dr, NBLK // 2, NBLK, thr, lane)
        if cutlass.const_expr(self.bcfg.dh0_dtype is not None):
            for e in cutlass.range_constexpr(cute.size(acc_ds)):
                jd = coord[e]
                mdh0[n, h, wid * SUB + jd[0], jd[1]] = acc_ds[e].to(mdh0.element_type)
        if cutlass.const_expr(self.bcfg.forward_values):
            # as the serial chain: no states / values kernel ran, so the gradient rows no
            # sequence covers are zeroed here, before grads writes the others
            if n == N - 1 and wid == 0:
                FrostBwdStates.zero_gradient_rows(self, mcu, T, N, mdq, mdk, mdv, mdg, mdb, mdw, h, lane)
