"""The cuTile kernels' own source, run on the CPU tile emulator, against float64 references.

Every kernel body and the host orchestration (kernels/fwd.py, kernels/bwd.py) execute
unchanged on tile_emulator.py (numpy with the GPU's rounding points: bf16 / tf32 operand
rounding, fp32 tiles, stores rounded to the array dtype), so an algebra or indexing
mistake in a kernel edit shows up here before a GPU run, and the relative errors are
the ones the bf16 kernels should show on the GPU (bound 1e-2, as the GPU smoke checks).
References: a float64 token recurrence (forward) and the float64 chunked backward of
tests/reference.  Cases cover partial and empty chunks, grouped q/k and v heads,
K != V, initial states, in-kernel l2norm and (KDA) gates that need the tier-2 scores.
"""
import math
import os
import sys

# The emulated kernels are thousands of small numpy / torch ops: one OpenMP thread, as the
# frost and reference tests' targets set (tests/reference/BUILD.bazel, SINGLE_THREAD). Read
# when torch loads, so set before the imports below (Bazel runs this file as main). With
# another test process on a 2-core CI machine, OpenMP's spinning workers made this file
# ~6x slower: 101 s against 17 s beside a busy core.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tile_emulator import emulated_kernels, launches  # noqa: E402

BOUND = 1e-2
# Correlated keys make the chunk system ill-conditioned: with a float64 WY inverse the
# emulated bf16 kernels already sit at ~6e-3 there, the bf16 inverse and Gram operands
# add ~3e-3 (the Neumann-product kernels before gave 1e14 .. 1e22).
CORRELATED_BOUND = 1.5e-2


def rel(a, b) -> float:
    b = b.double()
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-30)).item()


def carve(layout):
    buf = torch.zeros(layout.size + 256, dtype=torch.uint8)
    off = (-buf.data_ptr()) % 128
    return layout.carve(buf[off:off + layout.size])


def make_inputs(lens, H, HV, K, V, kda, l2, gate, seed=0, dtype=torch.bfloat16):
    """q, k, v, g, beta, cu; gate = "typical" | "strong" (tier-2 KDA chunks) | "extreme"
    | "correlated" (keys at cosine ~0.8, beta >= 0.5, slow decay: T's Neumann series has
    huge cancelling terms, the hard case for the WY inverse)."""
    torch.manual_seed(seed)
    T, HO = sum(lens), max(H, HV)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(T, H, K).to(dtype)
    k = torch.randn(T, H, K)
    if gate == "correlated":   # unit common direction + 0.436 x unit noise: cosine ~0.81
        k = 0.9 * F.normalize(torch.randn(1, H, K), dim=-1) + 0.436 * F.normalize(k, dim=-1)
    k = (k if l2 else F.normalize(k, dim=-1)).to(dtype)
    v = torch.randn(T, HV, V).to(dtype)
    g = F.logsigmoid(torch.randn((T, HO, K) if kda else (T, HO))) * 0.5
    if gate == "strong":      # 4 nats per token on some channels: wider than one split
        g[..., ::5] = -4.0
    elif gate == "extreme":   # e^-30 per token: the exact diagonal-block fallback
        g[..., ::7] = -30.0
    beta = torch.sigmoid(torch.randn(T, HO))
    if gate == "correlated":
        g = g * 0.02
        beta = 0.5 + 0.5 * beta
    return q, k, v, g, beta, cu


def token_recurrence(q, k, v, g, beta, cu, scale, h0, l2):
    """float64 delta-rule recurrence; states V-major [N, HO, V, K]."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    HO = max(H, HV)
    q, k = q.repeat_interleave(HO // H, 1), k.repeat_interleave(HO // H, 1)
    v = v.repeat_interleave(HO // HV, 1)
    if l2:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    o = torch.zeros(T, HO, V, dtype=torch.float64)
    N = cu.numel() - 1
    ht = torch.zeros(N, HO, V, K, dtype=torch.float64)
    for n in range(N):
        X = h0[n].double().clone() if h0 is not None else torch.zeros(HO, V, K,
                                                                     dtype=torch.float64)
        for t in range(int(cu[n]), int(cu[n + 1])):
            gt = torch.exp(g[t])
            X = X * (gt[:, None, :] if gt.dim() == 2 else gt[:, None, None])
            u = beta[t][:, None] * (v[t] - torch.einsum("hvk,hk->hv", X, k[t]))
            X = X + u[:, :, None] * k[t][:, None, :]
            o[t] = scale * torch.einsum("hvk,hk->hv", X, q[t])
        ht[n] = X
    return o, ht


FWD_CASES = [  # (lens, H, HV, K, V, initial state, l2norm, gate)
    ([1, 63, 64, 65, 130], 2, 2, 64, 64, True, False, "typical"),
    ([0, 100, 37, 0], 2, 4, 64, 128, False, True, "typical"),
    ([77, 64], 4, 2, 128, 64, True, True, "strong"),
    ([130], 2, 2, 128, 128, True, False, "extreme"),
    ([200], 2, 2, 128, 128, False, False, "correlated"),
    ([150], 2, 2, 64, 64, True, True, "correlated"),
]


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("case", FWD_CASES, ids=lambda c: f"{c[0]}-H{c[1]}-HV{c[2]}-K{c[3]}"
                         f"-V{c[4]}-h0{int(c[5])}-l2{int(c[6])}-{c[7]}")
def test_forward_matches_token_recurrence(family, case):
    lens, H, HV, K, V, use_h0, l2, gate = case
    kda = family == "kda"
    q, k, v, g, beta, cu = make_inputs(lens, H, HV, K, V, kda, l2, gate)
    T, N, HO = sum(lens), len(lens), max(H, HV)
    h0 = torch.randn(N, HO, V, K) * 0.1 if use_h0 else None
    scale = 1 / math.sqrt(K)
    o = torch.full((T, HO, V), float("nan"), dtype=q.dtype)
    ht = torch.full((N, HO, V, K), float("nan"))
    with emulated_kernels() as kern:
        lay = kern.fwd.fwd_layout(T, N, HO, K, V, kda=kda, io_dtype=q.dtype, io_itemsize=2,
                                  int32_dtype=torch.int32, float32_dtype=torch.float32,
                                  h_q=H, hv=HV)
        kern.fwd.chunked_fwd(q, k, v, g, beta, cu, o, carve(lay), kda=kda, scale=scale,
                             initial_state=h0, final_state=ht, use_l2norm=l2, stream=0)
    ro, rh = token_recurrence(q, k, v, g, beta, cu, scale, h0, l2)
    bound = CORRELATED_BOUND if gate == "correlated" else BOUND
    assert not torch.isnan(o).any() and not torch.isnan(ht).any()
    assert rel(o, ro) <= bound, f"output rel. error {rel(o, ro):.2e}"
    assert rel(ht, rh) <= bound, f"final state rel. error {rel(ht, rh):.2e}"


BWD_CASES = [  # (lens, H, HV, K, V, initial state, l2norm, gate)
    ([1, 63, 64, 65, 130], 2, 2, 64, 64, True, False, "typical"),
    ([100, 37], 2, 4, 64, 128, True, True, "typical"),
    ([77], 4, 2, 128, 64, False, True, "strong"),
    ([150], 2, 2, 64, 64, True, True, "correlated"),
]


# fp16 inputs carry 3 more bits than bf16: the emulated fp16 backward sits at <= 3e-3
# (GDN <= 5e-4); a product path that rounds them to bf16 shows up as ~1e-2 in dg.
FP16_BWD_BOUND = 5e-3


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("case", BWD_CASES, ids=lambda c: f"{c[0]}-H{c[1]}-HV{c[2]}-K{c[3]}"
                         f"-V{c[4]}-h0{int(c[5])}-l2{int(c[6])}-{c[7]}")
def test_backward_matches_float64_chunked_reference(family, case, dtype):
    reference = pytest.importorskip("tests.reference.kda" if family == "kda"
                                    else "tests.reference.gdn")
    lens, H, HV, K, V, use_h0, l2, gate = case
    kda = family == "kda"
    q, k, v, g, beta, cu = make_inputs(lens, H, HV, K, V, kda, l2, gate,
                                       dtype=torch.float16 if dtype == "fp16" else torch.bfloat16)
    bound = FP16_BWD_BOUND if dtype == "fp16" else BOUND
    if gate == "correlated":   # emulated: 6.5-9.5e-3, as the GPU engine matrix
        bound = CORRELATED_BOUND
    T, N, HO = sum(lens), len(lens), max(H, HV)
    h0 = torch.randn(N, HO, V, K) * 0.1 if use_h0 else None
    d_out = torch.randn(T, HO, V).to(q.dtype)
    dht = torch.randn(N, HO, V, K) * 0.1
    scale = 1 / math.sqrt(K)
    nan = float("nan")
    dq, dk, dv = torch.full_like(q, nan), torch.full_like(k, nan), torch.full_like(v, nan)
    dg, dbeta = torch.full_like(g, nan), torch.full_like(beta, nan)
    dh0 = torch.full((N, HO, V, K), nan) if use_h0 else None
    with emulated_kernels() as kern:
        lay = kern.bwd.bwd_layout(T, N, H, HV, K, V, kda=kda, io_dtype=q.dtype, io_itemsize=2,
                                  int32_dtype=torch.int32, float32_dtype=torch.float32)
        kern.bwd.chunked_bwd(q, k, v, g, beta, cu, d_out, dq, dk, dv, dg, dbeta, carve(lay),
                             kda=kda, scale=scale, initial_state=h0, d_final_state=dht,
                             d_initial_state=dh0, use_l2norm=l2, stream=0)
    ref_fn = reference.naive_chunk_kda_bwd if kda else reference.naive_chunk_gdn_bwd
    d64 = lambda x: None if x is None else x.double()  # noqa: E731
    ref = ref_fn(d64(q), d64(k), d64(v), d64(g), d64(beta), cu.long(), d64(d_out),
                 d_final_state=d64(dht), scale=scale, initial_state=d64(h0), use_qk_l2norm=l2)
    errs = {"dq": rel(dq, ref.dq), "dk": rel(dk, ref.dk), "dv": rel(dv, ref.dv),
            "dg": rel(dg, ref.dg), "dbeta": rel(dbeta, ref.dbeta)}
    if use_h0:
        errs["dh0"] = rel(dh0, ref.d_initial_state)
    bad = {n: f"{e:.2e}" for n, e in errs.items() if not e <= bound}
    assert not bad, f"relative errors over {bound}: {bad}"


def test_emulator_rounds_like_the_gpu():
    """bf16 / tf32 rounding and zero-padded tile loads, which the numerics above rely on."""
    import tile_emulator as te
    x = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -11, -(1.0 + 2 ** -11)])
    bf = te.astype(x.numpy(), te.bfloat16)
    assert bf.tolist() == x.to(torch.bfloat16).float().tolist()      # ties to even
    assert te.astype(x.numpy(), te.tfloat32).tolist() == [1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8,
                                                          1.0 + 2 ** -10, -(1.0 + 2 ** -10)]
    arr = te.Array(torch.arange(12, dtype=torch.float32).reshape(3, 4))
    tile = te.load(arr, (1, 0), shape=(2, 4), padding_mode=te.PaddingMode.ZERO)
    assert tile.tolist() == [[8, 9, 10, 11], [0, 0, 0, 0]]


def test_emulated_launches_cover_every_forward_stage():
    q, k, v, g, beta, cu = make_inputs([70], 1, 1, 64, 64, True, False, "typical")
    o = torch.zeros(70, 1, 64, dtype=q.dtype)
    with emulated_kernels() as kern:
        lay = kern.fwd.fwd_layout(70, 1, 1, 64, 64, kda=True, io_dtype=q.dtype, io_itemsize=2,
                                  int32_dtype=torch.int32, float32_dtype=torch.float32)
        kern.fwd.chunked_fwd(q, k, v, g, beta, cu, o, carve(lay), kda=True, scale=0.125,
                             stream=0)
    # the cu_seqlens safety rides in the chunk-table launch: no launch of its own
    assert [name for name, _ in launches] == ["chunk_table_kernel", "la_wy_fwd_kernel",
                                              "la_wy_fwd_kernel", "la_chunk_fwd_kernel"]


@pytest.mark.parametrize("family", ["gdn", "kda"])
def test_stage_by_stage_backward_equals_the_whole(family):
    """bench/stage_times.py times chunked_bwd one launch kind at a time: those runs, in
    order, must redo exactly what the whole backward does."""
    kda = family == "kda"
    q, k, v, g, beta, cu = make_inputs([70, 64], 2, 2, 64, 64, kda, False, "strong")
    d_out = torch.randn(134, 2, 64).to(q.dtype)
    outs = []
    with emulated_kernels() as kern:
        lay = kern.bwd.bwd_layout(134, 2, 2, 2, 64, 64, kda=kda, io_dtype=q.dtype,
                                  io_itemsize=2, int32_dtype=torch.int32,
                                  float32_dtype=torch.float32)
        for stages in (None, [("table",), ("wy",), ("recompute",), ("dhu",), ("dqkwg",),
                              ("bwd_wy",), ("group_sum",)]):
            grads = [torch.full_like(x, float("nan")) for x in (q, k, v, g, beta)]
            s = carve(lay)
            for st in stages or [None]:
                kern.bwd.chunked_bwd(q, k, v, g, beta, cu, d_out, *grads, s, kda=kda,
                                     scale=0.125, stream=0, stages=st)
            outs.append(grads)
    for whole, staged in zip(*outs):
        assert torch.equal(whole, staged)


@pytest.mark.parametrize("family, dtype, K, V, own", [
    ("kda", torch.bfloat16, 64, 64, {"dqkwg", "wy"}),
    ("kda", torch.bfloat16, 64, 256, {"dqkwg"}),       # tileiras fails bwd_wy's hint there
    ("kda", torch.float16, 64, 64, set()),             # fp32-staged inputs: default hints
    ("gdn", torch.bfloat16, 64, 64, set()),
])
def test_backward_entry_points(family, dtype, K, V, own):
    """16-bit KDA runs dqkwg / bwd_wy on its own entry points (8 compute warps) except
    where tileiras 13.4 fails under that hint (bwd.kda_wy_hinted); GDN and fp32-staged
    KDA on the default ones (both run one body)."""
    kda = family == "kda"
    q, k, v, g, beta, cu = make_inputs([70], 1, 1, K, V, kda, False, "typical", dtype=dtype)
    d_out = torch.randn(70, 1, V).to(dtype)
    grads = [torch.full_like(x, float("nan")) for x in (q, k, v, g, beta)]
    with emulated_kernels() as kern:
        lay = kern.bwd.bwd_layout(70, 1, 1, 1, K, V, kda=kda, io_dtype=dtype, io_itemsize=2,
                                  int32_dtype=torch.int32, float32_dtype=torch.float32)
        kern.bwd.chunked_bwd(q, k, v, g, beta, cu, d_out, *grads, carve(lay), kda=kda,
                             scale=0.125, stream=0)
    assert not any(torch.isnan(x).any() for x in grads)
    names = {name for name, _ in launches}
    for stage in ("dqkwg", "wy"):
        kda_name, default = f"la_bwd_{stage}_kda_kernel", f"la_bwd_{stage}_kernel"
        assert (kda_name in names, default in names) == ((True, False) if stage in own
                                                         else (False, True)), names


# cu_seqlens tables on T = 100 tokens, N = 4: well formed ones with length-0 and length-1
# sequences, and malformed ones. The emulator raises on any slice or tile outside its
# array (undefined on the GPU), and outputs start as NaN, so a row left unwritten shows up.
# The kernels read the sanitised table S = running max of the entries clamped to [0, T]:
# rows outside [S[0], S[N]) must come back exactly zero, the others match the float64
# reference run on S.
TABLE_T = 100
TABLES = {
    "well_formed": [0, 40, 41, 41, 100],        # a length-1 and a length-0 sequence
    "empty_ends": [0, 0, 1, 100, 100],
    "last_past_T": [0, 40, 70, 90, 170],
    "negative": [-30, 1, 40, 70, 100],
    "non_monotone": [0, 80, 20, 21, 100],
    "last_short_of_T": [10, 40, 41, 70, 85],
    "descending": [100, 60, 30, 0, 0],
    "all_past_T": [150, 160, 170, 180, 190],
}


def _sanitized(table, T):
    out, top = [], 0
    for i, x in enumerate(table):
        x = min(max(x, 0), T)
        top = x if i == 0 else max(top, x)
        out.append(top)
    return out


def _expected_chunk_table(safe, bt, rows):
    """(table rows, count, offsets) of the sanitised table, as chunk_table.py defines them."""
    pairs, offsets = [], []
    for n in range(len(safe) - 1):
        offsets.append(len(pairs))
        pairs += [[n, c] for c in range(-(-(safe[n + 1] - safe[n]) // bt))]
    offsets.append(len(pairs))
    owners = [n for n, _ in pairs]
    last = max(owners) if owners else 0
    return pairs + [[last, rows]] * (rows - len(pairs)), len(pairs), offsets


def _covered_reference(family, x, d_out, safe, dht, h0, scale):
    """float64 backward on the rows [S[0], S[N]) (the reference wants cu = 0 .. T), placed
    into zeros; with nothing covered every sequence is empty and dh0 = dht."""
    lo, hi = safe[0], safe[-1]
    grads = [torch.zeros(a.shape, dtype=torch.float64) for a in x[:5]]
    if hi == lo:
        return grads, dht.double()
    ref_fn = (pytest.importorskip("tests.reference.kda").naive_chunk_kda_bwd if family == "kda"
              else pytest.importorskip("tests.reference.gdn").naive_chunk_gdn_bwd)
    cu = torch.tensor([c - lo for c in safe], dtype=torch.long)
    part = [a[lo:hi].double() for a in x[:5]]
    ref = ref_fn(*part, cu, d_out[lo:hi].double(), d_final_state=dht.double(), scale=scale,
                 initial_state=h0.double())
    for full, got in zip(grads, (ref.dq, ref.dk, ref.dv, ref.dg, ref.dbeta)):
        full[lo:hi] = got
    return grads, ref.d_initial_state


def _assert_zero_outside(name, out, safe):
    inside = torch.zeros(out.shape[0], dtype=torch.bool)
    inside[safe[0]:safe[-1]] = True
    assert not torch.isnan(out).any(), f"{name}: NaN (a row left unwritten), S = {safe}"
    assert (out[~inside] == 0).all(), f"{name}: uncovered rows not zero, S = {safe}"


@pytest.mark.parametrize("name", sorted(TABLES))
def test_chunk_table_launch_sanitises_the_table(name):
    """cu_safe, the chunk rows, the count and the offsets from one chunk-table launch."""
    table, T = TABLES[name], TABLE_T
    safe = _sanitized(table, T)
    with emulated_kernels() as kern:
        lay = kern.fwd.fwd_layout(T, 4, 1, 64, 64, kda=False, io_dtype=torch.bfloat16,
                                  io_itemsize=2, int32_dtype=torch.int32,
                                  float32_dtype=torch.float32)
        s = carve(lay)
        for key in ("cu_safe", "table", "count", "offsets"):
            s[key].fill_(-7)
        kern.chunk_table.chunk_table_fwd(torch.tensor(table, dtype=torch.int32), s, T,
                                         kern.fwd.BT, 0)
    rows, count, offsets = _expected_chunk_table(safe, kern.fwd.BT, s["table"].shape[0])
    assert s["cu_safe"].tolist() == safe
    assert (s["count"].item(), s["offsets"].tolist()) == (count, offsets)
    assert s["table"].tolist() == rows
    if name == "well_formed":
        assert safe == table


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("name", sorted(TABLES))
def test_cu_seqlens_tables_forward_in_bounds_reference_rows_zero_elsewhere(name, family):
    table, T, N = TABLES[name], TABLE_T, 4
    kda = family == "kda"
    H, HV, K, V = (1, 2, 64, 64) if kda else (2, 1, 64, 64)
    HO = max(H, HV)
    q, k, v, g, beta, _ = make_inputs([25, 25, 25, 25], H, HV, K, V, kda, False, "typical")
    safe = _sanitized(table, T)
    h0 = torch.randn(N, HO, V, K) * 0.1
    o = torch.full((T, HO, V), float("nan"), dtype=q.dtype)
    ht = torch.full((N, HO, V, K), float("nan"))
    with emulated_kernels() as kern:
        lay = kern.fwd.fwd_layout(T, N, HO, K, V, kda=kda, io_dtype=q.dtype, io_itemsize=2,
                                  int32_dtype=torch.int32, float32_dtype=torch.float32,
                                  h_q=H, hv=HV)
        kern.fwd.chunked_fwd(q, k, v, g, beta, torch.tensor(table, dtype=torch.int32), o,
                             carve(lay), kda=kda, scale=0.125, initial_state=h0,
                             final_state=ht, stream=0)
    ro, rh = token_recurrence(q, k, v, g, beta, torch.tensor(safe), 0.125, h0, False)
    _assert_zero_outside("o", o, safe)
    assert rel(o, ro) <= BOUND, f"output rel. error {rel(o, ro):.2e}"
    assert rel(ht, rh) <= BOUND, f"final state rel. error {rel(ht, rh):.2e}"


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("name", sorted(TABLES))
def test_cu_seqlens_tables_backward_in_bounds_reference_rows_zero_elsewhere(name, family):
    """Grouped heads both ways (GDN: q/k shared, dq / dk go through the fp32 partials
    and the group sums; KDA: v shared), so the zeroed partials reach the gradients."""
    table, T, N = TABLES[name], TABLE_T, 4
    kda = family == "kda"
    H, HV, K, V = (1, 2, 64, 64) if not kda else (2, 1, 64, 64)
    HO = max(H, HV)
    x = make_inputs([25, 25, 25, 25], H, HV, K, V, kda, False, "typical")
    safe = _sanitized(table, T)
    h0 = torch.randn(N, HO, V, K) * 0.1
    dht = torch.randn(N, HO, V, K) * 0.1
    d_out = torch.randn(T, HO, V).to(x[0].dtype)
    grads = [torch.full_like(a, float("nan")) for a in x[:5]]
    dh0 = torch.full((N, HO, V, K), float("nan"))
    with emulated_kernels() as kern:
        lay = kern.bwd.bwd_layout(T, N, H, HV, K, V, kda=kda, io_dtype=x[0].dtype,
                                  io_itemsize=2, int32_dtype=torch.int32,
                                  float32_dtype=torch.float32)
        s = carve(lay)
        for key in ("dq_group", "dk_group", "dv_group"):   # the group sums read every row
            if key in s:
                s[key].fill_(float("nan"))
        kern.bwd.chunked_bwd(*x[:5], torch.tensor(table, dtype=torch.int32), d_out, *grads, s,
                             kda=kda, scale=0.125, initial_state=h0, d_final_state=dht,
                             d_initial_state=dh0, stream=0)
    ref, ref_dh0 = _covered_reference(family, x, d_out, safe, dht, h0, 0.125)
    for gname, got, want in zip(("dq", "dk", "dv", "dg", "dbeta"), grads, ref):
        _assert_zero_outside(gname, got, safe)
        assert rel(got, want) <= BOUND, f"{gname} rel. error {rel(got, want):.2e}"
    assert rel(dh0, ref_dh0) <= BOUND, f"dh0 rel. error {rel(dh0, ref_dh0):.2e}"


def test_emulator_refuses_what_cutile_leaves_undefined():
    """Array.slice and tile loads / stores follow cuTile's rules (tile_emulator.py)."""
    import tile_emulator as te
    arr = te.Array(torch.arange(12, dtype=torch.float32).reshape(6, 2))
    assert arr.slice(axis=0, start=5, stop=6).shape == (1, 2)
    for start, stop in ((6, 6), (-1, 2), (2, 1), (0, 7)):
        with pytest.raises(te.OutOfBounds):
            arr.slice(axis=0, start=start, stop=stop)
    part = arr.slice(axis=0, start=2, stop=5)                     # rows 2, 3, 4
    tile = te.load(part, (1, 0), shape=(2, 2), padding_mode=te.PaddingMode.ZERO)
    assert tile.tolist() == [[8, 9], [0, 0]]                      # partly outside: padded
    for index in ((2, 0), (-1, 0), (0, 1)):
        with pytest.raises(te.OutOfBounds):
            te.load(part, index, shape=(2, 2), padding_mode=te.PaddingMode.ZERO)
        with pytest.raises(te.OutOfBounds):
            te.store(part, index, np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(te.OutOfBounds):
        te.load(part, (3, 0), shape=())
    assert te.scan(np.array([3, 1, 4, 1, 5], dtype=np.int32), 0, lambda a, b: max(a, b),
                   0).tolist() == [3, 3, 4, 4, 5]


def test_backward_occupancy_override_runs_the_same_kernels_and_rejects_bad_values():
    """chunked_bwd(occupancy=2) (stage_times --bwd-occupancy) launches the dqkwg / bwd_wy
    kernels rebuilt with the hint; on the emulator (hints ignored) the gradients match."""
    q, k, v, g, beta, cu = make_inputs([70], 2, 2, 64, 64, False, False, "typical")
    d_out = torch.randn(70, 2, 64).to(q.dtype)
    outs = []
    with emulated_kernels() as kern:
        lay = kern.bwd.bwd_layout(70, 1, 2, 2, 64, 64, kda=False, io_dtype=q.dtype,
                                  io_itemsize=2, int32_dtype=torch.int32,
                                  float32_dtype=torch.float32)
        for occ in (None, 2):
            grads = [torch.full_like(x, float("nan")) for x in (q, k, v, g, beta)]
            kern.bwd.chunked_bwd(q, k, v, g, beta, cu, d_out, *grads, carve(lay), kda=False,
                                 scale=0.125, stream=0, occupancy=occ)
            outs.append(grads)
        with pytest.raises(ValueError, match="occupancy must be 1..4"):
            kern.bwd.chunked_bwd(q, k, v, g, beta, cu, d_out, *outs[0], carve(lay), kda=False,
                                 scale=0.125, stream=0, occupancy=0)
    assert not any(torch.isnan(x).any() for x in outs[0])
    for a, b in zip(*outs):
        assert torch.equal(a, b)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
