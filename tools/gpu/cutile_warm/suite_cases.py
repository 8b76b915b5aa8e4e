"""The cuTile launches of the GPU suites, as cases the recorder can drive on CPU tensors.

Each GPU entry point reaches the kernels through the same host orchestration,
`chunked_fwd` / `chunked_bwd` (kernels/fwd.py, kernels/bwd.py), either directly (smoke
scripts, bench) or through the cuTile engine's `execute` (graph API, torch ops), which
passes the caller's contiguous tensors and a carved workspace straight through.  A
`LaCase` holds what decides the specializations: family, sequence lengths, heads, head
dims, io dtype, flags, which optional state tensors are present, whether the
workspace layout is told the q/k and v head counts (the engine does; direct callers do
not, which matters only for float16 KDA staging) and the SLICE_TMA build the suite runs
(CUDNN_CUTILE_SLICE_TMA: 0 under compute-sanitizer; each value is its own specialization).  `drive` replays one case on CPU
tensors that are never read (torch.empty).

The case tables are read from the suites themselves where they are module-level
(SHAPES, CASES); the rest mirror the code named next to them.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LaCase:
    suite: str
    kda: bool
    lens: tuple[int, ...]
    H: int
    HV: int
    K: int
    V: int
    io: str = "bfloat16"
    l2: bool = False
    h0: bool = False            # initial_state given (forward and backward)
    forward: bool = True        # run chunked_fwd
    final: bool = True          # the forward writes final_state
    backward: bool = False      # run chunked_bwd
    d_final: bool = True        # the backward gets d_final_state
    head_counts_in_layout: bool = True
    bv: int = 64
    slice_tma: bool = True      # CUDNN_CUTILE_SLICE_TMA (kernels/fwd.slice_tma_requested)


# -- the tables of each suite ------------------------------------------------------------

def engine_matrix() -> list[LaCase]:
    """tests/numerics/test_la_cutile_engines.py: every shape x l2 x h0 x family, forward
    (final_state out) then backward (d_final_state in, d_initial_state iff h0)."""
    from tests.numerics.test_la_cutile_engines import SHAPES
    return [LaCase("cutile", kda, tuple(lens), H, HV, K, V, l2=l2, h0=h0, backward=True)
            for (_, lens, H, HV, K, V), l2, h0, kda in
            itertools.product(SHAPES, (False, True), (False, True), (False, True))]


def forward_smoke() -> list[LaCase]:
    """tests/numerics/la_cutile_smoke.py CASES: chunked_fwd with final_state."""
    from tests.numerics.la_cutile_smoke import CASES
    return [LaCase("smoke", fam == "kda", tuple(lens), H, HV, K, V, l2=l2, h0=h0,
                   head_counts_in_layout=False)
            for lens, H, HV, K, V, h0, l2, fam, _extreme in CASES]


# tests/numerics/la_cutile_bwd_smoke.py __main__ (inline there): (lens, H, HV, K, V, h0, l2)
_BWD_SMOKE = [([64], 1, 1, 64, 64, False, False),
              ([1, 63, 64, 65, 200], 2, 2, 64, 64, True, False),
              ([0, 130, 1, 77], 4, 4, 128, 128, True, True),
              ([100, 37], 2, 4, 128, 128, False, True)]


def backward_smoke() -> list[LaCase]:
    """chunked_bwd alone with d_final_state (d_initial_state iff h0), both families."""
    return [LaCase("smoke", kda, tuple(lens), H, HV, K, V, l2=l2, h0=h0, forward=False,
                   backward=True)
            for kda in (False, True) for lens, H, HV, K, V, h0, l2 in _BWD_SMOKE]


def smoke() -> list[LaCase]:
    """tools/gpu/gpu_suite.sh `smoke`: both smoke scripts."""
    return forward_smoke() + backward_smoke()


def torch_ops() -> list[LaCase]:
    """tests/torch_ops/ops_gpu_test.py CASES (forward with final_state, gradients with
    both upstream gradients), its two-layer GDN model (l2norm, no final state, so no
    d_final_state) and tests/torch_ops/op_overhead.py (forward, final_state)."""
    from tests.reference.preprocess import Family
    from tests.torch_ops.ops_gpu_test import CASES
    cases = []
    for c in CASES.values():
        if c.family not in (Family.GDN, Family.KDA):
            continue   # GDN-2 runs on FROST only
        cases.append(LaCase("torchops", c.family is Family.KDA, tuple(c.seq_lens), c.H,
                            c.num_v_heads, c.K, c.V, io=str(c.dtype).removeprefix("torch."),
                            l2=c.use_qk_l2norm, h0=c.with_initial_state, backward=True))
    # _GdnBlock(d_model=256, heads=2, head_dim=128) on lens (128, 200, 64, 120)
    cases.append(LaCase("torchops", False, (128, 200, 64, 120), 2, 2, 128, 128, l2=True,
                        final=False, backward=True, d_final=False))
    # op_overhead._config on cuda: (256, 256) tokens, 8 heads, K = V = 128
    cases += [LaCase("torchops", kda, (256, 256), 8, 8, 128, 128) for kda in (False, True)]
    return cases


def bench(seqs: int = 8, seq_len: int = 4096, heads: int = 16, dim: int = 128
          ) -> list[LaCase]:
    """bench/bench_linear_attention.py at its defaults: forward (no state) and
    forward+backward (no state gradients)."""
    lens = (seq_len,) * seqs
    out = [LaCase("bench", kda, lens, heads, heads, dim, dim, final=False,
                  head_counts_in_layout=False) for kda in (False, True)]
    out += [LaCase("bench", kda, lens, heads, heads, dim, dim, forward=False, backward=True,
                   d_final=False, head_counts_in_layout=False) for kda in (False, True)]
    return out


def stage_times() -> list[LaCase]:
    """bench/stage_times.py: the bench forward with the chunk stage at bv 32 / 64 / 128."""
    return [LaCase("stagetimes", kda, (4096,) * 8, 16, 16, 128, 128, final=False, bv=bv,
                   head_counts_in_layout=False) for kda in (False, True) for bv in (32, 64, 128)]


def cu_seqlens_safety(slice_tma: tuple[bool, ...] = (True, False)) -> list[LaCase]:
    """tests/numerics/test_cu_seqlens_safety.py: its one shape through the torch ops, forward
    (final_state out) and backward (o's gradient only), both families; a malformed table
    launches the same specializations as a good one.  gpu_suite.sh `cuseqlens` runs it
    plainly and under memcheck with CUDNN_CUTILE_SLICE_TMA=0: both builds."""
    from tests.numerics import test_cu_seqlens_safety as m
    lens = tuple(b - a for a, b in zip(m.GOOD, m.GOOD[1:]))
    return [LaCase("cuseqlens", kda, lens, m.H, m.H, m.K, m.V, backward=True, d_final=False,
                   slice_tma=tma)
            for tma in slice_tma for kda in (False, True)]


def slice_tma_cost() -> list[LaCase]:
    """gpu_suite.sh `cutiletma`: the cu_seqlens memcheck on the default build (the =0 build
    is `cuseqlens`') and the bench's GDN forward (`--cases "GDN fwd" --impl cuTile`) with
    CUDNN_CUTILE_SLICE_TMA 1 and 0."""
    lens = (4096,) * 8
    return cu_seqlens_safety((True,)) + [
        LaCase("cutiletma", False, lens, 16, 16, 128, 128, final=False,
               head_counts_in_layout=False, slice_tma=tma) for tma in (True, False)]


SUITES = {
    "cuseqlens": cu_seqlens_safety,
    "cutile": engine_matrix,
    "smoke": smoke,
    "torchops": torch_ops,
    "bench": bench,
    "stagetimes": stage_times,
    "cutiletma": slice_tma_cost,
}
DEFAULT_SUITES = ("cutile", "smoke", "torchops", "bench", "cuseqlens", "cutiletma")


_GPU_ALIGN = 512

# -- replay ------------------------------------------------------------------------------

def drive(case: LaCase) -> None:
    """Run the case's host orchestration on CPU tensors (values never read)."""
    import torch

    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout

    io = getattr(torch, case.io)
    f32 = torch.float32
    T, N, HO = sum(case.lens), len(case.lens), max(case.H, case.HV)
    K, V = case.K, case.V

    def empty(*shape, dtype=f32):
        return torch.empty(*shape, dtype=dtype)

    q, k, v = empty(T, case.H, K, dtype=io), empty(T, case.H, K, dtype=io), \
        empty(T, case.HV, V, dtype=io)
    g = empty(T, HO, K) if case.kda else empty(T, HO)
    beta = empty(T, HO)
    cu = torch.tensor([0, *itertools.accumulate(case.lens)], dtype=torch.int32)
    h0 = empty(N, HO, V, K) if case.h0 else None
    kw = dict(kda=case.kda, io_dtype=io, io_itemsize=2, int32_dtype=torch.int32,
              float32_dtype=f32)
    heads = dict(h_q=case.H, hv=case.HV) if case.head_counts_in_layout else {}
    scale = 1 / math.sqrt(K)

    def carve(layout):
        # torch's CUDA allocator hands out 512-byte aligned blocks; CPU blocks are 64-byte
        raw = torch.empty(max(layout.size, 1) + _GPU_ALIGN, dtype=torch.uint8)
        skip = -raw.data_ptr() % _GPU_ALIGN
        return layout.carve(raw[skip:skip + max(layout.size, 1)])

    if case.forward:
        scratch = carve(fwd_layout(T, N, HO, K, V, **heads, **kw))
        chunked_fwd(q, k, v, g, beta, cu, empty(T, HO, V, dtype=io), scratch, kda=case.kda,
                    scale=scale, initial_state=h0,
                    final_state=empty(N, HO, V, K) if case.final else None,
                    use_l2norm=case.l2, stream=0, bv=case.bv, slice_tma=case.slice_tma)
    if case.backward:
        scratch = carve(bwd_layout(T, N, case.H, case.HV, K, V, **kw))
        chunked_bwd(q, k, v, g, beta, cu, empty(T, HO, V, dtype=io), torch.empty_like(q),
                    torch.empty_like(k), torch.empty_like(v), torch.empty_like(g),
                    torch.empty_like(beta), scratch, kda=case.kda, scale=scale,
                    initial_state=h0,
                    d_final_state=empty(N, HO, V, K) if case.d_final else None,
                    d_initial_state=empty(N, HO, V, K) if case.h0 else None,
                    use_l2norm=case.l2, stream=0, slice_tma=case.slice_tma)


def cases_of(suites) -> list[LaCase]:
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ValueError(f"unknown suite(s) {unknown}; known: {sorted(SUITES)}")
    return [c for s in suites for c in SUITES[s]()]
