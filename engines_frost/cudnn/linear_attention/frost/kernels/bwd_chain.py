"""FROST backward, kernel 2 (``chain``): the state gradient, backwards over the chunks.

One CTA per (sequence, output head), 2V threads, warp w owning the value rows
j in [16 w, 16 w + 16) of dS^T [V, K] (fp32 registers for the whole sequence), as the
forward owns S^T. With dS the gradient of the state leaving chunk c (d_final_state, or
zero, for the last chunk), per chunk from the last to the first:

    dU   = P^T dO + KD dS                      (KD = k^ e^(Gam_last - Gam))
    dR   = (I + M)^-T dU                        (block back substitution, 16x16 inverses)
    dS  <- Diag(e^Gam_last) dS + QA^T dO - KBA^T dR

writing dS (bf16, checkpoint row cu[n] // 64 + n + j, V-major like the forward's
checkpoints; 16-byte stores after a quad exchange, fragment_stores.py) before the update
and dR (bf16, per token; through a per-warp shared buffer in 16-byte stores where it
fits, gmem_vector_io); dS after the first chunk is d_initial_state. Transposed, per warp: dU^T = dO^T P + dS^T KD^T, dR^T_i =
(dU^T_i - sum_{i' > i} dR^T_i' M_i'i) D_i^-1, dS^T <- dS^T Diag(e^Gam_last) + dO^T QA +
dR^T (-KBA). So the shared operands are the forward's transposed: QA^T, (-KBA)^T [K, C],
KD [C, K], P^T, (-M)^T, D_i^-T, and dO^T [V, C] (A operand).

Rows, gate scan, Gram tiles, inverses and the prefetch are the pipelined forward's
(FrostBwdChain derives from FrostFwdPipelined); the prefetch runs backwards (chunk c - 1 while chunk c's chain runs) and
stages dO's rows in the forward's W0 slot (no W0 here).
"""
from __future__ import annotations

from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import cpasync

from cudnn.linear_attention.frost.kernels.bwd_abi import FrostBwdLauncher
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.bwd_states import FrostBwdStates
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import (
    CHUNK,
    NBLK,
    PAD16,
    SUB,
    VEC,
    allocate_smem,
    load_vec,
    to_a_operand,
    warp_mma,
)
from cudnn.linear_attention.frost.kernels import bulk_rows
from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
from cudnn.linear_attention.frost.kernels.fragment_stores import store_rows_vectorised
from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined
from cudnn.linear_attention.frost.kernels.fwd_pipelined import smem_plan as pipelined_smem_plan
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds

# the pipelined forward's tensors that change orientation here, and what replaces them
_TRANSPOSED = {"qa": "qat", "kba": "kbat", "kdt": "kd", "mneg": "mnegt", "p": "pt", "dinv": "dinvt"}


def _base_plan(c: FrostFwdConfig):
    K, V, C = c.K, c.V, CHUNK
    plan = []
    for name, dtype, shape, stride in pipelined_smem_plan(c):
        if name == "w0" and c.gate_per_channel:
            continue
        if name in ("qa", "kba"):
            plan.append((_TRANSPOSED[name], "bf16", (K, C), (C + PAD16, 1)))
        elif name == "kdt":
            plan.append(("kd", "bf16", (C, K), (K + PAD16, 1)))
        elif name in _TRANSPOSED:
            plan.append((_TRANSPOSED[name], dtype, shape, stride))
        else:
            plan.append((name, dtype, shape, stride))
    plan.append(("dot", "bf16", (V, C), (C + PAD16, 1)))
    return plan


def staged_stores(c: FrostFwdConfig) -> bool:
    """Whether the per-warp dR buffers fit beside the chain's tensors (scalar gates at
    every head dim; the vector-gate plans at K = 128 leave no room)."""
    return vio.has_warp_buffers(smem_plan(c))


def smem_plan(c: FrostFwdConfig):
    """The pipelined forward's plan with QA, KBA as [K, C], KD as [C, K], the Gram blocks and inverses stored
    transposed, plus dO^T [V, C]. W0's slot stages the next chunk's dO rows (raw io) for
    scalar gates; vector gates have no room for it (their dO rows load in the rows stage).
    Where they fit (staged_stores), one store buffer per warp: dR leaves in 16-byte stores
    (gmem_vector_io) instead of one 2-byte store per element."""
    return vio.with_warp_buffers(_base_plan(c), c)


class FrostBwdChain(FrostBwdLauncher, FrostFwdPipelined):
    """Callable for cute.compile (bwd_abi's argument list)."""

    smem_plan = staticmethod(smem_plan)

    def __init__(self, cfg: FrostBwdConfig):
        super().__init__(cfg.fwd)
        self.bcfg = cfg
        self.staged = staged_stores(cfg.fwd)

    @cute.jit
    def launch_kernel(self, m, T: Int32, N: Int32, scale: Float32, stream: cuda.CUstream):
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu_seqlens, m.dO, m.d_final_state, m.d_initial_state,
                    m.dckpt, m.dr, scale, T, N, m.dq, m.dk, m.dv, m.dg, m.dbeta, m.dw).launch(
            grid=[N, self.cfg.HO, 1], block=[self.threads, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor, mb: cute.Tensor,
               mw: cute.Tensor, mcu: cute.Tensor, mdo: cute.Tensor, mdht: cute.Tensor, mdh0: cute.Tensor,
               mdckpt: cute.Tensor, mdr: cute.Tensor, scale: Float32, T: Int32, N: Int32, mdq: cute.Tensor,
               mdk: cute.Tensor, mdv: cute.Tensor, mdg: cute.Tensor, mdb: cute.Tensor, mdw: cute.Tensor):
        c = self.cfg
        tid, _, _ = cute.arch.thread_idx()
        n, h, _ = cute.arch.block_idx()
        heads = c.heads_of(h)
        s = allocate_smem(self.smem_plan(c) + self.mbarrier_plan())
        mma = warp_mma()
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        thr = mma.get_slice(lane)
        acc_ds, coord = self.initial_ds(mdht, n, h, thr, wid)
        bos, eos, nch, row0 = self.chunk_span(mcu, n, T)
        s.gmem = SimpleNamespace(q=mq, k=mk, v=mv, g=mg, b=mb, w=mw, do=mdo, heads=heads)
        self.before_chunks(s, tid)  # ordered before the first stages by the barrier below
        bulk = self.bcfg.chain_bulk_rows
        if cutlass.const_expr(bulk):
            bulk_rows.init_mbarrier(s.mbar.iterator, tid)
            cute.arch.sync_threads()
        if nch > 0:
            self.prefetch_chunk(s, bos + (nch - 1) * CHUNK, eos, tid)
            cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(0)
        if cutlass.const_expr(bulk):
            if nch > 0:
                cute.arch.mbarrier_wait(s.mbar.iterator, 0)  # the mbarrier's first phase
        cute.arch.sync_threads()
        for jj in cutlass.range(nch, unroll=1):
            j = nch - 1 - jj
            t0 = bos + j * CHUNK
            self.prep_chunk(s, mdckpt[row0 + j, h, None, None], acc_ds, mq, mk, mv, mg, mb, mw, heads, t0, eos,
                            scale, tid, thr, lane, wid)
            if cutlass.const_expr(bulk):
                # this thread's generic reads of the row tiles, ordered before the bulk
                # copies (async proxy) that overwrite them after the barrier
                cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.sync_threads()
            if j > 0:
                self.prefetch_chunk(s, t0 - CHUNK, eos, tid)
                cute.arch.cp_async_commit_group()
            self.chain(s, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid)
            cute.arch.cp_async_wait_group(0)
            if cutlass.const_expr(bulk):
                if j > 0:
                    cute.arch.mbarrier_wait(s.mbar.iterator, (jj + 1) % 2)  # copy set jj + 1
            cute.arch.sync_threads()
        self.after_chunks()
        if cutlass.const_expr(self.bcfg.dh0_dtype is not None):
            for e in cutlass.range_constexpr(cute.size(acc_ds)):
                jd = coord[e]
                mdh0[n, h, wid * SUB + jd[0], jd[1]] = acc_ds[e].to(mdh0.element_type)
        if cutlass.const_expr(self.bcfg.forward_values):
            # no states / values kernel ran (U came from the forward): their zeroing of the
            # gradient rows no sequence covers happens here, before grads writes the others
            if n == N - 1 and wid == 0:
                FrostBwdStates.zero_gradient_rows(self, mcu, T, N, mdq, mdk, mdv, mdg, mdb, mdw, h, lane)

    # ------------------------------------------------------------------ staging
    @cute.jit
    def initial_ds(self, mdht, n, h, thr, wid):
        """The warp's dS^T accumulator - value rows [16 wid, 16 wid + 16), all K columns,
        fp32 for the whole sequence - from d_final_state (zero without it), and the
        accumulator's (row, column) coordinates. Every chain kernel starts here."""
        K = self.cfg.K
        acc_ds = cute.make_rmem_tensor(thr.partition_shape_C((SUB, K)), Float32)
        coord = thr.partition_C(cute.make_identity_tensor((SUB, K)))
        for e in cutlass.range_constexpr(cute.size(acc_ds)):
            val = Float32(0.0)
            if cutlass.const_expr(self.bcfg.dht_dtype is not None):
                jd = coord[e]
                val = mdht[n, h, wid * SUB + jd[0], jd[1]].to(Float32)
            acc_ds[e] = val
        return acc_ds, coord

    @cute.jit
    def chunk_span(self, mcu, n, T):
        """Sequence n's [bos, eos) (inside [0, T] whatever cu_seqlens holds), its chunk
        count and its first row of the per-chunk checkpoint tensors."""
        bos, eos = sequence_bounds(mcu, n, T)
        nch = (eos - bos + CHUNK - 1) // CHUNK
        return bos, eos, nch, bos // CHUNK + n

    @cute.jit
    def before_chunks(self, s, tid):
        """Shared-memory set-up before the first chunk (none here; the wgmma chain zeroes
        P^T's blocks that the Gram stage never writes)."""
        pass

    @cute.jit
    def prep_chunk(self, s, mckpt, acc_ds, mq, mk, mv, mg, mb, mw, heads, t0, eos, scale, tid, thr, lane, wid):
        """dS^T (the gradient of the state leaving this chunk) to its checkpoint row mckpt
        [V, K], then the chunk's rows, operand and Gram stages, a barrier after each but
        the last (the caller's). A hook: the asynchronous wgmma chain runs stages under its
        previous update group before retiring it and storing dS^T."""
        # 16-byte stores after a quad exchange (fragment_stores.py), as the forward's
        # checkpoints: the same bf16 values as one store per element
        store_rows_vectorised(mckpt, acc_ds, wid * SUB, lane, self.cfg.K)
        self.stage_rows(s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid)
        cute.arch.sync_threads()
        self.stage_operands(s, mb, heads, t0, eos, scale, tid)
        cute.arch.sync_threads()
        self.stage_gram(s, mb, heads, t0, eos, scale, thr, lane, wid)

    @cute.jit
    def after_chunks(self):
        """After the last chunk, before dS^T is read as d_initial_state (nothing here; the
        asynchronous wgmma chain retires its last update group)."""
        pass

    def do_stage(self, s):
        """The shared slot chunk c - 1's dO rows (raw io) are copied into while chunk c's
        chain step runs, or None (the rows stage reads dO from global memory). Scalar
        gates: W0's slot. Vector gates, with FrostBwdConfig.chain_staged_do: KE's [C, K]
        rows (K >= V), dead from the chain step to the next operand stage: the Gram reads
        KE before the barrier the copies are issued after, and the rows stage that reads
        dO from it runs before the operand stage rewrites it (a barrier between). Runs at
        trace time."""
        if not self.cfg.gate_per_channel:
            return s.w0
        return s.ke if self.bcfg.chain_staged_do else None

    def mbarrier_plan(self) -> list:
        """The bulk row copies' mbarrier (chain_bulk_rows), after the plan's tiles: the
        other tensors keep their offsets. Runs at trace time."""
        return [bulk_rows.MBARRIER] if self.bcfg.chain_bulk_rows else []

    @cute.jit
    def prefetch_chunk(self, s, t0, eos, tid):
        """Chunk t0's q, k, gates, beta (the pipelined forward's prefetch_rows) and its dO rows into the dO
        stage (do_stage), or, vector gates without one, into L2; with chain_bulk_rows
        the rows by bulk copies (prefetch_rows_bulk)."""
        if cutlass.const_expr(self.bcfg.chain_bulk_rows):
            self.prefetch_rows_bulk(s, t0, eos, tid)  # the staged dO among its rows
        else:
            self.prefetch_rows(s, t0, eos, tid)
            if cutlass.const_expr(self.do_stage(s) is not None):
                self.prefetch_do(s, t0, eos, tid)
        if cutlass.const_expr(self.do_stage(s) is None):
            # stage_rows reads dO from global memory inside the serial chain, where a cold
            # read cost each chunk a DRAM round trip (Nsight Compute: ~8 % of the KDA /
            # GDN-2 chain's samples on one load); asked for here, a chunk ahead, it is in L2
            # by then. A hint: nothing read changes.
            self.prefetch_rows_l2(((s.gmem.do, s.gmem.heads[3], self.cfg.V),), t0, eos, tid)

    @cute.jit
    def prefetch_rows_bulk(self, s, t0, eos, tid):
        """chain_bulk_rows: chunk t0's token rows of q, k, GDN-2's b and w, the gate rows
        (where 16-byte aligned) and the staged dO by one cp.async.bulk each onto s.mbar
        (bulk_rows.issue; zeros past eos by plain stores); the rest as prefetch_rows
        copies it (unaligned gate rows, KDA's scalar beta: cp.async, not committed)."""
        c = self.cfg
        jobs = self.bulk_row_jobs(s)
        if cutlass.const_expr(self.do_stage(s) is not None):  # [C, V] of the stage's rows
            jobs.append((cute.local_tile(self.io_view(self.do_stage(s)), (CHUNK, c.V), (0, 0)),
                         (s.gmem.do, s.gmem.heads[3], None), CHUNK, self.io))
        bulk_rows.check_jobs(jobs, c)
        bulk_rows.issue(jobs, s.mbar.iterator, t0, eos, tid, self.threads)
        self.copy_gate_beta_rows(s, t0, eos, tid, gates=not c.gate_align16)

    @cute.jit
    def prefetch_do(self, s, t0, eos, tid):
        """cp.async of chunk t0's dO rows into the dO stage (zeros past eos)."""
        m = s.gmem
        h = m.heads[3]
        V, NT = self.cfg.V, self.threads
        a16 = cute.make_copy_atom(cpasync.CopyG2SOp(), self.io, num_bits_per_copy=128)
        do_in = self.io_view(self.do_stage(s))
        vv = V // VEC
        r0, cv = tid // vv, tid % vv
        for u in cutlass.range_constexpr(CHUNK * vv // NT):
            r = r0 + u * (NT // vv)
            self.copy_or_zero(a16, m.do, t0 + r, h, VEC, cv, cute.local_tile(do_in[r, None], (VEC,), (cv,)),
                              t0 + r < eos, self.io)

    @cute.jit
    def stage_rows(self, s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid):
        """q-hat, k-hat in place, dO^T (bf16) from the staged rows (from global memory for
        vector gates without a dO stage), the inclusive gate scan."""
        do_in = None
        if cutlass.const_expr(self.do_stage(s) is not None):
            do_in = self.io_view(self.do_stage(s))
        self.rows_from(s, self.io_view(s.q), self.io_view(s.k), do_in, heads, t0, eos, tid)

    @cute.jit
    def rows_from(self, s, q_in, k_in, do_in, heads, t0, eos, tid, transpose_do: cutlass.Constexpr = True):
        """The rows stage from the raw q, k, dO rows q_in, k_in, do_in (io dtype; the in-place
        stage passes s.q, s.k and the dO stage, the warp-specialised producer its private raw
        tiles; do_in None: dO from global memory): q-hat, k-hat into s.q, s.k,
        dO^T into s.dot (not with transpose_do=False: the full-inverse chain loads its dO^T
        operand from the rows themselves), the gate scan in s.g."""
        s_q = s.q
        s_k = s.k
        s_g = s.g
        s_dot = s.dot if transpose_do else None
        c = self.cfg
        K, V, C, NT = c.K, c.V, CHUNK, self.threads
        vr = K // VEC
        r0, cv = tid // vr, tid % vr
        for u in cutlass.range_constexpr(C * vr // NT):
            r = r0 + u * (NT // vr)
            xq = load_vec(cute.local_tile(q_in[r, None], (VEC,), (cv,)))
            xk = load_vec(cute.local_tile(k_in[r, None], (VEC,), (cv,)))
            yq, yk = self.qk_hat(xq, xk)
            cute.autovec_copy(yq, cute.local_tile(s_q[r, None], (VEC,), (cv,)))
            cute.autovec_copy(yk, cute.local_tile(s_k[r, None], (VEC,), (cv,)))
        r, cv0 = tid % C, tid // C  # a warp: 32 rows of one slice -> conflict-free transposed stores
        for u in cutlass.range_constexpr(C * (V // VEC) // NT if transpose_do else 0):
            cv = cv0 + u * (NT // C)
            if cutlass.const_expr(do_in is None):  # no dO stage: straight from global memory
                x = cute.make_rmem_tensor((VEC,), self.io)
                x.fill(0.0)
                if t0 + r < eos:
                    cute.autovec_copy(cute.local_tile(s.gmem.do[t0 + r, heads[3], None], (VEC,), (cv,)), x)
            else:
                x = load_vec(cute.local_tile(do_in[r, None], (VEC,), (cv,)))
            for e in cutlass.range_constexpr(VEC):
                s_dot[cv * VEC + e, r] = x[e].to(Float32).to(BFloat16)
        self.scan_gates_in_place(s_g, tid)

    def operands_read_q(self) -> bool:
        """The chain always forms QA^T (q's decayed rows are dS's input)."""
        return True

    @cute.jit
    def put_operands(self, s, regs, d0, e, r, qv, kb, kv, a, kdf, scale):
        """The pipelined forward's operand stage with QA, -KBA stored transposed (straight into column r) and
        KD row-major (into regs, stored as a row after the slice)."""
        _, _, kd = regs
        s.qat[d0 + e, r] = (qv * a * scale).to(BFloat16)
        s.kbat[d0 + e, r] = (-(kb * a)).to(BFloat16)
        kd[e] = (kv * kdf).to(BFloat16)

    @cute.jit
    def store_operand_rows(self, s, regs, r, cv):
        """Row r's slice cv of KD, one vector store."""
        _, _, kd = regs
        cute.autovec_copy(kd, cute.local_tile(s.kd[r, None], (VEC,), (cv,)))

    # ------------------------------------------------------------------ Gram, transposed
    @cute.jit
    def store_gram(self, s, bi, bj, t, u, ts, mval, pval):
        """(-M)^T and P^T: element (t, u) of M, P lands at [u, t]."""
        s_mnegt = s.mnegt
        s_pt = s.pt
        s_md = s.md
        s_mnegt[u, t] = (-mval).to(BFloat16)
        s_pt[u, t] = pval.to(BFloat16)
        if bi == bj:
            s_md[bi, ts[0], ts[1]] = mval

    @cute.jit
    def block_inverse(self, s, bi, lane):
        """The base forward's substitution for column `lane` of (I + M_ii)^-1, stored as row
        `lane` of the transposed inverse: FrostFwdMma.block_inverse_at through a view of s.dinvt with its
        two inner modes exchanged."""
        (nb, r, c), (sb, sr, sc) = s.dinvt.shape, s.dinvt.stride
        dinv = cute.make_tensor(s.dinvt.iterator, cute.make_layout((nb, c, r), stride=(sb, sc, sr)))
        self.block_inverse_at(s.md, dinv, bi, lane)

    # ------------------------------------------------------------------ chain
    @cute.jit
    def chain(self, s, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid):
        """This warp's 16 value rows: dU^T, the back substitution for dR^T (stored), and
        the state-gradient update. In parts, so that the pipelined chain
        (bwd_chain_pipelined.py) can put the next chunk's prep between them."""
        a_do = self.chain_do(s, thr, lane, wid)
        acc_du = self.chain_du(s, acc_ds, a_do, thr, lane)
        a_dr = self.chain_dr(s, mdr, acc_du, heads, t0, eos, thr, lane, wid)
        self.chain_decay(s, acc_ds, coord)
        self.chain_update(s, acc_ds, a_do, a_dr, 0, NBLK, thr, lane)

    @cute.jit
    def chain_do(self, s, thr, lane, wid):
        """This warp's dO^T rows [16, C] as the A operand (registers; read by dU and the
        state update, so dO^T's shared tile is dead after this)."""
        return self.operand(thr, lane, cute.local_tile(s.dot, (SUB, CHUNK), (wid, 0)), True)

    @cute.jit
    def chain_du(self, s, acc_ds, a_do, thr, lane):
        """dU^T = dO^T P + dS^T KD^T per 16-token block (reads P^T and KD)."""
        s_pt = s.pt
        s_kd = s.kd
        K = self.cfg.K
        mma = warp_mma()
        a_ds = to_a_operand(acc_ds, thr.partition_shape_A((SUB, K)))
        acc_du = []
        for bi in cutlass.range_constexpr(NBLK):
            du = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
            du.fill(0.0)
            for kk in cutlass.range_constexpr(bi, NBLK):  # P[t, s] = 0 for t < s
                b_p = self.operand(thr, lane, cute.local_tile(s_pt, (SUB, SUB), (bi, kk)), False)
                cute.gemm(mma, du, a_do[None, None, kk], b_p[None, None, 0], du)
            b_kd = self.operand(thr, lane, cute.local_tile(s_kd, (SUB, K), (bi, 0)), False)
            for kk in cutlass.range_constexpr(K // 16):
                cute.gemm(mma, du, a_ds[None, None, kk], b_kd[None, None, kk], du)
            acc_du.append(du)
        return acc_du

    @cute.jit
    def chain_dr(self, s, mdr, acc_du, heads, t0, eos, thr, lane, wid, flush: cutlass.Constexpr = True,
                 col_scale=None):
        """dR^T_i = (dU^T_i - sum_{i' > i} dR^T_i' M_i'i) D_i^-1, last block first (reads
        (-M)^T and D^-T), stored per token; returns the blocks as A operands. With the
        store buffers and flush False the rows stay in this warp's buffer for the caller
        to flush (flush_dr: the wgmma chain does it while its update runs). With col_scale
        (a [C] factor per token, bwd_chain_scaled) it returns (those, the blocks of
        dR^T diag(col_scale) as A operands, rounded once from fp32)."""
        s_mnegt = s.mnegt
        s_dinvt = s.dinvt
        h = heads[3]
        mma = warp_mma()
        j0 = wid * SUB
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        buf = None
        if cutlass.const_expr(self.staged):
            buf = vio.warp_buffer(s, self.cfg, wid, CHUNK, SUB)
        a_dr = [None] * NBLK
        a_drs = [None] * NBLK
        for ii in cutlass.range_constexpr(NBLK):
            bi = NBLK - 1 - ii
            y = acc_du[bi]
            for bj in cutlass.range_constexpr(bi + 1, NBLK):
                b_m = self.operand(thr, lane, cute.local_tile(s_mnegt, (SUB, SUB), (bi, bj)), False)
                cute.gemm(mma, y, a_dr[bj][None, None, 0], b_m[None, None, 0], y)
            a_y = to_a_operand(y, thr.partition_shape_A((SUB, SUB)))
            dr = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
            dr.fill(0.0)
            b_d = self.operand(thr, lane, s_dinvt[bi, None, None], False)
            cute.gemm(mma, dr, a_y[None, None, 0], b_d[None, None, 0], dr)
            a_dr[bi] = to_a_operand(dr, thr.partition_shape_A((SUB, SUB)))
            if cutlass.const_expr(col_scale is not None):
                drs = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
                for e in cutlass.range_constexpr(cute.size(dr)):
                    drs[e] = dr[e] * col_scale[bi * SUB + crd[e][1]]
                a_drs[bi] = to_a_operand(drs, thr.partition_shape_A((SUB, SUB)))
            if cutlass.const_expr(self.staged):
                vio.stage_tile(buf, dr, crd, bi * SUB, 0, True)  # dR^T block -> rows t
            else:
                for e in cutlass.range_constexpr(cute.size(dr)):
                    jt = crd[e]
                    t = t0 + bi * SUB + jt[1]
                    if t < eos:
                        mdr[t, h, j0 + jt[0]] = dr[e].to(BFloat16)
        if cutlass.const_expr(self.staged and flush):
            self.flush_dr(s, mdr, heads, t0, eos, lane, wid)
        if cutlass.const_expr(col_scale is not None):
            return a_dr, a_drs
        return a_dr

    @cute.jit
    def flush_dr(self, s, mdr, heads, t0, eos, lane, wid):
        """This warp's staged dR rows (chain_dr's buffer) to global memory, 16 bytes a store."""
        buf = vio.warp_buffer(s, self.cfg, wid, CHUNK, SUB)
        vio.flush_rows(buf, mdr[None, heads[3], None], t0, wid * SUB, eos - t0, lane, CHUNK, SUB)

    @cute.jit
    def chain_decay(self, s, acc_ds, coord):
        """dS^T <- dS^T Diag(e^Gam_last) (reads e^Gam_last)."""
        for e in cutlass.range_constexpr(cute.size(acc_ds)):
            acc_ds[e] = acc_ds[e] * self.state_decay(s, coord[e][1])

    @cute.jit
    def chain_update(self, s, acc_ds, a_do, a_dr, b0: cutlass.Constexpr, b1: cutlass.Constexpr, thr, lane):
        """dS^T += dO^T QA + dR^T (-KBA) over token blocks [b0, b1), QA before KBA in each
        (reads QA^T and -KBA^T): any split of the blocks keeps the serial order."""
        s_qat = s.qat
        s_kbat = s.kbat
        K = self.cfg.K
        mma = warp_mma()
        for bi in cutlass.range_constexpr(b0, b1):
            b_qa = self.operand(thr, lane, cute.local_tile(s_qat, (K, SUB), (0, bi)), False)
            cute.gemm(mma, acc_ds, a_do[None, None, bi], b_qa[None, None, 0], acc_ds)
            b_kb = self.operand(thr, lane, cute.local_tile(s_kbat, (K, SUB), (0, bi)), False)
            cute.gemm(mma, acc_ds, a_dr[bi][None, None, 0], b_kb[None, None, 0], acc_ds)
