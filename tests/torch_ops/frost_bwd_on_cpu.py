"""The FROST backward engine planned and launched on a CPU with recording stage kernels:
which path a cached backward op call takes, what each stage is handed, and what the call
costs on the host, without a GPU.

`frost_bwd_on_cpu(rec)` lets the `gdn_frost`, `kda_frost` and `gdn2_frost` engines plan
graphs whose handle is a CPU device (their runtime probe answered as on an sm_90 GPU,
their device rules patched) and replaces the GPU-only steps of the backward launcher
(kernels/bwd.py): `_stage_kernels` returns recorders in place of compiled kernels, the CUDA
device check passes, and `_region_operands` dirties the workspace before carving it (a lane's
scratch comes fresh from the allocator: nothing may rely on what an earlier call left).
Everything between the op and the kernel launch is the shipped code: the op layer, the
graph cache, the launch lane, FrostBackwardPlan (execute and direct_launch),
`frost_bwd`'s and `bind_bwd`'s checks, the workspace layout, `BoundBwd.launch` and the
head-group sums.

A recorder with `detailed` set records, per stage launch, which buffer each kernel operand
got: one of the call's own tensors (by name), or a scratch region (by its offset in the
call's workspace); the grads recorder writes random values into the fp32 per-head partial
regions of grouped heads (`partials`), so the sums that follow have something to get
wrong. Without `detailed` it only counts (the host-time harness, op_overhead.py
--backward).
"""
from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from cudnn.engines import manifest
from cudnn.linear_attention import ops
from cudnn.linear_attention.frost import bwd_plan, la_engine, runtime_probe
from cudnn.linear_attention.frost.kernels import bwd as kernels_bwd
from cudnn.linear_attention.frost.kernels.bwd_config import checkpoint_rows
from cudnn.linear_attention.ops import gdn, gdn2, kda

FAMILY_OPS = {"gdn": gdn.OPS, "kda": kda.OPS, "gdn2": gdn2.OPS}
ENGINES = {"gdn": "gdn_frost", "kda": "kda_frost", "gdn2": "gdn2_frost"}
#: the backward result of each gradient port of the node
RESULT_PORTS = {"dq": "dQ", "dk": "dK", "dv": "dV", "dg": "dG", "dbeta": "dBeta", "dw": "dW",
                "d_initial_state": "d_initial_state"}


@dataclass
class BwdRecorder:
    detailed: bool = True
    #: (stage, ((operand, role), ...)) per stage launch, either path (detailed)
    launches: list = field(default_factory=list)
    stage_launches: int = 0
    #: frost_bwd calls (the plan's checked execute) and bind_bwd calls (direct_launch)
    checked: int = 0
    binds: int = 0
    #: the batch_invariant each of those calls was given, in call order
    invariant: list = field(default_factory=list)
    #: the call's own tensors, by name (set by the caller before each call)
    tensors: dict = field(default_factory=dict)
    #: per grads launch, {dq / dk / dv: what the recorder wrote into its partial region}
    partials: list = field(default_factory=list)
    base: int = 0
    end: int = 0
    gen: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(7))

    def role(self, t: torch.Tensor | None) -> tuple | None:
        if t is None:
            return None
        address = t.data_ptr()
        for name, own in self.tensors.items():
            if isinstance(own, torch.Tensor) and own.numel() and own.data_ptr() == address:
                return ("tensor", name)
        if self.base <= address < self.end:
            return ("scratch", address - self.base)
        return ("unknown", address)

    def in_scratch(self, t: torch.Tensor | None) -> bool:
        return t is not None and self.base <= t.data_ptr() < self.end


_ENGINES = frozenset(ENGINES.values())


@contextlib.contextmanager
def frost_bwd_on_cpu(rec: BwdRecorder) -> Iterator[None]:
    class StageKernel:  # a compiled backward stage's place
        def __init__(self, stage: str) -> None:
            self.stage = stage

        def launch(self, tensors, T, N, scale, stream) -> None:
            rec.stage_launches += 1
            if not rec.detailed:
                return
            if self.stage == "grads":
                written = {}
                for name in ("dq", "dk", "dv"):
                    t = tensors[name]
                    if rec.in_scratch(t):  # a grouped-heads partial: fp32 per output head
                        t.copy_(torch.randn(t.shape, generator=rec.gen))
                        written[name] = t.clone()
                rec.partials.append(written)
            rec.launches.append((self.stage, tuple((name, rec.role(t))
                                                   for name, t in sorted(tensors.items()))))

    carve = kernels_bwd._region_operands

    def recorded_carve(workspace, regions, views=()):
        if rec.detailed:  # scratch comes dirty from the allocator
            workspace.view(-1).view(torch.uint8).fill_(0xA5)
        rec.base = workspace.data_ptr()
        rec.end = rec.base + workspace.numel() * workspace.element_size()
        return carve(workspace, regions, views)

    frost_bwd, bind_bwd = kernels_bwd.frost_bwd, kernels_bwd.bind_bwd

    def counted_frost_bwd(**operands):
        rec.checked += 1
        rec.invariant.append(operands.get("batch_invariant"))
        return frost_bwd(**operands)

    def counted_bind_bwd(**operands):
        rec.binds += 1
        rec.invariant.append(operands.get("batch_invariant"))
        return bind_bwd(**operands)

    patches = {
        (runtime_probe, "runtime_reason"): lambda engine, device=None: None,
        (runtime_probe, "kernel_arch"): lambda device: runtime_probe.KERNEL_ARCHS[90],
        (la_engine, "handle_device_reason"): (
            lambda graph, engine, reason=la_engine.handle_device_reason:
            None if engine in _ENGINES else reason(graph, engine)),
        (la_engine, "_build_device"): (
            lambda handle, engine, build=la_engine._build_device:
            torch.device("cpu") if engine in _ENGINES else build(handle, engine)),
        (bwd_plan, "torch_stream"): lambda stream, device: types.SimpleNamespace(cuda_stream=0),
        # a CPU allocation is not 128-byte aligned as a CUDA one is (512): nothing else differs
        (bwd_plan, "carve_scratch"): lambda engine, workspace, size, device: workspace,
        (kernels_bwd, "_require_cuda"): lambda q: None,
        (kernels_bwd, "_stage_kernels"): lambda cfg, stages, device: tuple(
            StageKernel(stage) for stage in cfg.stages if stages is None or stage in stages),
        (kernels_bwd, "_region_operands"): recorded_carve,
        (kernels_bwd, "frost_bwd"): counted_frost_bwd,
        (kernels_bwd, "bind_bwd"): counted_bind_bwd,
    }
    with engines_patched(patches):
        yield


@contextlib.contextmanager
def engines_patched(patches: dict) -> Iterator[None]:
    """Set each (module, name) to its value while planning and calling, with the engine and
    op caches cleared on the way in and out (nothing planned with the patches outlives
    them); the FROST plans on a CPU handle of this file and of summary_lane_test.py."""
    originals = {key: getattr(*key) for key in patches}
    for (module, name), value in patches.items():
        setattr(module, name, value)
    manifest.clear_engine_cache()
    ops.clear_graph_caches()
    try:
        yield
    finally:
        for (module, name), value in originals.items():
            setattr(module, name, value)
        manifest.clear_engine_cache()
        ops.clear_graph_caches()


def backward_call(family: str, seed: int = 0, seqs=(40, 0, 88), heads: int = 2,
                  qk_heads: int | None = None, dim: int = 64, initial: bool = False,
                  d_final: bool = False, checkpoints: bool = False, values: bool = False,
                  device: str = "cpu") -> dict:
    """The backward op's named arguments for one call: q and k with `qk_heads` heads (default
    `heads`), v, dO and the gates with `heads`; initial_state and d_final_state when asked;
    the forward's state_checkpoints (and `values`) as graph inputs when asked."""
    gen = torch.Generator().manual_seed(seed)
    T, N, H, HO, K = sum(seqs), len(seqs), qk_heads or heads, heads, dim
    bf16 = torch.bfloat16

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype).to(device)
    per_channel = family != "gdn"
    named = dict(q=rand(T, H, K, dtype=bf16), k=rand(T, H, K, dtype=bf16),
                 v=rand(T, HO, K, dtype=bf16), dO=rand(T, HO, K, dtype=bf16),
                 g=-(rand(T, HO, K) if per_channel else rand(T, HO)).abs(),
                 beta=(rand(T, HO, K, dtype=bf16) if family == "gdn2" else rand(T, HO)).sigmoid())
    if family == "gdn2":
        named["w"] = rand(T, HO, K, dtype=bf16)
    named["cu_seqlens"] = torch.tensor([0, *torch.tensor(seqs).cumsum(0).tolist()],
                                       dtype=torch.int32, device=device)
    if initial:
        named["initial_state"] = rand(N, HO, K, K)
    if d_final:
        named["d_final_state"] = rand(N, HO, K, K)
    if checkpoints:
        named["state_checkpoints"] = rand(checkpoint_rows(T, N), HO, K, K, dtype=bf16)
        named["checkpoint_every_n_tokens"] = 64
    if values:
        named["values"] = rand(T, HO, K, dtype=bf16)
    return named


def backward_args(family: str, named: dict, plan_name: str | None = None) -> tuple:
    """(kernel, args): the backward op's kernel as the op's eager autograd calls it (no
    dispatcher) and the call's arguments in schema order; the FROST plan pinned."""
    family_ops = FAMILY_OPS[family]
    call = {"scale": 0.125, "use_qk_l2norm_in_kernel": True,
            "plan_name": plan_name or ENGINES[family], **named}
    return family_ops._backward_kernel, family_ops.backward_signature.positional(call)


def run_backward(family: str, named: dict, plan_name: str | None = None) -> dict:
    """One backward op call as the op's eager autograd makes it; the results by name."""
    kernel, args = backward_args(family, named, plan_name)
    return dict(zip(FAMILY_OPS[family].family.gradient_results, kernel(*args)))


def backward_entry(family: str):
    """The backward op's one cached graph."""
    (entry,) = FAMILY_OPS[family].backward_def.cache.values()
    return entry
