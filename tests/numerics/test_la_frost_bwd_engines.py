"""L1 (GPU): gdn_bwd / kda_bwd / gdn2_bwd through the graph API on the FROST backward.

Each case builds the single-node backward graph with cudnn.pygraph, plans it (the FROST
engine must rank first: index 0), executes with a workspace of exactly
get_workspace_size() bytes and NaN-filled outputs, and compares every gradient with the
float64 reference backward (tests/reference: the chunked algebra for GDN/KDA, autograd
through the token recurrence for GDN-2). Bound: relative L2 error <= 1e-2 per tensor for
bf16 inputs (1.5e-2 for correlated keys, where even a float64 WY inverse leaves ~6e-3).
Also: two runs are bitwise identical, and under batch_invariant a sequence's gradients do
not depend on the other sequences of the batch (batch invariance). The training path with state
checkpoints: the forward graph with checkpoint_every_n_tokens=64 (FROST first; exactly
the packed rows written, the rest left NaN; la_frost_bwd_smoke.py checks its O against
the plain forward's), then the backward graph reading them, same bounds and determinism
on the same awkward shapes; and with the forward's values as well (output_values: the
chunked FROST forward first, the recurrent one declining them), the backward reading
both, whose gradients must be bitwise the recompute path's: that path's states stage is
the forward kernel the user's forward ran, without its output (the four-role kernel for
long GDN sequences at K = V = 128, the wgmma layer's chain otherwise), and writes U as it does.

  python -m pytest tests/numerics/test_la_frost_bwd_engines.py -s
"""
import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import cudnn  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import PIPELINE_MIN_TOKENS  # noqa: E402
from tests.reference.families import reference_backward  # noqa: E402
from tests.reference.inputs import InputConfig, Inputs  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

pytestmark = pytest.mark.gpu  # skipped without a GPU: tests/conftest.py
DT = cudnn.data_type
REL_BOUND = 1e-2
CORRELATED_BOUND = 1.5e-2
FAMILIES = ("gdn", "kda", "gdn2")

# (id, sequence lengths, H, HV, K, V)
SHAPES = [
    ("one_seq_T1", [1], 16, 16, 128, 128),
    ("mixed_0_1_63_64_65_1000_4096", [1, 63, 0, 64, 65, 1000, 4096], 16, 16, 128, 128),
    ("8seq_vgroups_h32", [65, 64, 63, 1, 300, 129, 7, 1000], 16, 32, 64, 128),
    ("64_short_seqs_K64", [(i * 37) % 97 + 1 for i in range(64)], 16, 16, 64, 64),
    ("qgroups_K128_V64", [200, 1, 77], 32, 16, 128, 64),
]
LONG_SHAPES = [
    ("one_seq_32k", [32768], 4, 4, 128, 128),
    ("256_seqs_le16", [(i * 7) % 16 + 1 for i in range(256)], 8, 8, 128, 128),
]


def _inputs(family, lens, H, HV, K, V, seed, with_h0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    T, HO, N = sum(lens), max(H, HV), len(lens)
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=g)  # noqa: E731
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    vector = family != "gdn"
    x = dict(q=rnd(T, H, K).bfloat16(), k=F.normalize(rnd(T, H, K), dim=-1).bfloat16(), v=rnd(T, HV, V).bfloat16(),
             g=F.logsigmoid(rnd(*((T, HO, K) if vector else (T, HO)))) * 0.5, cu_seqlens=cu)
    if family == "gdn2":
        x["beta"] = torch.sigmoid(rnd(T, HO, K)).bfloat16()
        x["w"] = torch.sigmoid(rnd(T, HO, V)).bfloat16()
    else:
        x["beta"] = torch.sigmoid(rnd(T, HO))
    if with_h0:
        x["initial_state"] = rnd(N, HO, V, K) * 0.1
    return x


def _rel(x, ref, floor=0.0):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(max(floor, 1e-30))).item()


def _run_forward(family, inputs, l2, checkpoints, values=False, invariant=False):
    """Plan and run the family's forward graph (no final state; with `checkpoints`, the
    state_checkpoints output at cadence 64, into a NaN-filled buffer; with `values` the
    values output too, likewise; batch_invariant with `invariant`); returns (plan names,
    O, state_checkpoints or None) and, with `values`, the values as a fourth item."""
    graph = cudnn.pygraph(io_data_type=DT.BFLOAT16, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    ir = {n: graph.tensor_like(t, name=n) for n, t in inputs.items()}
    outs = getattr(graph, family)(**ir, use_qk_l2norm=l2, checkpoint_every_n_tokens=64 if checkpoints else 0,
                                  output_values=values, **({"batch_invariant": True} if invariant else {}))
    T, N = inputs["q"].shape[0], inputs["cu_seqlens"].numel() - 1
    HO, V, K = max(inputs["q"].shape[1], inputs["v"].shape[1]), inputs["v"].shape[2], inputs["q"].shape[2]
    pack = {t: inputs[n] for n, t in ir.items()}
    o = torch.full((T, HO, V), float("nan"), dtype=torch.bfloat16, device="cuda")
    ckpt = u = None
    for out in outs:
        if out is None:
            continue
        name = out.name.split("::")[-1]
        if name == "O":
            pack[out.set_output(True).set_data_type(DT.BFLOAT16)] = o
        elif name == "state_checkpoints":
            ckpt = torch.full((T // 64 + N, HO, V, K), float("nan"), dtype=torch.bfloat16, device="cuda")
            pack[out.set_output(True).set_data_type(DT.BFLOAT16)] = ckpt
        elif name == "values":
            u = torch.full((T, HO, V), float("nan"), dtype=torch.bfloat16, device="cuda")
            pack[out.set_output(True).set_data_type(DT.BFLOAT16)] = u
    graph.validate()
    graph.create_execution_plans()
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    graph.build_plans()
    ws = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    graph.execute(pack, ws)
    torch.cuda.synchronize()
    return (names, o, ckpt, u) if values else (names, o, ckpt)


def _run_backward(family, inputs, d_out, dht, l2, state_checkpoints=None, values=None, invariant=False):
    """Plan and run the family's _bwd graph on its first plan (reading the forward's
    state_checkpoints, and values, when given; batch_invariant with `invariant`); returns
    (plan names, grads)."""
    graph = cudnn.pygraph(io_data_type=DT.BFLOAT16, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    tensors = dict(inputs, dO=d_out, d_final_state=dht)
    extra = {}
    if state_checkpoints is not None:
        tensors["state_checkpoints"] = state_checkpoints
        extra["checkpoint_every_n_tokens"] = 64
    if values is not None:
        tensors["values"] = values
    if invariant:
        extra["batch_invariant"] = True
    ir = {n: graph.tensor_like(t, name=n) for n, t in tensors.items()}
    outs = getattr(graph, f"{family}_bwd")(**ir, use_qk_l2norm=l2, **extra)
    nan = float("nan")
    like = {"dQ": "q", "dK": "k", "dV": "v", "dG": "g", "dBeta": "beta", "dW": "w", "d_initial_state": "initial_state"}
    pack = {t: tensors[n] for n, t in ir.items()}
    grads = {}
    for o in outs:
        if o is None:
            continue
        name = o.name.split("::")[-1]
        buf = torch.full_like(inputs[like[name]], nan)
        o.set_output(True).set_data_type(DT.BFLOAT16 if buf.dtype == torch.bfloat16 else DT.FLOAT)
        pack[o] = grads[name] = buf
    graph.validate()
    graph.create_execution_plans()
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    graph.build_plans()
    ws = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    graph.execute(pack, ws)
    torch.cuda.synchronize()
    return names, grads


def _reference(family, x, d_out, dht, l2):
    fam = Family(family)
    cfg = InputConfig(family=fam, seq_lens=(1,), H=1, K=1, V=1, use_qk_l2norm=l2)  # only flags are read
    d64 = {n: (t.double() if t.is_floating_point() else t) for n, t in x.items()}
    inp = Inputs(config=cfg, q=d64["q"], k=d64["k"], v=d64["v"], g=d64["g"], beta=d64["beta"],
                 cu_seqlens=d64["cu_seqlens"], w=d64.get("w"), initial_state=d64.get("initial_state"))
    chunked = family != "gdn2"
    return reference_backward(inp, d_out.double(), dht.double(), chunked=chunked)


def _gate_grad_floor(x, ref) -> float:
    """dG = revcumsum(q.dq - k.dk + ...): where those terms cancel exactly (a length-1
    sequence with a zero state) the error is taken against their size."""
    return ((x["q"].double() * ref.dq).norm() + (x["k"].double() * ref.dk).norm()).item()


def _forward_checkpoints(family, x, lens, l2):
    """The forward with checkpoints, checked against the plain forward and the packed
    layout; returns the checkpoints."""
    names, o, ckpt = _run_forward(family, x, l2, checkpoints=True)
    # the chunked forward, or for short sequences (T <= 16 N) the recurrent one: both write
    # the spec's packed rows
    assert names and names[0] in (f"{family}_frost", f"{family}_frost_decode"), \
        f"a FROST forward must rank first; the list is {names}"
    assert not o.isnan().any(), "the forward with checkpoints left output rows unwritten"
    used = sum(-(-n // 64) for n in lens)
    rows = ckpt.isnan().flatten(1).any(1)
    assert not rows[:used].any(), "a packed checkpoint row was not written (or holds NaN)"
    assert ckpt[used:].isnan().all(), "a row past the packed rows was written"
    return ckpt


def _check(family, shape, l2, with_h0, correlated=False, checkpoints=False):
    _, lens, H, HV, K, V = shape
    x = _inputs(family, lens, H, HV, K, V, seed=len(lens) * 7 + K, with_h0=with_h0)
    if correlated:
        common = F.normalize(torch.randn(1, H, K, device="cuda"), dim=-1)
        x["k"] = F.normalize(0.9 * common + 0.436 * x["k"].float(), dim=-1).bfloat16()
        x["g"] = x["g"] * 0.04
        x["beta"] = (0.5 + 0.5 * x["beta"].float()).to(x["beta"].dtype)
    T, N, HO = sum(lens), len(lens), max(H, HV)
    d_out = torch.randn(T, HO, V, device="cuda").bfloat16()
    dht = torch.randn(N, HO, V, K, device="cuda") * 0.1
    ckpt = _forward_checkpoints(family, x, lens, l2) if checkpoints else None
    names, grads = _run_backward(family, x, d_out, dht, l2, ckpt)
    assert names and names[0] == f"{family}_frost", f"the FROST backward must rank first; the list is {names}"
    _, again = _run_backward(family, x, d_out, dht, l2, ckpt)
    for name in grads:
        assert torch.equal(grads[name], again[name]), f"{name} differs between two identical runs"
    if checkpoints:  # how far the two paths' roundings drift apart (reported, bounded below)
        _, recompute = _run_backward(family, x, d_out, dht, l2)
        drift = max(_rel(grads[n], recompute[n].double(), 1e-30) for n in grads)
        print(f"\n{family} {shape[0]} checkpoints vs recompute: {drift:.1e}", end="")
    _assert_near_reference(family, x, d_out, dht, l2, grads, f"{shape[0]} l2={l2} h0={with_h0} ckpt={checkpoints}",
                           correlated)


def _assert_near_reference(family, x, d_out, dht, l2, grads, label, correlated=False):
    """Every gradient within the relative bound of the float64 reference backward."""
    ref = _reference(family, x, d_out, dht, l2)
    errs = {}
    for name, field in (("dQ", "dq"), ("dK", "dk"), ("dV", "dv"), ("dG", "dg"), ("dBeta", "dbeta"), ("dW", "dw"),
                        ("d_initial_state", "d_initial_state")):
        if name in grads:
            floor = _gate_grad_floor(x, ref) if name == "dG" else 0.0
            errs[name] = _rel(grads[name], getattr(ref, field), floor)
    print(f"\n{family} {label}: " + " ".join(f"{k}={v:.1e}" for k, v in errs.items()))
    bound = CORRELATED_BOUND if correlated else REL_BOUND
    bad = {k: v for k, v in errs.items() if not v <= bound}
    assert not bad, f"relative error above {bound}: {bad}"


# (shape, l2norm, initial state): the mixed-length shape with every combination, the
# others with none and both (each flag is covered on every head layout)
COMBOS = [(SHAPES[1], l2, h0) for l2 in (False, True) for h0 in (False, True)] + [
    (shape, flag, flag) for shape in SHAPES[:1] + SHAPES[2:] for flag in (False, True)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape, l2, with_h0", COMBOS,
                         ids=[f"{s[0]}-l2{int(l2)}-h0{int(h0)}" for s, l2, h0 in COMBOS])
def test_backward(shape, l2, with_h0, family):
    _check(family, shape, l2, with_h0)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape", LONG_SHAPES, ids=[s[0] for s in LONG_SHAPES])
def test_backward_long_and_many(shape, family):
    _check(family, shape, True, True)


@pytest.mark.parametrize("family", FAMILIES)
def test_backward_with_correlated_keys(family):
    """Keys at cosine ~0.8 (a common direction plus noise), beta >= 0.5, slow decay."""
    _check(family, SHAPES[1], False, False, correlated=True)


# the training path: forward-written checkpoints read by the backward, on every shape
# (lengths 0/1/63/64/65, many short sequences, grouped heads, K/V 64), initial state and
# l2norm both on and off across them (one combination per shape but the mixed one: the
# kernels each combination needs are prebuilt, ~4 per family and combination)
CKPT_COMBOS = [(SHAPES[1], False, False), (SHAPES[1], True, True), (SHAPES[0], True, True),
               (SHAPES[2], True, True), (SHAPES[3], False, False), (SHAPES[4], True, True),
               (LONG_SHAPES[1], False, True)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape, l2, with_h0", CKPT_COMBOS,
                         ids=[f"{s[0]}-l2{int(l2)}-h0{int(h0)}" for s, l2, h0 in CKPT_COMBOS])
def test_backward_from_forward_checkpoints(shape, l2, with_h0, family):
    _check(family, shape, l2, with_h0, checkpoints=True)


# the v1.3 training path (forward-written values next to the checkpoints): the mixed
# lengths with h0 and l2norm, grouped v heads with K 64, and many short sequences (where
# the recurrent forward, ranked first otherwise, declines the values output)
VALUES_COMBOS = [(SHAPES[1], True, True), (SHAPES[2], False, False), (LONG_SHAPES[1], False, True)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape, l2, with_h0", VALUES_COMBOS,
                         ids=[f"{s[0]}-l2{int(l2)}-h0{int(h0)}" for s, l2, h0 in VALUES_COMBOS])
def test_backward_from_forward_values(shape, l2, with_h0, family):
    """The forward graph writes checkpoints and values (the chunked FROST forward: exactly
    the covered rows of values, O bitwise the checkpoint-only forward's); the backward graph
    reading both (chain + grads only) gives the same gradients twice, bitwise the
    recompute path's (its states stage runs the forward's kernel without the output)."""
    _, lens, H, HV, K, V = shape
    x = _inputs(family, lens, H, HV, K, V, seed=len(lens) * 11 + K, with_h0=with_h0)
    T, N, HO = sum(lens), len(lens), max(H, HV)
    names, o, ckpt, u = _run_forward(family, x, l2, checkpoints=True, values=True)
    assert names and names[0] == f"{family}_frost", f"the chunked FROST forward must rank first; the list is {names}"
    names_ckpt, o_ckpt, _ = _run_forward(family, x, l2, checkpoints=True)
    if names_ckpt[0] == f"{family}_frost":  # the same kernel without the values stores
        assert torch.equal(o, o_ckpt), "O differs when the forward writes values too"
    assert not u.isnan().any(), "a covered row of values was not written"
    d_out = torch.randn(T, HO, V, device="cuda").bfloat16()
    dht = torch.randn(N, HO, V, K, device="cuda") * 0.1
    _, grads = _run_backward(family, x, d_out, dht, l2, ckpt, u)
    _, again = _run_backward(family, x, d_out, dht, l2, ckpt, u)
    _, recompute = _run_backward(family, x, d_out, dht, l2)
    for name in grads:
        assert torch.equal(grads[name], again[name]), f"{name} differs between two identical runs"
    for name in grads:
        assert torch.equal(grads[name], recompute[name]), f"{name} differs from the recompute path's"
    print(f"\n{family} {shape[0]} values path: gradients bitwise the recompute path's", end="")


@pytest.mark.parametrize("checkpoints", [False, True], ids=["recompute", "checkpoints"])
@pytest.mark.parametrize("family", FAMILIES)
def test_batch_invariance(family, checkpoints):
    """Under batch_invariant, a sequence's gradients are bitwise the same alone and inside a
    batch (with forward checkpoints too: its rows sit at another packed offset, the values
    are the same). The batch averages >= PIPELINE_MIN_TOKENS tokens a sequence and the
    sequence alone fewer, so without the flag the forward and the recompute path's states
    stage would take the long-sequence kernel for the batch only (GDN)."""
    lens = [300, 129, 1700]
    assert sum(lens) >= PIPELINE_MIN_TOKENS * len(lens) > lens[1]
    x = _inputs(family, lens, 8, 8, 128, 128, seed=5, with_h0=True)
    T, HO, V, K = sum(lens), 8, 128, 128
    d_out = torch.randn(T, HO, V, device="cuda").bfloat16()
    dht = torch.randn(len(lens), HO, V, K, device="cuda") * 0.1
    ckpt = _run_forward(family, x, True, checkpoints=True, invariant=True)[2] if checkpoints else None
    _, batch = _run_backward(family, x, d_out, dht, True, ckpt, invariant=True)
    a, b = lens[0], lens[0] + lens[1]
    alone = {n: t[a:b] for n, t in x.items() if n not in ("cu_seqlens", "initial_state")}
    alone["cu_seqlens"] = torch.tensor([0, lens[1]], dtype=torch.int32, device="cuda")
    alone["initial_state"] = x["initial_state"][1:2]
    ckpt_alone = _run_forward(family, alone, True, checkpoints=True, invariant=True)[2] if checkpoints else None
    if checkpoints:  # sequence 1's rows: after sequence 0's ceil(300 / 64) = 5
        assert torch.equal(ckpt[5:8], ckpt_alone[:3]), "checkpoints of sequence 1 depend on the batch"
    _, single = _run_backward(family, alone, d_out[a:b], dht[1:2], True, ckpt_alone, invariant=True)
    for name, t in single.items():
        part = batch[name][1:2] if name == "d_initial_state" else batch[name][a:b]
        assert torch.equal(part, t), f"{name} of sequence 1 depends on the batch"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
