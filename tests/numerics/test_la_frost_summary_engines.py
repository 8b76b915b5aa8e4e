"""L1 (GPU): the span summaries on the FROST summary engines, against float64.

Through the torch summary ops (cudnn.linear_attention.ops.*_summary / *_summary_bwd) on
CUDA bf16 inputs, so the planner must pick `<family>_summary_frost` (checked by name in
the op's graph cache). Each result is compared with the float64 references of
tests/reference/summary.py (explicit per-token transition matrices) on the same bf16
inputs: final_state, transition (M^T), d_initial_state with and without d_final_state,
and the backward transition (M). Bound: relative L2 error <= 1e-2 per tensor (the FROST
forward's own bound). Also: the affine identity X_L(X_0) = X_0 M^T + X_L(0) from the
engines' own outputs, and equal results for a sequence alone and inside a batch.

  python -m pytest -q -s tests/numerics/test_la_frost_summary_engines.py
"""
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from cudnn.linear_attention import ops  # noqa: E402
from tests.reference.preprocess import Family, Options  # noqa: E402
from tests.reference.summary import summary_bwd_reference, summary_reference  # noqa: E402

pytestmark = pytest.mark.gpu  # skipped without a GPU: tests/conftest.py
REL_BOUND = 1e-2
FAMILIES = ("gdn", "kda", "gdn2")
SUMMARY = {"gdn": ops.gated_delta_net_summary, "kda": ops.kimi_delta_attention_summary,
           "gdn2": ops.gated_delta_net_v2_summary}
SUMMARY_BWD = {"gdn": ops.gated_delta_net_summary_bwd,
               "kda": ops.kimi_delta_attention_summary_bwd,
               "gdn2": ops.gated_delta_net_v2_summary_bwd}
OP_NAME = {"gdn": "gated_delta_net", "kda": "kimi_delta_attention", "gdn2": "gated_delta_net_v2"}

# (id, sequence lengths, H, HK, HV, K, V)
SHAPES = [
    ("mixed_lengths_K128", [1, 63, 0, 64, 65, 300], 4, 4, 4, 128, 128),
    ("V_ne_K_value_groups", [200, 77, 5], 2, 2, 4, 64, 128),
    ("K128_V64_qk_groups_k_at_v", [129, 1, 40], 4, 2, 2, 128, 64),
]


def _inputs(family, lens, H, HK, HV, K, V, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    T, HO, N = sum(lens), max(H, HV), len(lens)
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=g)  # noqa: E731
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32,
                      device="cuda")
    vector = family != "gdn"
    x = dict(q=F.normalize(rnd(T, H, K), dim=-1).bfloat16(),
             k=F.normalize(rnd(T, HK, K), dim=-1).bfloat16(), v=rnd(T, HV, V).bfloat16(),
             g=F.logsigmoid(rnd(*((T, HO, K) if vector else (T, HO)))) * 0.3, cu=cu,
             dO=rnd(T, HO, V).bfloat16(), h0=rnd(N, HO, V, K) * 0.1,
             dht=rnd(N, HO, V, K) * 0.1)
    if family == "gdn2":
        x["beta"] = torch.sigmoid(rnd(T, HO, K)).bfloat16()
        x["w"] = torch.sigmoid(rnd(T, HO, V)).bfloat16()
    else:
        x["beta"], x["w"] = torch.sigmoid(rnd(T, HO)), None
    return x


def _rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _gates(x):
    return (x["g"], x["beta"]) if x["w"] is None else (x["g"], x["beta"], x["w"])


def _selected_plan(op):
    cache = next(c for c in ops.graph_caches() if c.name == f"cudnn::{op}")
    return cache.values()[-1].plan


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s[0])
@pytest.mark.parametrize("l2", [False, True], ids=["plain", "l2norm"])
def test_summary_forward(family, shape, l2):
    _, lens, H, HK, HV, K, V = shape
    x = _inputs(family, lens, H, HK, HV, K, V, seed=len(lens) + K)
    final, transition = SUMMARY[family](x["k"], x["v"], *_gates(x), x["cu"],
                                        initial_state=x["h0"], use_qk_l2norm_in_kernel=l2)
    torch.cuda.synchronize()
    assert _selected_plan(f"{OP_NAME[family]}_summary") == f"{family}_summary_frost"
    d = lambda t: None if t is None else t.double()  # noqa: E731
    ref_final, ref_transition = summary_reference(
        Family(family), d(x["k"]), d(x["v"]), d(x["g"]), d(x["beta"]), x["cu"], w=d(x["w"]),
        initial_state=d(x["h0"]), opts=Options(use_qk_l2norm=l2))
    errors = {"final_state": _rel(final, ref_final),
              "transition": _rel(transition, ref_transition)}
    # the engines' own outputs compose affinely
    from_zero, _ = SUMMARY[family](x["k"], x["v"], *_gates(x), x["cu"],
                                   use_qk_l2norm_in_kernel=l2)
    errors["affine"] = _rel(final, x["h0"].double() @ transition.double() + from_zero.double())
    print(f"\n{family} {shape[0]} l2={l2}: " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    assert all(e <= REL_BOUND for e in errors.values()), errors


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s[0])
@pytest.mark.parametrize("with_dht", [False, True], ids=["no_dht", "dht"])
def test_summary_backward(family, shape, with_dht):
    _, lens, H, HK, HV, K, V = shape
    x = _inputs(family, lens, H, HK, HV, K, V, seed=2 * len(lens) + V)
    dht = x["dht"] if with_dht else None
    d_init, transition = SUMMARY_BWD[family](x["q"], x["k"], x["g"], x["beta"], x["dO"], x["cu"],
                                             d_final_state=dht, output_transition=True,
                                             use_qk_l2norm_in_kernel=True)
    torch.cuda.synchronize()
    assert _selected_plan(f"{OP_NAME[family]}_summary_bwd") == f"{family}_summary_frost"
    d = lambda t: None if t is None else t.double()  # noqa: E731
    ref, ref_transition = summary_bwd_reference(
        Family(family), d(x["q"]), d(x["k"]), d(x["g"]), d(x["beta"]), x["cu"], d(x["dO"]),
        d_final_state=d(dht), opts=Options(use_qk_l2norm=True))
    errors = {"d_initial_state": _rel(d_init, ref), "transition": _rel(transition, ref_transition)}
    print(f"\n{family} {shape[0]} dht={with_dht}: "
          + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    assert all(e <= REL_BOUND for e in errors.values()), errors


@pytest.mark.parametrize("family", FAMILIES)
def test_a_sequence_alone_equals_it_in_a_batch(family):
    _, lens, H, HK, HV, K, V = SHAPES[0]
    x = _inputs(family, lens, H, HK, HV, K, V, seed=9)
    batch, batch_t = SUMMARY[family](x["k"], x["v"], *_gates(x), x["cu"], initial_state=x["h0"])
    n, (lo, hi) = 5, (x["cu"][5].item(), x["cu"][6].item())
    one = {k: (t[lo:hi] if t is not None and t.shape[0] == x["k"].shape[0] else t)
           for k, t in x.items()}
    cu = torch.tensor([0, hi - lo], dtype=torch.int32, device="cuda")
    alone, alone_t = SUMMARY[family](one["k"], one["v"], *_gates(one), cu,
                                     initial_state=x["h0"][n:n + 1].contiguous())
    assert torch.equal(alone[0], batch[n]) and torch.equal(alone_t[0], batch_t[n])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
