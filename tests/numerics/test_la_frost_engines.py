"""L1 (GPU): GDN, KDA and GDN-2 forward through the graph API on the FROST engines vs the
float64 token recurrence.

Each case builds the single-node gdn/kda/gdn2 graph with cudnn.pygraph from the torch
inputs, plans it (the chunked FROST engine must be ranked first, or second behind the
recurrent one for decode-shaped graphs, T <= 16 N; it is the plan executed), executes with a
workspace of the plan's size, and compares O and final_state with
tests/reference naive_recurrent_{gdn,kda,gdn2} (float64, on the GPU). Bound: relative L2
error <= 1e-2 per tensor for bf16 and fp16 inputs. The matrix: 1, 8 and 64
sequences; lengths 1, 63, 64, 65, 1000 and 4096 mixed; 16 and 32 heads with q, v and k
grouping; K and V of 64 and 128; with and without initial_state; with and without
use_qk_l2norm; fp32 and bf16 states; fp16 io on three of the shapes. The reference's token loop is
the cost (about 0.1 ms per token): keep the total under ~150k tokens.

Skips without a GPU, and with the reason when the FROST runtime probe declines (no CuTe
DSL >= 4.7, or no kernel build for this GPU's SM).

  python -m pytest -s tests/numerics/test_la_frost_engines.py
"""
import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import cudnn  # noqa: E402
from cudnn.ops.data_types import to_data_type  # noqa: E402
from tests.reference.gdn import naive_recurrent_gdn  # noqa: E402
from tests.reference.gdn2 import naive_recurrent_gdn2  # noqa: E402
from tests.reference.kda import naive_recurrent_kda  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.frost]  # skips: tests/conftest.py
REL_BOUND = 1e-2
REFERENCES = {"gdn": naive_recurrent_gdn, "kda": naive_recurrent_kda,
              "gdn2": naive_recurrent_gdn2}

# (id, sequence lengths, H, HK, HV, K, V)
SHAPES = [
    ("one_seq_T1", [1], 16, 16, 16, 128, 128),
    ("one_seq_T4096_K64", [4096], 16, 16, 16, 64, 64),
    ("mixed_1_63_64_65_1000_4096", [1, 63, 64, 65, 1000, 4096], 16, 16, 16, 128, 128),
    ("8seq_vgroups_h32", [65, 64, 63, 1, 300, 129, 7, 1000], 16, 16, 32, 64, 128),
    ("64_short_seqs_K64", [(i * 37) % 97 + 1 for i in range(64)], 16, 16, 16, 64, 64),
    ("qgroups_K128_V64", [200, 1, 77], 32, 32, 16, 128, 64),
    ("k_with_v_groups", [63, 65, 130], 16, 32, 32, 128, 128),
]
FAMILY_L2 = [("gdn", False), ("gdn", True), ("kda", False), ("kda", True), ("gdn2", False),
             ("gdn2", True)]


def _inputs(family, lens, H, HK, HV, K, V, seed, io=torch.bfloat16):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    T, HO = sum(lens), max(H, HV)
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
    channel = family != "gdn"
    x = dict(
        q=rnd(T, H, K).to(io), k=F.normalize(rnd(T, HK, K), dim=-1).to(io),
        v=rnd(T, HV, V).to(io),
        g=F.logsigmoid(rnd(*((T, HO, K) if channel else (T, HO)))) * 0.5,
        beta=torch.sigmoid(rnd(T, HO)),
        cu_seqlens=torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32,
                                device="cuda"))
    if family == "gdn2":   # erase gate per key channel and write gate, both in the io dtype
        x["beta"] = torch.sigmoid(rnd(T, HO, K)).to(io)
        x["w"] = torch.sigmoid(rnd(T, HO, V)).to(io)
    return x


def _rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _run_forward(op, inputs, outputs, attrs):
    """Build, plan and execute a single-node graph; returns its plan names, ranked."""
    graph = cudnn.pygraph(io_data_type=to_data_type(inputs["q"].dtype),
                          intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT)
    ir = {n: graph.tensor_like(t, name=n) for n, t in inputs.items()}
    pack = {t: inputs[n] for n, t in ir.items()}
    for out in getattr(graph, op)(**ir, **attrs):
        port = None if out is None else out.name.split("::")[-1]
        if port in outputs:
            out.set_output(True).set_data_type(to_data_type(outputs[port].dtype))
            pack[out] = outputs[port]
    graph.validate()
    graph.create_execution_plans()
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    # the chunked FROST plan, pinned: decode-shaped graphs (T <= 16 N) rank the recurrent
    # engine first (tests/numerics/test_la_decode_gpu.py checks that one)
    index = names.index(f"{op}_frost") if f"{op}_frost" in names else 0
    graph.build_plan_at_index(index)
    size = graph.get_workspace_size_plan_at_index(index)
    graph.execute_plan_at_index(pack, torch.empty(max(size, 1), dtype=torch.uint8, device="cuda"),
                                index=index)
    torch.cuda.synchronize()
    return names


def _correlate(x, family):
    """The hard case for the WY factor: keys at cosine ~0.8 (a common direction plus noise),
    beta >= 0.5 and slow decay (engines_frost/tests/frost_mma_precision_test.py measures
    8e-3 there in emulation, against 4e-3 on random keys)."""
    k = x["k"].float()
    common = F.normalize(torch.randn(1, k.shape[1], k.shape[2], device=k.device), dim=-1)
    x["k"] = F.normalize(0.9 * common + 0.436 * F.normalize(k, dim=-1), dim=-1).bfloat16()
    x["g"] = x["g"] * 0.02
    if family != "gdn2":
        x["beta"] = 0.5 + 0.5 * x["beta"]
    return x


def _strong_decay(x, family):
    """Gates of e^-30 per token: every 7th token (GDN: every channel; KDA, GDN-2: every
    other key channel, and every 4th channel of every 5th token besides), so some 16-row
    blocks span more than the kernels' SPAN_LIMIT (80 nats) on some channels and take the
    exact diagonal-block fallback, beside blocks and channels that do not."""
    g = x["g"].clone()
    if family == "gdn":
        g[::7] = -30.0
    else:
        g[::7, :, ::2] = -30.0
        g[::5, :, 1::4] = -30.0
    x["g"] = g
    return x


def _check_forward(family, shape, l2, h0_dtype, seed, correlated=False, io=torch.bfloat16, strong_decay=False):
    _, lens, H, HK, HV, K, V = shape
    x = _inputs(family, lens, H, HK, HV, K, V, seed, io)
    if correlated:
        x = _correlate(x, family)
    if strong_decay:
        x = _strong_decay(x, family)
    T, N, HO = sum(lens), len(lens), max(H, HV)
    if h0_dtype is not None:
        x["initial_state"] = (torch.randn(N, HO, V, K, device="cuda") * 0.1).to(h0_dtype)
    state_dtype = h0_dtype or torch.float32
    nan = float("nan")
    o = torch.full((T, HO, V), nan, dtype=io, device="cuda")
    ht = torch.full((N, HO, V, K), nan, dtype=state_dtype, device="cuda")
    plans = _run_forward(family, x, {"O": o, "final_state": ht},
                         dict(output_final_state=True, use_qk_l2norm=l2))
    first = f"{family}_frost_decode" if sum(lens) <= 16 * len(lens) else f"{family}_frost"
    assert plans[0] == first and f"{family}_frost" in plans, f"{first} must rank first: {plans}"
    d64 = {n: t.double() if t.is_floating_point() else t.long() for n, t in x.items()}
    args = [d64[p] for p in ("q", "k", "v", "g", "beta")] + ([d64["w"]] if "w" in d64 else [])
    ro, rht = REFERENCES[family](*args, d64["cu_seqlens"], scale=1 / math.sqrt(K),
                                 initial_state=d64.get("initial_state"),
                                 output_final_state=True, use_qk_l2norm=l2)
    errs = {"O": _rel(o, ro), "final_state": _rel(ht, rht)}
    print(f"\n{family} {shape[0]} {str(io)[6:]} l2={l2} h0={h0_dtype}: "
          + " ".join(f"{k}={v:.1e}" for k, v in errs.items()))
    bad = {k: v for k, v in errs.items() if not v <= REL_BOUND}
    assert not bad, f"relative error above {REL_BOUND}: {bad}"


@pytest.mark.parametrize("with_h0", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("family, l2", FAMILY_L2,
                         ids=[f"{f}-{'l2norm' if l2 else 'raw_qk'}" for f, l2 in FAMILY_L2])
@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_forward(shape, family, l2, with_h0):
    seed = len(shape[1]) * 7 + shape[5] + 3 * with_h0
    _check_forward(family, shape, l2, torch.float32 if with_h0 else None, seed)


FP16_SHAPES = [SHAPES[2], SHAPES[3], SHAPES[5]]  # mixed lengths; grouped v heads, K = 64; K != V


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("shape", FP16_SHAPES, ids=[s[0] for s in FP16_SHAPES])
def test_forward_fp16_io(shape, family):
    """fp16 q, k, v, O (and GDN-2's gates): the product's kernel for them on sm_90a is the wgmma layer,
    as for bf16 (compile_kernel.product_algorithm), with the decays folded."""
    seed = len(shape[1]) * 11 + shape[5]
    _check_forward(family, shape, True, torch.float32, seed, io=torch.float16)


def test_a_bound_launch_repeats_a_layout_without_rechecking():
    """frost_fwd(bind=True) returns the checked launch; repeating it with other data in
    the same layout (no checks) is still exact, and frost_fwd itself checks every call."""
    from cudnn.linear_attention.frost.kernels import fwd

    _, lens, H, HK, HV, K, V = SHAPES[1]
    T, N = sum(lens), len(lens)
    bound, errs = None, []
    for seed in (51, 52):
        x = _inputs("gdn", lens, H, HK, HV, K, V, seed)
        o = torch.full((T, H, V), float("nan"), dtype=torch.bfloat16, device="cuda")
        ht = torch.full((N, H, V, K), float("nan"), dtype=torch.float32, device="cuda")
        tensors = dict(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], w=None,
                       cu_seqlens=x["cu_seqlens"], out=o, initial_state=None, final_state=ht)
        if bound is None:
            bound = fwd.frost_fwd(**tensors, scale=1 / math.sqrt(K), use_l2norm=False,
                                  gate_per_channel=False, beta_per_channel=False, stream=None,
                                  bind=True)
        else:
            assert bound.matches(tensors)
            bound.launch(tensors, torch.cuda.current_stream())
        torch.cuda.synchronize()
        d64 = {n: t.double() if t.is_floating_point() else t.long() for n, t in x.items()}
        ro, rht = naive_recurrent_gdn(*(d64[p] for p in ("q", "k", "v", "g", "beta")), d64["cu_seqlens"],
                                      scale=1 / math.sqrt(K), output_final_state=True)
        errs.append((_rel(o, ro), _rel(ht, rht)))
    assert all(e <= REL_BOUND for pair in errs for e in pair), errs
    odd = torch.empty(T * H * K + 8, dtype=torch.bfloat16, device="cuda")[1:1 + T * H * K].view(T, H, K)
    with pytest.raises(ValueError, match="frost_fwd: q must be"):
        fwd.frost_fwd(q=odd, k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], w=None, cu_seqlens=x["cu_seqlens"],
                      out=o, initial_state=None, final_state=ht, scale=1 / math.sqrt(K), use_l2norm=False,
                      gate_per_channel=False, beta_per_channel=False, stream=None)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_forward_with_correlated_keys(family):
    """One long sequence (4096 tokens, K = V = 64: the shape test_forward compiles for
    anyway) with correlated keys, the ill-conditioned case for the WY factor."""
    _check_forward(family, SHAPES[1], False, None, seed=41, correlated=True)


@pytest.mark.parametrize("with_h0", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_forward_with_e30_gates(family, with_h0):
    """Mixed lengths at K = V = 128 (a shape test_forward compiles for) with e^-30 gates
    that send some diagonal blocks to the exact fallback (_strong_decay)."""
    _check_forward(family, SHAPES[2], False, torch.float32 if with_h0 else None, seed=43, strong_decay=True)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_forward_with_bf16_states(family):
    _check_forward(family, SHAPES[3], True, torch.bfloat16, seed=11)


def _built_gdn():
    x = _inputs("gdn", [70, 5], 16, 16, 16, 64, 64, seed=6)
    graph = cudnn.pygraph()
    ir = {n: graph.tensor_like(t, name=n) for n, t in x.items()}
    (o,) = [t for t in graph.gdn(**ir) if t is not None]
    o.set_output(True).set_data_type(cudnn.data_type.BFLOAT16)
    graph.validate()
    graph.create_execution_plans()
    graph.build_plans()
    assert graph.get_plan_name_at_index(0) == "gdn_frost"
    out = torch.empty(75, 16, 64, dtype=torch.bfloat16, device="cuda")
    return graph, {t: x[n] for n, t in ir.items()} | {o: out}, ir, x


def test_execute_refuses_cpu_and_non_unit_stride_buffers():
    graph, pack, ir, x = _built_gdn()
    with pytest.raises(ValueError, match="gdn_frost: input 'q' is on cpu"):
        graph.execute({**pack, ir["q"]: x["q"].cpu()})
    strided = torch.zeros(75, 16, 128, dtype=torch.bfloat16, device="cuda")[:, :, ::2]
    with pytest.raises(ValueError, match="gdn_frost: input 'v' has innermost stride 2"):
        graph.execute({**pack, ir["v"]: strided})


def test_direct_launch_agrees_with_execute():
    """The plan's DirectLaunch (what the torch ops' cached graph keeps) writes what a
    checked execute writes; execute still checks every call after it was made."""
    graph, pack, ir, x = _built_gdn()
    graph.execute(pack)
    torch.cuda.synchronize()
    (o_port,) = [t for t in pack if t.name.endswith("::O")]
    first = pack[o_port].clone()
    plan = graph.lifecycle.planning.compiled_plans[graph.lifecycle.planning.selected_index]
    again = torch.full_like(first, float("nan"))
    by_uid = {t.uid: b for t, b in {**pack, o_port: again}.items()}
    direct = plan.direct_launch(graph, by_uid)
    assert direct is not None, "a FROST plan offers a direct launch for plain CUDA tensors"
    buffers = [by_uid[uid] for uid in direct.uids]
    direct.launch([b.data_ptr() for b in buffers] if direct.takes_addresses else buffers, None,
                  torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert torch.equal(again, first)
    with pytest.raises(ValueError, match="gdn_frost: input 'q' is on cpu"):
        graph.execute({**pack, ir["q"]: x["q"].cpu()})


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_execute_refuses_a_buffer_on_another_device():
    graph, pack, ir, x = _built_gdn()
    with pytest.raises(ValueError, match="but this plan was built for cuda:0"):
        graph.execute({**pack, ir["q"]: x["q"].to("cuda:1")})


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
