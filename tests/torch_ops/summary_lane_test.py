"""The FROST forward summary's direct launch (summary_engine.py; on unless CUDNN_FROST_SUMMARY_LANE=0)
planned and launched on a CPU with a recording kernel: a cached summary op call takes the
op's launch lane and launches what the checked path (execute -> frost_summary) launches.

The backward summary (chain stage only, no transition) likewise: the backward stages'
compiled kernels are replaced by recorders of the operands they get.

The shipped FROST summary engine plans graphs on a CPU handle here (its runtime probe and
device rules answered as on an sm_90 GPU), and the two GPU-only steps of the forward
launcher are replaced: `frost_fwd` runs the launcher's real operand checks and records
the launch; `bind_fwd` runs the same checks and returns a real `BoundLaunch` around a
recording function. Each recorded launch says, per kernel operand, which buffer it got:
one of the call's own tensors (by name), or a scratch region (by its offset in the
call's workspace) together with what that region held at the launch (zero, the
identity, or other), so the fills the launch relies on are checked too.
"""
from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import pytest
import torch

from cudnn.linear_attention import ops
from cudnn.linear_attention.frost import la_engine, runtime_probe, summary_engine
from cudnn.linear_attention.frost.kernels import bwd as kernels_bwd
from cudnn.linear_attention.frost.kernels import config as kernel_config
from cudnn.linear_attention.frost.kernels import fwd as kernels_fwd
from cudnn.linear_attention.frost.kernels import summary as kernels_summary
from cudnn.linear_attention.ops.summary import GDN2_SUMMARY, GDN_SUMMARY, KDA_SUMMARY
from tests.torch_ops.frost_bwd_on_cpu import engines_patched


#: scratch operands the kernels read, whose content the fills must have set
_READ_FROM_SCRATCH = ("q", "v", "w", "initial_state")


class _Recorder:
    def __init__(self) -> None:
        self.checked: list[tuple] = []   # launches through frost_fwd (execute)
        self.lane: list[tuple] = []      # launches through a BoundLaunch (the lane)
        self.binds = 0
        self.tensors: dict[str, torch.Tensor] = {}  # the call's own tensors, by name
        self.scratch: dict[str, torch.Tensor] = {}  # the current call's carved regions
        self.base = self.end = 0
        self.bwd: list[tuple] = []       # backward stage launches, either path
        self.bwd_binds = 0
        self.configs: list = []          # the forward config of each check (call or bind)

    def role(self, address: int, operand: str) -> tuple:
        """What kernel operand `operand` got at `address`."""
        for name, t in self.tensors.items():
            if t is not None and t.numel() and t.data_ptr() == address:
                return ("tensor", name)
        if self.base <= address < self.end:
            # what a scratch operand the kernels read holds (written ones may hold anything)
            known = [t for t in self.scratch.values() if t.data_ptr() == address]
            content = _content(known[0]) if known and operand in _READ_FROM_SCRATCH else "-"
            return ("scratch", address - self.base, content)
        return ("unknown", address)


def _content(t: torch.Tensor) -> str:
    if not torch.any(t.float() != 0):
        return "zero"
    if t.dim() >= 2 and t.shape[-1] == t.shape[-2] and torch.equal(
            t.float(), torch.eye(t.shape[-1]).expand(t.shape)):
        return "identity"
    return "other"


@contextlib.contextmanager
def summary_engines_on_cpu(rec: _Recorder) -> Iterator[None]:
    def frost_fwd(*, scale, stream=None, **operands):
        checked = kernels_fwd.check_operands(**operands)
        rec.configs.append(checked.config)
        rec.checked.append(tuple(rec.role(checked.tensors[n].data_ptr(), n) if checked.tensors[n]
                                 is not None else None for n in kernel_config.OPERANDS))

    def bind_fwd(*, scale, **operands):
        rec.binds += 1
        checked = kernels_fwd.check_operands(**operands)
        rec.configs.append(checked.config)

        def kernel(*args):  # TVM-FFI's plain ints, in ABI order, then T, N, scale, stream
            abi = kernel_config.abi_operands(checked.config)
            by_name = dict(zip(abi, args))
            rec.lane.append(tuple(rec.role(by_name[n], n) if by_name.get(n) else None
                                  for n in kernel_config.OPERANDS))
        return kernels_fwd.BoundLaunch(
            checked.config, types.SimpleNamespace(ffi="tvm", fn=kernel),
            kernels_fwd.operand_signature(checked.tensors), checked.T, checked.N, float(scale))

    carve = kernels_summary._carve

    def recorded_carve(workspace, regions):
        # scratch comes dirty from the allocator: what a launch reads, a fill must have set
        workspace.view(-1).view(torch.uint8).fill_(0xA5)
        rec.scratch = carve(workspace, regions)
        rec.base = workspace.data_ptr()
        rec.end = rec.base + workspace.numel() * workspace.element_size()
        return rec.scratch

    class StageKernel:  # a compiled backward stage's place
        def __init__(self, stage: str) -> None:
            self.stage = stage

        def launch(self, tensors, T, N, scale, stream) -> None:
            rec.bwd.append((self.stage, tuple(
                (name, None if t is None else rec.role(t.data_ptr(), name))
                for name, t in sorted(tensors.items()))))

    bind_bwd = kernels_bwd.bind_bwd

    def counted_bind_bwd(**operands):
        rec.bwd_binds += 1
        return bind_bwd(**operands)

    summary = ("_summary_frost",)
    patches = {
        (runtime_probe, "runtime_reason"): lambda engine, device=None: None,
        (runtime_probe, "kernel_arch"): lambda device: runtime_probe.KERNEL_ARCHS[90],
        (la_engine, "handle_device_reason"): (
            lambda graph, engine, reason=la_engine.handle_device_reason:
            None if engine.endswith(summary) else reason(graph, engine)),
        (la_engine, "_build_device"): (
            lambda handle, engine, build=la_engine._build_device:
            torch.device("cpu") if engine.endswith(summary) else build(handle, engine)),
        (summary_engine, "torch_stream"): lambda stream, device: types.SimpleNamespace(
            cuda_stream=0),
        (kernels_bwd, "_require_cuda"): lambda q: None,
        (kernels_bwd, "_stage_kernels"): lambda cfg, stages, device: tuple(
            StageKernel(stage) for stage in cfg.stages if stages is None or stage in stages),
        (kernels_bwd, "bind_bwd"): counted_bind_bwd,
        # a CPU allocation is not 128-byte aligned as a CUDA one is (512): nothing else differs
        (summary_engine, "carve_scratch"): lambda engine, workspace, size, device: workspace,
        (kernels_fwd, "frost_fwd"): frost_fwd,
        (kernels_fwd, "bind_fwd"): bind_fwd,
        (kernels_summary, "_carve"): recorded_carve,
    }
    with engines_patched(patches):
        yield


def _inputs(family: str, seed: int, seqs=(40, 0, 88), heads=2, K=64, V=64, k_heads=None):
    gen = torch.Generator().manual_seed(seed)
    T = sum(seqs)
    bf16 = torch.bfloat16

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype)
    per_channel = family != "gdn"
    kv = k_heads or heads  # k and v share their heads, the gates have `heads`
    x = dict(k=rand(T, kv, K, dtype=bf16), v=rand(T, kv, V, dtype=bf16),
             g=-(rand(T, heads, K) if per_channel else rand(T, heads)).abs(),
             beta=(rand(T, heads, K, dtype=bf16) if family == "gdn2" else rand(T, heads)).sigmoid())
    if family == "gdn2":
        x["w"] = rand(T, heads, V, dtype=bf16)
    x["cu_seqlens"] = torch.tensor([0, *torch.tensor(seqs).cumsum(0).tolist()], dtype=torch.int32)
    return x


_OPS = {"gdn": GDN_SUMMARY, "kda": KDA_SUMMARY, "gdn2": GDN2_SUMMARY}


def _call(rec: _Recorder, family: str, x: dict, initial: torch.Tensor | None):
    summary = _OPS[family].summary
    gates = [x["g"], x["beta"]] + ([x["w"]] if family == "gdn2" else [])
    rec.tensors = {**x, "initial_state": initial}
    state, transition = summary.op(x["k"], x["v"], *gates, x["cu_seqlens"],
                                   initial_state=initial, output_transition=True,
                                   use_qk_l2norm_in_kernel=True)
    return state, transition


def _roles_of_three_calls(rec, family, x, initial) -> list:
    """Per call (the first checked, the next two by the lane where there is one), the
    role of every operand of each launch it made; every call on fresh copies of the
    inputs (new addresses, same layout)."""
    roles = []
    for call in range(3):  # fresh results each call: the roles name them per call
        if call:
            x = {n: t.clone() for n, t in x.items()}
            initial = None if initial is None else initial.clone()
        before_checked, before_lane = len(rec.checked), len(rec.lane)
        state, transition = _call(rec, family, x, initial)
        # the results exist only once the call returns: name their addresses now
        results = {state.data_ptr(): ("tensor", "final_state"),
                   transition.data_ptr(): ("tensor", "transition")}
        records = rec.checked[before_checked:] or rec.lane[before_lane:]
        roles.append([tuple(r if r is None or r[0] != "unknown" else results.get(r[1], r)
                            for r in launch) for launch in records])
    return roles


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("with_initial, k_heads", [(False, None), (True, None), (False, 1)],
                         ids=["zero", "h0", "shared-kv"])
def test_cached_summary_takes_the_lane_and_launches_what_execute_does(family, with_initial,
                                                                      k_heads, monkeypatch):
    """On the passes with the output (FROST_SUMMARY_NO_OUTPUT=0; the output-free default is
    test_summary_without_output_launches_no_q_and_no_out's): with one k and v head for two
    gate heads the first run reads a zero stand-in q of HO heads from scratch
    (kernels/summary.py), which the lane must zero too."""
    monkeypatch.setenv(summary_engine.LANE_ENV, "1")
    monkeypatch.setenv(kernels_summary.NO_OUTPUT_ENV, "0")
    rec = _Recorder()
    with summary_engines_on_cpu(rec):
        x = _inputs(family, seed=1, k_heads=k_heads)
        N, HO = x["cu_seqlens"].numel() - 1, x["g"].shape[1]
        initial = torch.randn(N, HO, 64, 64) if with_initial else None
        roles = _roles_of_three_calls(rec, family, x, initial)
        cache = _OPS[family].summary.cache
        (entry,) = cache.values()
    assert entry.lane is not None and rec.binds == 2  # bound once: both runs
    assert len(rec.checked) == 2 and len(rec.lane) == 4  # first call checked, then the lane
    assert entry.checked_calls == 1
    # the lane's launches get the same buffers and scratch (same offsets, same fills)
    assert roles[1] == roles[0] and roles[2] == roles[0], (roles[0], roles[1])
    first, transition_run = roles[0]
    assert transition_run[kernel_config.OPERANDS.index("initial_state")][2] == "identity"
    assert transition_run[kernel_config.OPERANDS.index("v")][2] == "zero"
    assert transition_run[kernel_config.OPERANDS.index("final_state")] == ("tensor", "transition")
    assert first[kernel_config.OPERANDS.index("final_state")] == ("tensor", "final_state")
    assert all(r is None or r[0] != "unknown" for launch in roles[0] for r in launch), roles[0]
    if k_heads == 1:
        assert first[0][0] == "scratch" and first[0][2] == "zero", first[0]


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("k_heads", [None, 1], ids=["own-kv", "shared-kv"])
def test_summary_without_output_launches_no_q_and_no_out(family, k_heads, monkeypatch):
    """FROST_SUMMARY_NO_OUTPUT=1 (the default): the checked call and the lane launch write_output=False
    kernels with q and out absent, the same scratch for the same roles (the zero v / w and
    the identity), on a plan whose workspace is smaller than the switch-off plan's."""
    monkeypatch.setenv(summary_engine.LANE_ENV, "1")
    sizes = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(kernels_summary.NO_OUTPUT_ENV, switch)
        rec = _Recorder()
        with summary_engines_on_cpu(rec):
            roles = _roles_of_three_calls(rec, family, _inputs(family, seed=7, k_heads=k_heads),
                                          None)
            (entry,) = _OPS[family].summary.cache.values()
            (plan,) = {id(p): p for p in _plans(entry)}.values()
            sizes[switch] = plan.get_workspace_size()
        assert entry.lane is not None and len(rec.checked) == 2 and len(rec.lane) == 4
        assert roles[1] == roles[0] and roles[2] == roles[0], (roles[0], roles[1])
        assert all(r is None or r[0] != "unknown" for launch in roles[0] for r in launch)
        first, transition_run = roles[0]
        assert transition_run[kernel_config.OPERANDS.index("initial_state")][2] == "identity"
        assert transition_run[kernel_config.OPERANDS.index("v")][2] == "zero"
        lean = switch == "1"
        assert {c.write_output for c in rec.configs} == {not lean}
        for launch in (first, transition_run):
            for name in ("q", "out"):
                assert (launch[kernel_config.OPERANDS.index(name)] is None) == lean, (name, launch)
    assert sizes["1"] < sizes["0"], sizes


@pytest.mark.parametrize("lane", ["0", "1"], ids=["execute", "lane"])
@pytest.mark.parametrize("built, later", [("1", "0"), ("0", "1")])
def test_the_plan_keeps_the_switch_it_was_built_with(lane, built, later, monkeypatch):
    """The switch decides the workspace a plan sizes: read once, at the plan's build; a later
    change of the environment reaches neither the cached plan's execute nor its lane (which
    binds at the second call: a lane that read the environment instead would launch kernels
    that need more scratch than the plan sized, or other kernels than execute's)."""
    monkeypatch.setenv(summary_engine.LANE_ENV, lane)
    real = summary_engine.FrostSummaryPlan.direct_launch

    def direct_launch(self, graph, data):  # the plan is built; the environment changes now
        monkeypatch.setenv(kernels_summary.NO_OUTPUT_ENV, later)
        return real(self, graph, data)

    monkeypatch.setattr(summary_engine.FrostSummaryPlan, "direct_launch", direct_launch)
    rec = _Recorder()
    with summary_engines_on_cpu(rec):
        x = _inputs("kda", seed=8)
        monkeypatch.setenv(kernels_summary.NO_OUTPUT_ENV, built)
        for _ in range(3):
            _call(rec, "kda", x, None)
    assert len(rec.configs) == (4 if lane == "1" else 6)  # checked launches and binds
    assert {c.write_output for c in rec.configs} == {built == "0"}
    assert len(rec.lane) == (4 if lane == "1" else 0)


def _plans(entry):
    """The FrostSummaryPlan objects reachable from a cached op entry's attributes."""
    seen, todo, found = set(), [entry], []
    while todo:
        obj = todo.pop()
        if id(obj) in seen or len(seen) > 2000:
            continue
        seen.add(id(obj))
        if isinstance(obj, summary_engine.FrostSummaryPlan):
            found.append(obj)
            continue
        if isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple, set)):
            todo.extend(obj)
        elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("cudnn"):
            todo.extend(vars(obj).values())
    return found


def test_with_the_switch_off_no_lane(monkeypatch):
    monkeypatch.setenv(summary_engine.LANE_ENV, "0")
    rec = _Recorder()
    with summary_engines_on_cpu(rec):
        x = _inputs("gdn", seed=2)
        for _ in range(2):
            _call(rec, "gdn", x, None)
        (entry,) = GDN_SUMMARY.summary.cache.values()
    assert entry.lane is None and rec.binds == 0 and len(rec.checked) == 4


def test_a_bad_switch_value_is_named(monkeypatch):
    monkeypatch.setenv(summary_engine.LANE_ENV, "yes")
    with pytest.raises(ValueError, match=summary_engine.LANE_ENV):
        summary_engine.lane_enabled()
    monkeypatch.setenv(summary_engine.LANE_ENV, "0")
    assert summary_engine.lane_enabled() is False
    monkeypatch.delenv(summary_engine.LANE_ENV)
    assert summary_engine.lane_enabled() is True  # the default since its H200 run


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("with_final", [False, True], ids=["no-dht", "dht"])
def test_cached_backward_summary_takes_the_lane(family, with_final, monkeypatch):
    monkeypatch.setenv(summary_engine.LANE_ENV, "1")
    rec = _Recorder()
    with summary_engines_on_cpu(rec):
        x = _inputs(family, seed=3)
        T, N, HO = x["k"].shape[0], x["cu_seqlens"].numel() - 1, x["g"].shape[1]
        gen = torch.Generator().manual_seed(4)
        x["q"] = torch.randn(T, HO, 64, generator=gen).to(torch.bfloat16)
        x["dO"] = torch.randn(T, HO, 64, generator=gen).to(torch.bfloat16)
        d_final = torch.randn(N, HO, 64, 64, generator=gen) if with_final else None
        op = _OPS[family].summary_bwd
        roles = []
        for call in range(3):
            if call:
                x = {n: t.clone() for n, t in x.items()}
                d_final = None if d_final is None else d_final.clone()
            rec.tensors = {**x, "d_final_state": d_final}
            before = len(rec.bwd)
            d_initial, _ = op.op(x["dO"], x["q"], x["k"], x["g"], x["beta"], x["cu_seqlens"],
                                 0.125, d_final_state=d_final, output_transition=False,
                                 use_qk_l2norm_in_kernel=True)
            named = {d_initial.data_ptr(): ("tensor", "d_initial_state")}
            roles.append([(stage, tuple((n, r if r is None or r[0] != "unknown"
                                         else named.get(r[1], r)) for n, r in launch))
                          for stage, launch in rec.bwd[before:]])
        (entry,) = op.cache.values()
    assert entry.lane is not None and rec.bwd_binds == 1 and entry.checked_calls == 1
    assert [stage for stage, _ in roles[0]] == ["chain"]
    assert roles[1] == roles[0] and roles[2] == roles[0], (roles[0], roles[1])
    chain = dict(roles[0][0][1])
    assert chain["initial_state"][2] == "zero" and chain["v"][2] == "zero", chain
    assert chain["d_initial_state"] == ("tensor", "d_initial_state")
    assert chain["d_final_state"] == (("tensor", "d_final_state") if with_final else None)
    assert all(r is None or r[0] != "unknown" for r in chain.values()), chain


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
