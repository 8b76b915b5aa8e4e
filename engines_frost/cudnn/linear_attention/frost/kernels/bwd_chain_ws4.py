"""FROST backward, kernel 2, scalar gates, in four roles per CTA (FrostBwdConfig.chain_ws4;
NOTES_bwd.md "The wy chain in four roles"). FrostBwdChainWs4RawInChain below is the
product's GDN chain at K = V = 128 with bf16 io (bwd.product_choice); the other forms are
the test tooling's (FROST_BWD_CHAIN=wgmma_ws4, _ws4c, _ws4raw: frost_bwd_experiments.py).

bwd_chain_ws_wy.py's consumers step the chain without its back substitution (dU^T, dR^T =
dU^T A, dS^T <- dS^T e^Gam_last + (dO^T fo) Q + dU^T W'); its producer, eight warps at 72
registers, ran the rows, the Gram on mma.sync, the inverses and the solves for A and W' and
paced the kernel (0.675 ms on an H100 against the scaled chain's ~0.45 on an H200). The
forward met the same bound and split the producer by what it needs (fwd_ws4.py); here the
same split, walking the chunks backwards:

- warps 0-7 (warpgroups 0, 1), the chain (REGISTER_SPLIT: 184 registers):
  bwd_chain_ws_wy.py's consumers unchanged;
- warps 8-11 (warpgroup 2), math (120): the rows stage from the raw tiles (q-hat, k-hat,
  the gate scan), the factor rows, both Gram products as SS wgmma on this warpgroup
  (fwd_wgmma_gram.GramWgmma.stage_gram at m64n64, P = q k^T in the forward's orientation, as
  the consumers read it), the diagonal inverses, W' (two row blocks of K per warp) and A's
  column block (a warp each);
- warps 12-15 (warpgroup 3), copies (24): chunk j's raw q, k, gate and beta rows as soon
  as the math warpgroup has read chunk j + 1's, and chunk j's dO rows straight into its
  operand set once the chain has released that set.

Hand-over as fwd_ws4.py's: RAW_FULL / RAW_FREE between copies and math (256 threads),
FULL[b] (math and copies arrive, the chain waits: 512), EMPTY[b] (the chain arrives, math
and copies wait: 512). The gate and beta rows are per set parity; the chain reads only the
factor rows and e^Gam_last, so the copies may overwrite parity b's raw gates while the
chain still runs set b.

FrostBwdChainWs4InChain (chain_a_in_chain, FROST_BWD_CHAIN=wgmma_ws4c) leaves W' out, as
the forward's RawRingInChain does: the math warpgroup solves A alone, and the chain applies
it, its update's (dR^T diag(fr)) K taking dR^T = dU^T A (already formed for the grads
kernel) scaled by fr per token as the A operand and k-hat as B:

    dS^T <- dS^T e^Gam_last + (dO^T diag(fo)) Q + (dR^T diag(fr)) K

The (dO^T fo) Q group is issued before dR^T retires, so the chain waits for dR^T (4 k-steps
after dU) where W' let it issue the whole update at once; the math warpgroup loses its 40
W' products per warp and chunk (in the forward that traded 0.353 for 0.304 ms, H100).

FrostBwdChainWs4Raw / FrostBwdChainWs4RawInChain (chain_raw_rows, FROST_BWD_CHAIN=
wgmma_ws4raw / wgmma_ws4rawc) take the forward's other step (fwd_ws4.RawRing): no rows stage.
The copies bring chunk j - 1's raw q, k, gate and beta rows into ring stage (i + 1) mod RING
(i: the chunk's place in the backward walk) as soon as the chain released the chunk RING
places back, and form the rows' inverse l2 norms there; math scans the gates in the
stage, folds the norms into the factor rows (fk = e^(Gam_last - Gam) nk, fo = scale e^Gam
nq, fr = -beta e^Gam nk) and the Gram's epilogue (GramWgmma.gram_norms), and every wgmma
reads the raw rows: dS^T K^T diag(fk), (dO^T diag(fo)) Q, W' = A diag(fr) K and
(dR^T diag(fr)) K are the k-hat / q-hat products with the norms moved into the per-token
factors. The chain arrives RING_EMPTY of the stage after its last group retired.

GDN, bf16, K = V = 128, sm_90a.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import warpgroup

from cudnn.linear_attention.frost.kernels.bwd_chain_ws_wy import FrostBwdChainWsWy
from cudnn.linear_attention.frost.kernels.bwd_chain_ws_wy import smem_plan as wy_smem_plan
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.config import register_split_ok
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, to_a_operand
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_ROWS, WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import FR, write_decay_factors
from cudnn.linear_attention.frost.kernels.fwd_ws import BAR_EMPTY, BAR_FULL, BLOCK_THREADS, SETS, \
    waits_for_release, zero_blocks
from cudnn.linear_attention.frost.kernels.fwd_ws_wy import mma_group
from cudnn.linear_attention.frost.kernels.fwd_ws_wy import transposed_view as mn_view
from cudnn.linear_attention.frost.kernels.fwd_ws4 import BAR_RAW_FREE, BAR_RAW_FULL, BAR_RING_EMPTY, COPY_TID0, \
    COPY_WARP0, PAIR_THREADS, RING, RING_EMPTY_THREADS, FourRoles, RawRing, ring_decay_factors


#: (chain, math, copies) setmaxnreg (sm_90a, GDN l2norm, 16 heads): the chain at
#: bwd_chain_ws_wy.py's 184 (its consumers unchanged: no spill, no ptxas note), the math
#: warpgroup the rest but the copies' 24. At the forward's 192 / 104 / 24 the math
#: warpgroup spilled 2 stores / 2 reloads; at 184 / 112 and 184 / 120 neither role spills
#: and ptxas leaves no note
REGISTER_SPLIT = (184, 120, 24)
assert register_split_ok(REGISTER_SPLIT, (3,))


class FrostBwdChainWs4(FrostBwdChainWsWy):
    """Callable for cute.compile (bwd_abi's argument list), as FrostBwdChainWsWy."""

    consumer_regs, math_regs, copy_regs = REGISTER_SPLIT
    # the Gram on the math warpgroup: GramWgmma's stage at m64n64, both products on one
    # warpgroup, P in the forward's orientation (the consumers read it as MN-major B)
    gram_n = 64
    gram_warpgroups = 1
    gram_p_transposed = False
    gram_buffers = GramWgmma.gram_buffers
    gram_norms = False
    gram_log2 = False
    row_terms = GramWgmma.row_terms
    gram_issue = GramWgmma.gram_issue
    gram_groups = GramWgmma.gram_groups
    as_role = FourRoles.as_role

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_ws4:
            raise ValueError("FrostBwdChainWs4: a chain config with chain_ws4 set")
        if cfg.chain_ws_regs:
            raise ValueError(f"FrostBwdChainWs4: its register split is its own ({REGISTER_SPLIT}: chain, math, "
                             f"copies); chain_ws_regs must be (), got {cfg.chain_ws_regs!r}")
        super().__init__(cfg)

    @cute.jit
    def zero_set_blocks(self, s, tid):
        """P's and A's blocks above the diagonal in both sets, by every thread before the
        roles split (neither the Gram nor the solves write them; the chain's wgmma read
        the whole tiles)."""
        zero_blocks(s.p, tid, BLOCK_THREADS, True)
        zero_blocks(s.ainv, tid, BLOCK_THREADS, True)

    @cute.jit
    def state_free_roles(self, s, mb, heads, bos, eos, nch, scale, tid, wid, lane):
        if wid >= COPY_WARP0:
            cute.arch.setmaxregister_decrease(self.copy_regs)
            self.copies(s, bos, eos, nch)
        else:
            cute.arch.setmaxregister_decrease(self.math_regs)
            self.math(s, mb, heads, bos, eos, nch, scale)

    # ------------------------------------------------------------------ copies
    @cute.jit
    def copies(self, s, bos, eos, nch):
        """Per chunk (backwards): RAW_FREE, the raw q, k, gate and beta rows, RAW_FULL; then
        the set's release, dO straight into the set, FULL."""
        for i in cutlass.range(nch, unroll=1):
            j = nch - 1 - i
            t0 = bos + j * CHUNK
            b = i % SETS
            ctid = tid_in_loop() - COPY_TID0  # per chunk (volatile): hoisted addresses spill
            if i >= 1:  # the math warpgroup read chunk j + 1's raw rows
                cute.arch.barrier(barrier_id=BAR_RAW_FREE, number_of_threads=PAIR_THREADS)
            self.as_role(WG_THREADS, self.prefetch_rows, self.raw_views(s, b), t0, eos, ctid)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(0)
            cute.arch.barrier_arrive(barrier_id=BAR_RAW_FULL, number_of_threads=PAIR_THREADS)
            if waits_for_release(i):  # set b free: the chain retired chunk j + SETS's reads
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            self.as_role(WG_THREADS, self.prefetch_do, SimpleNamespace(w0=st.do, gmem=s.gmem), t0, eos, ctid)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(0)
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    # ------------------------------------------------------------------ math
    math = FourRoles.math  # the forward's loop, walking the chunks backwards (chunk_start)
    math_inputs = FourRoles.math_inputs
    math_forms_inverse = FourRoles.math_forms_inverse
    inverse_from_memory = False

    def chunk_start(self, bos, i, chunks):
        """The first token of the i-th chunk of the backward walk: chunk chunks - 1 - i."""
        return bos + (chunks - 1 - i) * CHUNK

    @cute.jit
    def raw_rows_stage(self, s, st, heads, t0, eos, mtid):
        """The rows stage from the raw tiles into set st (q-hat, k-hat, the gate scan)."""
        self.as_role(WG_THREADS, self.rows_from, st, s.rq, s.rk, None, heads, t0, eos, mtid, transpose_do=False)

    @cute.jit
    def math_factors(self, st, scale, mtid):
        write_decay_factors(st.g, st.beta, st.fac, st.alast, scale, mtid)


class FrostBwdChainWs4InChain(FrostBwdChainWs4):
    """FrostBwdChainWs4 without W': the chain applies A (module docstring)."""

    inverse_in_chain = True

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_a_in_chain:
            raise ValueError("FrostBwdChainWs4InChain: a chain config with chain_a_in_chain set")
        super().__init__(cfg)

    @cute.jit
    def consumer_chain(self, st, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid):
        """dU^T (the wy chain's chain_du), dR^T = dU^T A, then the update with (dO^T fo) Q
        issued at once and (dR^T fr) K once dR^T has retired; dR^T stored unscaled while
        the update runs."""
        s_fac = st.fac
        K, C = self.cfg.K, CHUNK
        h = heads[3]
        j0 = wid * SUB
        d = self.chain_du(st, acc_ds, coord, thr, lane, wid)
        wg_c, wg_st, g_c, g_st, per, crd = d.wg_c, d.wg_st, d.g_c, d.g_st, d.per, d.crd

        # 3. dR^T = dU^T A (group 3) and the update's (dO^T fo) Q (group 4) in flight together
        a_du = to_a_operand(d.acc_du, g_st.partition_shape_A((WG_ROWS, C)))
        acc_dr = cute.make_rmem_tensor(g_c.partition_shape_C((WG_ROWS, C)), Float32)
        mma_group(wg_c, acc_dr, [(a_du, wg_c.make_fragment_B(g_c.partition_B(mn_view(st.ainv))), C // 16)])
        acc_w = cute.make_tensor(acc_ds.iterator, cute.make_layout(g_st.partition_shape_C((WG_ROWS, K))))
        mma_group(wg_st, acc_w, [(d.a_dof, wg_st.make_fragment_B(g_st.partition_B(mn_view(st.q))), C // 16)],
                  fresh=False)
        warpgroup.wait_group(1)  # dR^T complete; (dO^T fo) Q may still run
        # 4. (dR^T fr) K onto the update (group 5), after the first in issue order
        a_dr = cute.make_rmem_tensor(g_st.partition_shape_A((WG_ROWS, C)), BFloat16)
        for bi in cutlass.range_constexpr(NBLK):
            for e in cutlass.range_constexpr(per):
                a_dr[bi * per + e] = (acc_dr[bi * per + e] * s_fac[FR, bi * SUB + crd[e][1]]).to(BFloat16)
        mma_group(wg_st, acc_w, [(a_dr, wg_st.make_fragment_B(g_st.partition_B(mn_view(st.k))), C // 16)],
                  fresh=False)
        self.store_dr(mdr, acc_dr, h, t0, eos, j0, thr, crd)


def ring_smem_plan(c):
    """bwd_chain_ws_wy.py's plan with q, k, the gate and beta rows RING stages tall (raw
    rows: no q-hat / k-hat, no raw copies beside them), the inverse norms per stage [2 RING,
    C] (fp32, rows 2 r + NORM_K, 2 r + NORM_Q). W' stays in the in-chain kernel's plan too
    (one CTA per SM either way: the block holds the whole register file)."""
    plan = []
    for name, dtype, shape, stride in wy_smem_plan(c):
        if name in ("rq", "rk"):
            continue
        if name in ("q", "k", "g", "beta"):
            shape = (shape[0] // SETS * RING, *shape[1:])
        plan.append((name, dtype, shape, stride))
    return plan + [("norm", "f32", (2 * RING, CHUNK), (CHUNK, 1))]


class FrostBwdChainWs4Raw(FrostBwdChainWs4):
    """FrostBwdChainWs4 on raw rows in a ring (module docstring)."""

    smem_plan = staticmethod(ring_smem_plan)
    gram_log2 = True
    norms_in_copies = True
    ring_view = RawRing.ring_view
    inverse_norms = RawRing.inverse_norms
    stage_landed = RawRing.stage_landed
    copy_ring_rows = RawRing.copy_ring_rows

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_raw_rows:
            raise ValueError(f"{type(self).__name__}: a chain config with chain_raw_rows set")
        super().__init__(cfg)

    gram_norms = RawRing.gram_norms  # where the caller asked for l2norm

    chunk_set = RawRing.chunk_views  # the set (i mod SETS) with the raw rows of stage i mod RING

    @cute.jit
    def release_chunk(self, i, nch):
        FrostBwdChainWs4.release_chunk(self, i, nch)
        if i + RING < nch:
            cute.arch.barrier_arrive(barrier_id=BAR_RING_EMPTY + i % RING, number_of_threads=RING_EMPTY_THREADS)

    # ------------------------------------------------------------------ copies
    @cute.jit
    def copies(self, s, bos, eos, nch):
        """The last chunk's rows into stage 0 first; then per chunk i (backwards): chunk
        j - 1's rows into stage (i + 1) mod RING once the chain released it, the set's
        release, chunk j's dO into the set, the stage's norms and RING_FULL, FULL."""
        C = CHUNK
        if nch > 0:
            self.copy_ring_rows(s, 0, bos + (nch - 1) * C, eos)
            cute.arch.cp_async_wait_group(0)
            self.stage_landed(s, 0)
        for i in cutlass.range(nch, unroll=1):
            j = nch - 1 - i
            t0 = bos + j * C
            b = i % SETS
            r = (i + 1) % RING
            if i + 1 < nch:
                if i + 1 >= RING:
                    cute.arch.barrier(barrier_id=BAR_RING_EMPTY + r, number_of_threads=RING_EMPTY_THREADS)
                self.copy_ring_rows(s, r, t0 - C, eos)
            if waits_for_release(i):
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            st = self.set_views(s, b)
            self.as_role(WG_THREADS, self.prefetch_do, SimpleNamespace(w0=st.do, gmem=s.gmem), t0, eos,
                         tid_in_loop() - COPY_TID0)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(0)
            if i + 1 < nch:
                self.stage_landed(s, r)
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)

    # ------------------------------------------------------------------ math
    math_inputs = RawRing.math_inputs  # the norms came from the copies (norms_in_copies)

    @cute.jit
    def math_factors(self, st, scale, mtid):
        ring_decay_factors(st, scale, mtid, self.cfg.use_l2norm, False)


class FrostBwdChainWs4RawInChain(FrostBwdChainWs4Raw):
    """FrostBwdChainWs4Raw without W': the chain applies A (FrostBwdChainWs4InChain's step)."""

    inverse_in_chain = True
    consumer_chain = FrostBwdChainWs4InChain.consumer_chain

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_a_in_chain:
            raise ValueError("FrostBwdChainWs4RawInChain: a chain config with chain_a_in_chain set")
        super().__init__(cfg)
