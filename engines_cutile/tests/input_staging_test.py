"""CPU tests of the fp32 staging of float16 KDA inputs (kernels/input_staging.py).

Layout: which passes get fp32 copies of q/k/v (and dO), with which shapes, fp32 scratch
and an exact workspace size, also through the engine's plan.  Routing: the host passes
hand every kernel the fp32 copies (equal to the caller's fp16 inputs) while outputs stay
in the caller's fp16 buffers.  Nothing is compiled here (aot_compile_test.py does that):
a recording stand-in for cuda.tile captures each launch's arguments.
"""
import os
import sys
import types
from unittest import mock

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention.common.facts import linear_attention_facts  # noqa: E402
from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout  # noqa: E402
from cudnn.linear_attention.cutile.kernels.fwd import fwd_layout  # noqa: E402
from cudnn.linear_attention.cutile.kernels.input_staging import stage_inputs  # noqa: E402
from cudnn.linear_attention.cutile.la_engine import (  # noqa: E402
    _LinearAttentionPlan, check_io_dtypes)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cutile_graphs import DT, la_graph  # noqa: E402

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32
IO_SCRATCH = ("w", "u", "p", "qg", "kd")
GEO = dict(T=150, N=3, H=2, HV=4, K=64, V=128)   # grouped v heads: HO = 4 != H


def layout(backward, kda, io, T, N, H, HV, K, V):
    kw = dict(kda=kda, io_dtype=io, io_itemsize=io.itemsize, int32_dtype=torch.int32,
              float32_dtype=F32)
    if backward:
        return bwd_layout(T, N, H, HV, K, V, **kw)
    return fwd_layout(T, N, max(H, HV), K, V, h_q=H, hv=HV, **kw)


def aligned_bytes(n):
    """n bytes of CPU memory on a 128-byte boundary (carve's requirement)."""
    raw = torch.zeros(n + 128, dtype=torch.uint8)
    start = -raw.data_ptr() % 128
    return raw[start:start + n]


def staged(lay):
    return {n: r for n, r in lay.regions.items() if n.endswith("_fp32")}


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_kda_fp16_gets_fp32_input_copies_and_fp32_scratch(backward):
    T, N, H, HV, K, V = GEO.values()
    lay = layout(backward, True, F16, **GEO)
    want = {"q_fp32": (T, H, K), "k_fp32": (T, H, K), "v_fp32": (T, HV, V)}
    if backward:
        want["dO_fp32"] = (T, HV, V)
    assert {n: r.shape for n, r in staged(lay).items()} == want
    assert all(r.dtype == F32 and r.itemsize == 4 for r in staged(lay).values())
    scratch = IO_SCRATCH + (("states", "dstates", "v_new") if backward else ())
    assert {lay.regions[n].dtype for n in scratch} == {F32}


@pytest.mark.parametrize("kda, io", [(False, F16), (True, BF16), (False, BF16)])
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_other_passes_run_on_the_callers_buffers(backward, kda, io):
    lay = layout(backward, kda, io, **GEO)
    assert staged(lay) == {}
    assert {lay.regions[n].dtype for n in IO_SCRATCH if n in lay.regions} == {io}


@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_decayed_qk_scratch_only_where_stage1_writes_it(backward, kda):
    """GDN's forward applies its decays in stage 2 as row factors (q_row / k_row, no qg /
    kd scratch); KDA and every backward recompute keep qg / kd."""
    T, N, H, HV, K, V = GEO.values()
    regions = layout(backward, kda, BF16, **GEO).regions
    rowwise = not kda and not backward
    assert ({"q_row", "k_row"} <= set(regions)) == rowwise
    assert ({"qg", "kd"} <= set(regions)) != rowwise
    assert not {"q_row", "k_row", "qg", "kd"} - set(regions) - (
        {"qg", "kd"} if rowwise else {"q_row", "k_row"})
    assert "decay" in regions
    if rowwise:
        assert regions["q_row"].shape == (T, max(H, HV)) and regions["q_row"].dtype == F32


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_staged_workspace_size_is_exact(backward):
    T, N, H, HV, K, V = GEO.values()
    lay = layout(backward, True, F16, **GEO)
    regions = sorted(lay.regions.values(), key=lambda r: r.offset)
    for a, b in zip(regions, regions[1:]):
        assert a.offset + a.nbytes <= b.offset and b.offset % 128 == 0
    assert regions[-1].offset + regions[-1].nbytes == lay.size
    copies = 4 * T * (2 * H * K + HV * V + (HV * V if backward else 0))
    assert sum(r.nbytes for r in staged(lay).values()) == copies
    views = lay.carve(aligned_bytes(lay.size))
    assert views["v_fp32"].shape == (T, HV, V) and views["q_fp32"].dtype == F32
    with pytest.raises(ValueError, match="workspace too small"):
        lay.carve(aligned_bytes(lay.size - 1))


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_engine_plan_reserves_the_copies(backward):
    T, N, H, HV, K, V = GEO.values()
    g = la_graph("kda", backward, io=DT.HALF, **GEO)
    plan = _LinearAttentionPlan(linear_attention_facts(g), kda=True)
    expected = layout(backward, True, F16, **GEO)
    assert plan.get_workspace_size() == expected.size
    assert {n: r.shape for n, r in staged(plan.layout).items()} == \
        {n: r.shape for n, r in staged(expected).items()}
    bf16_plan = _LinearAttentionPlan(linear_attention_facts(
        la_graph("kda", backward, io=DT.BFLOAT16, **GEO)), kda=True)
    assert staged(bf16_plan.layout) == {}


def test_execute_rejects_buffers_of_another_dtype_than_planned():
    q = torch.zeros(4, 2, 8, dtype=F16)
    check_io_dtypes("kda_node", F16, q=q)
    with pytest.raises(ValueError, match=r"kda_node: 'q' is torch.float16 but the plan was "
                                         r"built for torch.bfloat16"):
        check_io_dtypes("kda_node", BF16, q=q)


def test_stage_inputs_needs_matching_regions():
    q = torch.randn(5, 2, 8).to(F16)
    with pytest.raises(ValueError, match="tileiras 13.4.92.*no 'q_fp32' region"):
        stage_inputs({}, {"q": q}, stream=None)
    with pytest.raises(ValueError, match=r"shape \(5, 2, 8\) .* \(5, 4, 8\)"):
        stage_inputs({"q_fp32": torch.zeros(5, 4, 8)}, {"q": q}, stream=None)
    region = torch.zeros(5, 2, 8)
    (out,) = stage_inputs({"q_fp32": region}, {"q": q}, stream=None)
    assert out is region and torch.equal(region, q.float())


@pytest.fixture
def launches(monkeypatch):
    """Record (kernel name, args) of every ct.launch; kernel modules see a fake cuda.tile."""
    calls = []
    tile = mock.MagicMock(name="cuda.tile")
    tile.kernel = lambda fn=None, **_: fn if fn is not None else (lambda f: f)
    tile.launch = lambda stream, grid, kernel, args: calls.append((kernel.__name__, args))
    cuda = types.ModuleType("cuda")
    cuda.tile = tile
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.tile", tile)
    prefix = "cudnn.linear_attention.cutile.kernels."
    keep = ("fwd", "bwd", "input_staging")   # host code only: no cuda.tile at import
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        if name[len(prefix):] not in keep:
            monkeypatch.delitem(sys.modules, name)
    yield calls
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        if name[len(prefix):] not in keep:
            del sys.modules[name]   # imported against the fake; monkeypatch restores the rest


def inputs(kda, io, T, N, H, HV, K, V):
    torch.manual_seed(0)
    HO = max(H, HV)
    q, k = torch.randn(T, H, K).to(io), torch.randn(T, H, K).to(io)
    v = torch.randn(T, HV, V).to(io)
    g = torch.randn((T, HO, K) if kda else (T, HO))
    return q, k, v, g, torch.rand(T, HO), torch.tensor([0, 50, 100, T], dtype=torch.int32)


def first(calls, kernel):
    return next(args for name, args in calls if name == kernel)


@pytest.mark.parametrize("kda, io, staged_run", [(True, F16, True), (False, F16, False),
                                                 (True, BF16, False)])
def test_forward_routes_fp32_copies_to_every_kernel(launches, kda, io, staged_run):
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd
    T, N, H, HV, K, V = GEO.values()
    q, k, v, g, beta, cu = inputs(kda, io, **GEO)
    lay = layout(False, kda, io, **GEO)
    s = lay.carve(aligned_bytes(lay.size))
    o = torch.empty(T, HV, V, dtype=io)
    chunked_fwd(q, k, v, g, beta, cu, o, s, kda=kda, scale=0.125, stream=0)
    wy = [args for name, args in launches if name == "la_wy_fwd_kernel"]
    assert len(wy) == (2 if kda else 1)
    for args in wy:
        for got, src, port in zip(args[:3], (q, k, v), "qkv"):
            if staged_run:
                assert got is s[f"{port}_fp32"] and torch.equal(got, src.float())
            else:
                assert got is src
    w_dtype = F32 if staged_run else io
    assert s["w"].dtype == w_dtype and first(launches, "la_wy_fwd_kernel")[7] is s["w"]
    assert first(launches, "la_chunk_fwd_kernel")[10] is o   # outputs: the caller's buffer


def test_backward_routes_fp32_copies_and_writes_fp16_gradients(launches):
    from cudnn.linear_attention.cutile.kernels.bwd import chunked_bwd
    geo = dict(GEO, HV=2)   # ungrouped: dq/dk/dv go straight to the caller's buffers
    T, N, H, HV, K, V = geo.values()
    q, k, v, g, beta, cu = inputs(True, F16, **geo)
    d_out = torch.randn(T, HV, V).to(F16)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    lay = layout(True, True, F16, **geo)
    s = lay.carve(aligned_bytes(lay.size))
    chunked_bwd(q, k, v, g, beta, cu, d_out, dq, dk, dv, torch.empty_like(g),
                torch.empty_like(beta), s, kda=True, scale=0.125, stream=0)
    staged_q, staged_k, staged_v, staged_do = (s[f"{p}_fp32"] for p in ("q", "k", "v", "dO"))
    assert torch.equal(staged_do, d_out.float()) and torch.equal(staged_v, v.float())
    wy_fwd = first(launches, "la_wy_fwd_kernel")
    assert all(a is b for a, b in zip(wy_fwd[:3], (staged_q, staged_k, staged_v)))
    assert first(launches, "la_chunk_bwd_dhu_kernel")[5] is staged_do
    dqkwg = first(launches, "la_bwd_dqkwg_kernel")
    assert dqkwg[0] is staged_q and dqkwg[3] is staged_do and dqkwg[11] is dq
    wy = first(launches, "la_bwd_wy_kernel")
    assert wy[0] is staged_k and wy[1] is staged_v and wy[12] is dk and wy[13] is dv
    assert dq.dtype == dk.dtype == dv.dtype == F16


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
