"""FROST backward, kernel 3 for vector gates, persistent: bwd_grads_vec.py's chunk work
walked by one CTA per SM, the next item's S and dS copied while this item computes.

FrostBwdConfig.grads_vec_persistent (FROST_BWD_GRADS_VEC=persistent). The per-chunk
kernel spends about a quarter of its time in the load phase, which nothing overlaps (one
CTA per SM: ~200 KB of shared memory). Here the CTAs walk the (chunk, head) items as
bwd_grads.FrostBwdGrads does (kernel, run_item: grid of the SM count, the next item's
sequence searched while this one runs) and, once this item's state products are done,
the next item's S and dS (64 KB of the ~144-176 KB an item loads at K = V = 128) are
copied under the operand stage, the score adjoints and the epilogue. For that the plan
differs from bwd_grads_vec.smem_regions' in two places:
- S and dS are the last tiles of stage A and start past stage B's end (stage B, written
  after the products, would overwrite them otherwise): at K = V = 128 they already lie
  there (KDA 69,568 >= 68,560 bytes, GDN-2 86,960 >= 85,952); GDN-2 at K = 128, V = 64
  needs the gap.
- dq/dk staging cannot use the region past stage B (it holds the next S and dS): it
  uses the score tiles (dead after the score adjoints) followed by "stk", bytes that
  make room for two 16-bit [C, K] tiles at once (no extra barriers in write_qk; fp32
  outputs of grouped heads stage one tile at a time).
The arithmetic of an item is the per-chunk kernel's, in the same order: the gradients are
bitwise the same whichever kernel runs.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16

from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.bwd_grads import THREADS, FrostBwdGrads
from cudnn.linear_attention.frost.kernels.bwd_grads_vec import FrostBwdGradsVec, _span_bytes, smem_regions
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_v1 import _DTYPES, CHUNK, SMEM_LIMIT

STATES = ("sf", "dsf")


def _round16(n: int) -> int:
    return -(-n // 16) * 16


def plan(c: FrostFwdConfig) -> SimpleNamespace:
    """The persistent kernel's layout: `offsets` (byte offset in the shared region of every
    stage-A and stage-B tensor), `region` (its bytes), `keep` (smem_regions' persistent
    tensors), `dz` (bytes of the score tiles dzp, dzm) and `stk` (bytes that follow them
    in one block so that two 16-bit dq/dk tiles fit)."""
    a, b, keep = smem_regions(c)
    offsets = {}
    off = 0
    for entry in b:
        offsets[entry[0]] = off
        off += _span_bytes(entry)
    b_end = off
    off = 0
    for entry in (e for e in a if e[0] not in STATES):
        offsets[entry[0]] = off
        off += _span_bytes(entry)
    off = max(off, b_end)  # S and dS live on past the products: never under stage B
    for entry in (e for e in a if e[0] in STATES):
        offsets[entry[0]] = off
        off += _span_bytes(entry)
    assert [e[0] for e in keep[:2]] == ["dzp", "dzm"], keep
    dz = _span_bytes(keep[0]) + _span_bytes(keep[1])
    tile16 = CHUNK * (c.K * 2 + 16)  # write_qk's staged tile: 16 bytes of padding per row
    return SimpleNamespace(offsets=offsets, region=off, keep=keep, dz=dz, stk=max(0, _round16(2 * tile16 - dz)),
                           stage_a=a, stage_b=b)


def smem_bytes(c: FrostFwdConfig) -> int:
    p = plan(c)
    return p.region + p.dz + p.stk + sum(map(_span_bytes, p.keep[2:]))


def fits(c: FrostFwdConfig) -> bool:
    """Whether the persistent plan fits the SM's shared memory (the launcher falls back to
    the per-chunk kernel otherwise)."""
    return smem_bytes(c) <= SMEM_LIMIT


def allocate(c: FrostFwdConfig) -> SimpleNamespace:
    """plan(c)'s shared tensors by name (stage A and B overlaid at their offsets; dzp, dzm
    and the staging bytes carved from one block so they are adjacent). Called while the
    kernel is traced."""
    p = plan(c)
    smem = cutlass.memory.SmemAllocator()
    raw = smem.allocate_tensor(BFloat16, cute.make_layout((p.region // 2,)), 16)
    s = SimpleNamespace()
    for name, dtype, shape, stride in p.stage_a + p.stage_b:
        ptr = raw.iterator + p.offsets[name] // 2
        if dtype != "bf16":
            ptr = cute.recast_ptr(ptr, dtype=_DTYPES[dtype])
        setattr(s, name, cute.make_tensor(ptr, cute.make_layout(shape, stride=stride)))
    zq = smem.allocate_tensor(BFloat16, cute.make_layout(((p.dz + p.stk) // 2,)), 16)
    off = 0
    for name, _, shape, stride in p.keep[:2]:
        setattr(s, name, cute.make_tensor(zq.iterator + off // 2, cute.make_layout(shape, stride=stride)))
        off += _span_bytes((name, "bf16", shape, stride))
    for name, dtype, shape, stride in p.keep[2:]:
        setattr(s, name, smem.allocate_tensor(_DTYPES[dtype], cute.make_layout(shape, stride=stride), 16))
    return s


class FrostBwdGradsVecPersistent(FrostBwdGradsVec):
    """FrostBwdGradsVec on FrostBwdGrads' persistent item loop (kernel, run_item) with
    this module's plan; chunk_item is the per-chunk kernel's body plus the next item's
    S and dS copies after the state products."""

    kernel = FrostBwdGrads.kernel

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.grads_vec_persistent:
            raise ValueError("FrostBwdGradsVecPersistent: grads_vec_persistent must be set (bwd_compile picks the class)")
        FrostBwdGradsVec.__init__(self, cfg)
        used = smem_bytes(cfg.fwd)
        if used > SMEM_LIMIT:
            raise ValueError(f"FrostBwdGradsVecPersistent: {used} bytes of shared memory exceed {SMEM_LIMIT} for {cfg}")

    def grid(self, T, N):
        return FrostBwdGrads.grid(self, T, N)

    def allocate_shared(self):
        return allocate(self.cfg)

    def staging(self, s):
        """write_qk's room: the score tiles and the bytes after them (plan)."""
        p = plan(self.cfg)
        return s.dzp.iterator, p.dz + p.stk

    @cute.jit
    def chunk_item(self, s, mq, mk, mv, mg, mb, mcu, mdo, mdq, mdk, mdv, mdg, mdb, mckpt, mdckpt, mu, mdr,
                   N, scale, mw, mdw, T, item, n, fetched, nxt, items, ctas, tid):
        """One (chunk, head) item of sequence n: FrostBwdGradsVec.kernel's stages. S and dS
        were copied by the previous item when `fetched`; this item's rows and gates are
        copied here (their tiles are live until the previous item's end). After the state
        products' barrier the next item's (item + ctas, sequence s.seq[nxt]) S and dS go
        into their tiles, which nothing reads or writes until that item's products."""
        c = self.cfg
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        thr = self.mma_slice(lane)
        rho, h, j, t0, eos = self.item_coords(mcu, n, item, T)
        heads = self.heads_of(h)
        if fetched == 0:
            self.issue_state(s, mckpt, mdckpt, mcu, n, j, rho, h, T, N, lane, tid)
        self.issue_front(s, mdo, mu, h, t0, eos, tid)
        self.issue_back(s, mdr, mv, heads, t0, eos, tid)
        if cutlass.const_expr(c.has_w):
            a_io, _ = self.copy_atoms()
            self.copy_rows_async(a_io, self.io_view(s.wr), mw, h, t0, eos, tid, self.io)
        self.copy_gate_rows_async(mg, h, s.g, t0, eos, tid, THREADS)
        cute.arch.cp_async_commit_group()
        self.stage_norms(s, mq, mk, mg, mb, heads, t0, eos, tid)
        self.land_copies(s, tid)
        cute.arch.sync_threads()
        self.prefetch_operand_rows(mq, mk, mb, heads, t0, eos, tid)
        self.scan_gates(s, tid)
        acc_q, acc_kb, acc_k, crd, bi, hc = self.scores_and_products_vec(
            s, mv, mdv, mw, mdw, heads, t0, eos, scale, thr, lane, wid, tid)
        # (its closing barrier: S and dS are dead, s.seq[nxt] long visible)
        self.stage_operands_vec(s, mq, mk, mb, heads, t0, eos, tid)
        cute.arch.sync_threads()
        self.score_adjoints(s, acc_q, acc_kb, acc_k, crd, thr, lane, bi, hc, scale)
        nn = s.seq[nxt]
        if item + ctas < items:
            if nn >= 0:
                self.issue_next(s, mckpt, mdckpt, mdo, mu, mdr, mv, mcu, nn, item + ctas, T, N, lane, tid, "state")
        self.epilogue_vec(s, mdq, mdk, mdb, acc_q, acc_kb, acc_k, crd, heads, t0, eos, lane, bi, hc)
        cute.arch.sync_threads()
        self.gate_scan_out(s, mdg, mdb, heads, t0, eos, tid)
