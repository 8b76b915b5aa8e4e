"""The persistent grads kernel's item loop and its prefetched buffers, run on the CPU.

v1.5 of the backward (kernels/NOTES_bwd.md) made the GDN grads kernel persistent: CTA b of
P runs the (chunk, head) items b, b + P, ... (item = row * HO + head), finds each item's
sequence during the previous item (two slots of s.seq), and issues the next item's S, dS
copies after the state products, its dO, U copies after dq/dk left their staging (which
overlays dO and U) and its dR, v copies after stage_values; its log gates and beta go with
its S and dS into s.gnext / s.bnext, which its stage_norms reads instead of global memory.
The kernel's own run_item /
chunk_item and every SIMT stage run here on the simt_emulator (kernel(...).launch over a
grid of P CTAs); the tensor-core
stages are replaced by stubs that keep their barriers, write garbage where the real ones
stage dq/dk, and snapshot the operand buffers an item's products would read. Copies land
at once on the emulator, so a prefetch issued before the last read of the region it fills
shows as a wrong snapshot or a wrong dg / dbeta / dv (state_sum, stage_values). Checked:
every item with a sequence runs exactly once, in the CTA's order; rows between sequences
(an empty sequence) are skipped and the item after one loads everything itself; every
operand an item sees is its own (workspace rows, or the forward's packed checkpoint rows);
dv (beta), dbeta and dg (the S dS term, scaled by the item's gates) match numpy. The MMAs
are the GPU smoke's
(tests/numerics/la_frost_bwd_smoke.py).
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from compile_tiers import tiered  # noqa: E402

from cudnn.linear_attention.frost.kernels import (  # noqa: E402
    bwd_abi,
    bwd_grads,
    checkpoints,
    checkpoints_dsl,
    fwd_mma,
    gmem_views,
    seq_bounds,
)
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig, bwd_operand_dtypes  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype  # noqa: E402

import simt_emulator as emu  # noqa: E402

C = fwd_mma.CHUNK
K = V = 64
HO = 2
# sequence 1 is empty: checkpoint row 2 lies between sequences (its items are skipped)
CU = [0, 100, 100, 107, 177]


def _items(T, N):
    """(row, head, sequence, chunk, t0, eos) of every item, None for a row no sequence owns."""
    owner = {}
    for n in range(N):
        bos, eos = CU[n], CU[n + 1]
        for j in range(-(-(eos - bos) // C)):
            owner[bos // C + n + j] = (n, j, bos + j * C, eos)
    rows = T // C + N
    return [(rho, h) + owner[rho] if rho in owner else None for rho in range(rows) for h in range(HO)]


def _stubbed(kern_cls, log):
    """kern_cls with its tensor-core stages replaced (barriers kept)."""

    class Stub(kern_cls):
        def mma_slice(self, lane):
            return None

        def stage_norms(self, s, mq, mk, mg, mb, heads, t0, eos, tid, fetched=None):
            super().stage_norms(s, mq, mk, mg, mb, heads, t0, eos, tid, fetched)
            if tid == 0:
                log["runs"].append((emu._ctx.block[0], heads[3], t0))

        def stage_scores(self, s, scale, thr, lane, wid):  # first reader after the load phase
            if emu.thread_index() == 0:
                log["seen"].append({name: getattr(s, name).array.copy()
                                    for name in ("do", "u", "dr", "vr", "sf", "dsf", "qr", "kr")})

        def stage_products(self, s, thr, lane, wid):
            emu.sync_threads()
            return None, None, None, None, 0, 0

        def stage_adjoints(self, s, acc_q, acc_kb, acc_k, crd, heads, t0, eos, scale, thr, lane, wid, bi, hc,
                           between=None):
            if between is not None:  # the next item's S and dS copies
                between()
            if emu.thread_index() == 0:
                s.sums.array[...] = 0.0
                s.part.array[0, :] = 0.0
            emu.sync_threads()

        def write_qk(self, s, mdq, mdk, acc_q, acc_kb, acc_k, crd, heads, t0, eos, bi, hc, frags=None):
            emu.sync_threads()
            if emu.thread_index() == 0:  # the real staging overwrites dO, U and the scores
                for name in bwd_grads.STAGED:
                    getattr(s, name).array[...] = 1.0e30
            emu.sync_threads()

        def issue_next(self, s, mckpt, mdckpt, mdo, mu, mdr, mv, at, tid, part):
            super().issue_next(s, mckpt, mdckpt, mdo, mu, mdr, mv, at, tid, part)
            if tid == 0:  # at: the next item's (checkpoint row, head, ...), found before its copies
                log["prefetched"].append((int(at[0]) * HO + int(at[1]), part))

    return Stub


# 3 and 5 CTAs: several items each, P not dividing the 12 items; 40: more CTAs than items
# (~20 s a case on two cores: the core is the forward's checkpoint rows, what both default
# paths' grads read; the workspace states (FROST_BWD_RECOMPUTE_FORWARD=0 only) and the
# other grids with FROST_FULL_MATRIX=1)
@pytest.mark.parametrize("ctas, ckpt", tiered(
    [(3, False), (3, True), (5, False), (40, True)], [1],
    ids=lambda c: f"{c[0]}ctas-{'forward-checkpoints' if c[1] else 'workspace-states'}", unpack=True))
def test_persistent_items_see_their_own_operands(ctas, ckpt):
    T, N = CU[-1], len(CU) - 1
    rows = T // C + N
    rng = np.random.default_rng(ctas + 7 * ckpt)
    f = FrostFwdConfig(io_dtype="bfloat16", state_dtype=None, H=HO, HK=HO, HV=HO, K=K, V=V,
                       gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=True,
                       has_initial_state=False, has_final_state=False)
    cfg = FrostBwdConfig(f, "grads", None, None, checkpoints=ckpt)
    bf = torch.bfloat16
    x = {
        "q": emu.rounded(rng.standard_normal((T, HO, K)), bf), "k": emu.rounded(rng.standard_normal((T, HO, K)), bf),
        "v": emu.rounded(rng.standard_normal((T, HO, V)), bf), "dO": emu.rounded(rng.standard_normal((T, HO, V)), bf),
        "g": -np.abs(rng.standard_normal((T, HO, 1))) * 0.1, "beta": rng.uniform(0.1, 0.9, (T, HO, 1)),
        "u": emu.rounded(rng.standard_normal((T, HO, V)), bf), "dr": emu.rounded(rng.standard_normal((T, HO, V)), bf),
        "ckpt": emu.rounded(rng.standard_normal((rows, HO, V, K)), bf),
        "dckpt": emu.rounded(rng.standard_normal((rows, HO, V, K)), bf),
        "cu_seqlens": np.array(CU, dtype=np.int32),
        "dq": np.full((T, HO, K), np.nan), "dk": np.full((T, HO, K), np.nan), "dv": np.full((T, HO, V), np.nan),
        "dg": np.full((T, HO, 1), np.nan), "dbeta": np.full((T, HO, 1), np.nan),
    }
    ptrs = [emu.Pointer(x.get(name), cutlass_dtype(dt)) for name, dt in bwd_operand_dtypes(cfg).items()]
    m = emu.emulated(bwd_abi, "bwd_views", helper_modules=[gmem_views])(cfg, ptrs, T, N)
    emulated = emu.emulate_class(bwd_grads.FrostBwdGrads, helper_modules=[fwd_mma, seq_bounds, checkpoints_dsl])
    row_fn = emulated.state_row.__globals__["checkpoint_row"]
    row_fn.__globals__["sequence_bounds"] = emu.emulated(seq_bounds, "sequence_bounds")
    log = {"runs": [], "seen": [], "prefetched": []}
    kern = _stubbed(emulated, log)(cfg)
    kern.kernel(m.q, m.k, m.v, m.g, m.beta, m.cu_seqlens, m.dO, m.dq, m.dk, m.dv, m.dg, m.dbeta, m.ckpt,
                m.dckpt, m.u, m.dr, N, 1.0, m.w, m.dw, T).launch(grid=[ctas, 1, 1], block=[bwd_grads.THREADS, 1, 1])

    items = _items(T, N)
    order = [(b, it) for b in range(ctas) for it in range(b, len(items), ctas) if items[it] is not None]
    assert [(b, h, t0) for b, (_, h, _, _, t0, _) in ((b, items[it]) for b, it in order)] == log["runs"]
    # the next item's copies were issued by its predecessor exactly when both have a sequence
    want_pf = sorted((it + ctas, st) for b in range(ctas) for it in range(b, len(items) - ctas, ctas)
                     if items[it] is not None and items[it + ctas] is not None for st in ("state", "front", "back"))
    assert sorted(log["prefetched"]) == want_pf
    assert (len(want_pf) > 0) == (ctas < len(items))

    for (b, it), seen in zip(order, log["seen"]):
        rho, h, n, j, t0, eos = items[it]
        r = eos - t0 if eos - t0 < C else C
        srow = checkpoints.packed_row0(CU, n) + j if ckpt else rho
        tag = f"CTA {b}, item {it} (row {rho}, head {h})"

        def rows(a):
            out = np.zeros((C, a.shape[-1]))
            out[:r] = a[t0:t0 + r, h]
            return out

        for name, src in (("do", "dO"), ("u", "u"), ("dr", "dr"), ("vr", "v")):
            assert np.array_equal(seen[name], rows(x[src])), f"{tag}: {name}"
        assert np.array_equal(seen["sf"], x["ckpt"][srow, h]), f"{tag}: S"
        assert np.array_equal(seen["dsf"], x["dckpt"][rho, h]), f"{tag}: dS"
        kh = x["k"][t0:t0 + r, h]
        kh = emu.rounded(kh / np.sqrt((kh * kh).sum(-1, keepdims=True) + 1e-6), bf)
        np.testing.assert_allclose(seen["kr"][:r], kh, rtol=8e-3, atol=1e-12, err_msg=f"{tag}: k-hat")

        sl = slice(t0, t0 + r)
        np.testing.assert_allclose(x["dv"][sl, h], emu.rounded(x["beta"][sl, h] * x["dr"][sl, h], bf), rtol=1e-6,
                                   err_msg=f"{tag}: dv")
        np.testing.assert_allclose(x["dbeta"][sl, h, 0], (x["v"][sl, h] * x["dr"][sl, h]).sum(-1), rtol=1e-5,
                                   atol=1e-6, err_msg=f"{tag}: dbeta")
        # stubbed row sums are zero: dg is the chunk's tail term e^G_last sum S dS on every row
        tail = np.exp(x["g"][sl, h, 0].sum()) * (x["ckpt"][srow, h] * x["dckpt"][rho, h]).sum()
        np.testing.assert_allclose(x["dg"][sl, h, 0], np.full(r, tail), rtol=1e-5, err_msg=f"{tag}: dg")
    covered = np.zeros(T, bool)
    for n in range(N):
        covered[CU[n]:CU[n + 1]] = True
    assert not np.isnan(x["dv"][covered]).any() and np.isnan(x["dv"][~covered]).all()


@pytest.mark.parametrize("vector_gates", [False, True], ids=["gdn-persistent", "vector-gates-per-chunk"])
def test_each_grads_kernel_launches_the_grid_its_kernel_reads(vector_gates):
    """The vector-gate grads kernel inherits the launcher of the persistent one but reads
    block_idx as (checkpoint row, head): it must launch one CTA per (row, head). (A vector
    kernel launched on the persistent grid ran 132 CTAs of head 0 and left the rest of dq,
    dk, dv unwritten: NaN on the H200.)"""
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_class

    T, N = CU[-1], len(CU) - 1
    f = FrostFwdConfig(io_dtype="bfloat16", state_dtype=None, H=HO, HK=HO, HV=HO, K=K, V=V,
                       gate_per_channel=vector_gates, beta_per_channel=False, has_w=False, use_l2norm=True,
                       has_initial_state=False, has_final_state=False,
                       gate_align16=vector_gates)
    cfg = FrostBwdConfig(f, "grads", None, None, grads_ctas=7)
    kern = bwd_kernel_class("grads", vector_gates)(cfg)
    grid = kern.grid(T, N)
    if vector_gates:
        assert grid == [T // C + N, HO, 1]
    else:
        assert grid == [7, 1, 1]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
