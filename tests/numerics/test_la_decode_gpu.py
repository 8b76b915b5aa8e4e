"""L1 (GPU): the serving path on the FROST recurrent (decode) engine, through the public torch
ops, against the float64 serving reference (tests/reference/serving.py).

- state pools driven through several calls (decode steps, speculative steps of 3 tokens,
  mixed prefill + decode batches) with state_indices and overwrite_initial_state, for GDN,
  KDA and GDN-2, fp32 and bf16 pools, fused gates (safe gate with a_log / dt_bias, beta
  sigmoid, 2 sigmoid, linear domain) and in-kernel L2 norm; decode-shaped calls must plan
  the decode engine, the prefill-shaped one the chunked engine (its serving adapter);
- per-token checkpoints (checkpoint_every_n_tokens=1) for speculative rejection, through
  the serving op and the plain forward op;
- bad slots: negative and >= the pool size skip their sequence (zero output rows) and no
  byte outside the pool changes (guard rows around it);
- CUDA graphs: 100 decode steps captured once, replayed with new inputs and new slots,
  checked step by step against the reference chain;
- the kernel's variants (contiguous_channels: vector state accesses; 64 value rows per
  CTA) against the default on the same operands through the launcher, fp32 and bf16 pools.
With FROST_DECODE_VEC=1 every serving call here takes the contiguous map (the calls here
are too small for FROST_DECODE_BV64's tile: that one is covered by the variants test).
Bound: relative L2 error <= 1e-2 (bf16 inputs and outputs).

  python -m pytest -s tests/numerics/test_la_decode_gpu.py     (about 1-2 minutes: the
  first call of each configuration compiles its kernel, about 1 s each)
"""
from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention import ops  # noqa: E402
from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.inputs import InputConfig  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402
from tests.torch_ops.op_calls import FUNCTIONS, op_kwargs  # noqa: E402
from tests.torch_ops.serving_steps import Step, reference_call, run_steps, step_inputs  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.frost]  # skips: tests/conftest.py
BOUND = 1e-2
POOL = 12
GATES = {Family.GDN: dict(safe_gate=True, use_beta_sigmoid=True, use_qk_l2norm=True),
         Family.KDA: dict(safe_gate=True, gate_lower_bound=-3.0, use_beta_sigmoid=True,
                          allow_neg_eigval=True, use_qk_l2norm=True),
         Family.GDN2: dict(gate_domain="linear", use_beta_sigmoid=True)}
DECODE = [Step((1,) * 6, (4, 0, 2, 11, 7, 5)), Step((1,) * 6, (0, 2, 4, 5, -1, 11)),
          Step((1,) * 6, (2, 12, 0, 4, 11, 30))]
SPECULATIVE = [Step((3, 3, 3), (1, 5, 9)), Step((3, 3, 3), (9, 1, -1))]
MIXED = [Step((300, 1, 1, 40), (0, -1, 5, 2)), Step((1, 1, 1, 1), (2, 0, 3, 5))]


def config(family: Family, H=16, HV=16, K=128, V=128, **kw) -> InputConfig:
    return InputConfig(family=family, seq_lens=(1,), H=H, HV=HV, K=K, V=V, dtype=torch.bfloat16,
                       **{**GATES[family], **kw})


def pool_for(cfg: InputConfig, dtype=torch.float32, rows=POOL, seed=1) -> torch.Tensor:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(rows, cfg.HO, cfg.V, cfg.K, device="cuda", generator=gen).to(dtype)


def serving_plans() -> set[str]:
    return {entry.plan for cache in ops.graph_caches() if cache.name.endswith("_serve")
            for entry in cache.values()}


@pytest.fixture(autouse=True)
def fresh_caches():
    ops.clear_graph_caches()
    yield
    ops.clear_graph_caches()


@pytest.mark.parametrize("family", list(Family))
@pytest.mark.parametrize("steps", [DECODE, SPECULATIVE, MIXED], ids=["decode", "spec", "mixed"])
@pytest.mark.parametrize("state", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_pool_over_several_calls(family, steps, state):
    cfg = config(family)
    worst = run_steps(cfg, steps, pool_for(cfg, state), device="cuda")
    print(f"\n{family.value} {state}: {worst}")
    assert max(worst.values()) < BOUND, worst
    # decode-shaped calls (T <= 16 N) on the recurrent engine; a prefill-shaped one (the
    # mixed batch's first call) on the chunked engine through its serving adapter
    expected = {f"{family.value}_frost_decode" if sum(s.seq_lens) <= 16 * len(s.seq_lens)
                else f"{family.value}_frost" for s in steps}
    assert serving_plans() == expected, serving_plans()


@pytest.mark.parametrize("family", list(Family))
def test_grouped_heads_and_k64(family):
    cfg = config(family, H=4, HV=8, K=64, V=64)
    worst = run_steps(cfg, DECODE + SPECULATIVE, pool_for(cfg), device="cuda")
    assert max(worst.values()) < BOUND, worst


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA, Family.GDN2])
@pytest.mark.parametrize("ck_dtype", [torch.float32, None], ids=["ck_fp32", "ck_io"])
def test_per_token_checkpoints(family, ck_dtype):
    cfg = config(family)
    worst = run_steps(cfg, SPECULATIVE, pool_for(cfg), every=1, checkpoint_dtype=ck_dtype,
                      device="cuda")
    assert max(worst.values()) < BOUND, worst


def test_plain_forward_decode_is_served_by_the_decode_engine():
    """No pool: initial_state [N, ...] in, final_state [N, ...] out, per-token checkpoints."""
    cfg = config(Family.KDA)
    step = Step((2, 1, 3, 1), (0, 1, 2, 3))
    x = step_inputs(cfg, step, 5)
    h0 = pool_for(cfg, rows=4)
    xd = x.to(device="cuda")
    with torch.no_grad():
        o, final, ck = FUNCTIONS[Family.KDA](*xd.args(), **op_kwargs(
            xd, initial_state=h0, checkpoint_every_n_tokens=1, checkpoint_dtype=torch.float32))
    ref = reference_call(cfg, x, h0.cpu().double(), torch.arange(4, dtype=torch.int32), 1, None)
    assert rel_err(o, ref.o) < BOUND
    assert rel_err(final, torch.stack([ref.written[i] for i in range(4)])) < BOUND
    assert rel_err(ck[:7], ref.checkpoints[:7]) < BOUND
    plans = {e.plan for c in ops.graph_caches() if c.name.endswith("_fwd") for e in c.values()}
    assert plans == {"kda_frost_decode"}, plans


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA])
def test_bad_slots_never_write_outside_the_pool(family):
    cfg = config(family)
    guarded = pool_for(cfg, rows=POOL + 2)
    before = guarded.clone()
    pool = guarded[1:POOL + 1]  # rows 0 and POOL + 1 are guards
    slots = torch.tensor([POOL, -1, 3, POOL + 100, -(2**31)], dtype=torch.int32, device="cuda")
    x = step_inputs(cfg, Step((1, 2, 1, 1, 3), tuple(slots.tolist())), 9).to(device="cuda")
    with torch.no_grad():
        o, final = FUNCTIONS[family](*x.args(), **op_kwargs(
            x, initial_state=pool, state_indices=slots, overwrite_initial_state=True))
    assert final is pool
    assert torch.equal(guarded[0], before[0]) and torch.equal(guarded[-1], before[-1])
    changed = [r for r in range(POOL) if not torch.equal(pool[r], before[r + 1])]
    assert changed == [3], changed
    cu = x.cu_seqlens.tolist()
    served = set(range(cu[2], cu[3]))
    for t in range(cu[-1]):
        assert (o[t].abs().max() > 0) == (t in served), t


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA, Family.GDN2])
def test_cuda_graph_of_100_decode_steps(family):
    """Capture 100 decode calls (each on its own slice of stacked static inputs), then
    replay with new inputs and new slots written into those buffers."""
    steps, n = 100, 8
    cfg = config(family)
    fn = FUNCTIONS[family]
    gen = torch.Generator().manual_seed(0)

    def draw(seed: int) -> list:
        out = []
        for i in range(steps):
            slots = torch.randperm(POOL, generator=gen)[:n].to(torch.int32)
            slots[torch.rand(n, generator=gen) < 0.15] = -1  # padding entries
            out.append((step_inputs(cfg, Step((1,) * n, tuple(slots.tolist())), seed * 1000 + i),
                        slots))
        return out

    first = draw(1)
    # per-step inputs stacked (each step's slice 16-byte aligned, as the launch lane wants);
    # one cu_seqlens for all steps, as a server keeps it
    names = [f.name for f in dataclasses.fields(first[0][0]) if f.name not in
             ("config", "cu_seqlens") and getattr(first[0][0], f.name) is not None]
    static = {name: torch.stack([getattr(x, name) for x, _ in first]).cuda() for name in names}
    slots_all = torch.stack([s for _, s in first]).cuda()
    cu = first[0][0].cu_seqlens.cuda()
    pool = pool_for(cfg)

    def call(i: int):
        x = dataclasses.replace(first[0][0], cu_seqlens=cu,
                                **{name: static[name][i] for name in names})
        return fn(*x.args(), **op_kwargs(x, initial_state=pool, state_indices=slots_all[i],
                                         overwrite_initial_state=True))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for i in range(3):  # builds the graph cache entry and the launch lane, compiles
            call(i)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        outs = [call(i)[0] for i in range(steps)]

    second = draw(2)
    for name in names:
        static[name].copy_(torch.stack([getattr(x, name) for x, _ in second]))
    slots_all.copy_(torch.stack([s for _, s in second]))
    start = pool_for(cfg, seed=7)
    pool.copy_(start)
    graph.replay()
    torch.cuda.synchronize()

    pool64 = start.cpu().double()
    worst = 0.0
    for i, (x, slots) in enumerate(second):
        ref = reference_call(cfg, x, pool64, slots, 0, None)
        worst = max(worst, rel_err(outs[i], ref.o))
        pool64 = ref.state_after(pool64)
    worst_state = rel_err(pool, pool64)
    print(f"\n{family.value}: 100 replayed steps, worst o {worst:.2e}, pool {worst_state:.2e}")
    assert worst < BOUND and worst_state < BOUND, (worst, worst_state)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_repeated_serving_calls_take_the_launch_lane(family):
    """A server's decode loop (same shapes, new tensors every call) runs every cached call
    through the launch lane: the entry's checked path runs only for the first call. Also
    reports the host time per call (the CPU test serving_fast_path_test.py counts the same
    path through the real plan with a recording kernel)."""
    import time

    from tests.torch_ops.decode_on_cpu import serve, serving_step

    steps = [serving_step(family, seed, n=4, heads=16, dim=128, device="cuda") for seed in range(8)]
    pool = torch.zeros(12, 16, 128, 128, device="cuda")
    slots = torch.tensor([3, 0, 7, 11], dtype=torch.int32, device="cuda")
    with torch.no_grad():
        serve(family, steps[0], pool, slots)
        (entry,) = [e for c in ops.graph_caches() if c.name.endswith("_serve") for e in c.values()]
        assert entry.plan.startswith(f"{family}_frost_decode") and entry.lane is not None
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(200):
            serve(family, steps[i % 8], pool, slots)
        host_us = (time.perf_counter() - start) / 200 * 1e6
        torch.cuda.synchronize()
    assert entry.checked_calls == 1, entry.checked_calls
    print(f"\n{family}: cached serving call, host {host_us:.1f} us per call (batch 4)")


@pytest.mark.parametrize("variant", [(True, 32), (False, 64), (True, 64)],
                         ids=["vec", "bv64", "vec-bv64"])
@pytest.mark.parametrize("state", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_kernel_variants_match_the_default(family, state, variant):
    """The launcher's kernel with lanes holding contiguous channels (vector state accesses,
    FROST_DECODE_VEC / contiguous_channels) and / or 64 value rows per CTA
    (FROST_DECODE_BV64) against the default (element-wise map, 32 rows) on the same
    operands: 70 sequences of 1-4 tokens over a pool of 80 rows (a negative and an
    out-of-range slot among them), per-token fp32 checkpoints, K = V = 128. Only the fp32
    summation order differs, so both agree far below the reference bound."""
    from cudnn.linear_attention.frost.kernels.decode import frost_decode

    gen = torch.Generator(device="cuda").manual_seed(7)
    H, K, V, N, S = 4, 128, 128, 70, 80
    lens = torch.randint(1, 5, (N,), generator=gen, device="cuda")
    cu = torch.zeros(N + 1, dtype=torch.int32, device="cuda")
    cu[1:] = torch.cumsum(lens, 0)
    T = int(cu[-1])

    def rnd(*shape, dtype=torch.bfloat16, scale=1.0):
        return (torch.randn(*shape, generator=gen, device="cuda") * scale).to(dtype)
    per_channel = family != "gdn"
    slots = torch.randperm(S, generator=gen, device="cuda")[:N].to(torch.int32)
    slots[3], slots[10] = -1, S + 2
    ops_ = dict(q=rnd(T, H, K), k=rnd(T, H, K), v=rnd(T, H, V),
                g=-rnd(T, H, *((K,) if per_channel else ()), dtype=torch.float32).abs() * 0.3,
                beta=(rnd(T, H, K) if family == "gdn2" else rnd(T, H, dtype=torch.float32)),
                w=rnd(T, H, V) if family == "gdn2" else None, cu_seqlens=cu,
                state_indices=slots, family=family, use_l2norm=True, beta_sigmoid=True,
                checkpoint_every=1)
    if family == "gdn2":
        ops_["g"] = torch.rand(T, H, K, generator=gen, device="cuda") * 0.5 + 0.5
        ops_["linear_gate"] = True
    pool0 = rnd(S, H, V, K, dtype=state, scale=0.1)
    got = {}
    for contiguous, block_v in ((False, 32), variant):
        pool = pool0.clone()
        out = torch.full((T, H, V), float("nan"), dtype=torch.bfloat16, device="cuda")
        ck = torch.full((T + N, H, V, K), float("nan"), device="cuda")
        bound = frost_decode(scale=K ** -0.5, out=out, initial_state=pool, final_state=pool,
                             checkpoints=ck, a_log=None, dt_bias=None,
                             contiguous_channels=contiguous, block_v=block_v, **ops_)
        assert (bound.config.contiguous_channels, bound.config.block_v) == (contiguous, block_v)
        torch.cuda.synchronize()
        got[contiguous, block_v] = (out.float(), pool.float(), ck[:T])
    for name, a, b in zip(("out", "pool", "checkpoints"), got[False, 32], got[variant]):
        assert not torch.isnan(a).any(), name
        assert not torch.isnan(b).any(), name
        # bf16 rows (out, a bf16 pool) may round a last bit apart; fp32 rows only differ by
        # the order of the fp32 sums
        limit = 1e-2 if name == "out" or (name == "pool" and state == torch.bfloat16) else 1e-5
        assert rel_err(b, a) < limit, (name, rel_err(b, a))
    # skipped slots: no pool row changed outside the served ones
    served = set(slots.tolist()) - {-1, S + 2}
    untouched = [r for r in range(S) if r not in served]
    assert torch.equal(got[variant][1][untouched], pool0.float()[untouched])
