"""The FROST decode engine planned and launched on a CPU, with a recording kernel: what a
cached serving call costs on the host, and which path it takes, without a GPU.

`decode_engine_on_cpu()` lets the `*_frost_decode` engines plan graphs whose handle is a
CPU device (the chunked FROST and cuTile engines still decline them), and replaces the
two GPU-only steps of the launcher (kernels/decode.py): `bind_decode` runs the launcher's
real operand checks (`check_decode_operands`) and returns a real `DecodeLaunch` around a
recording function instead of a compiled kernel, and `frost_decode` (the checked path of
`execute`) runs the same checks and records. Everything between the public torch op and
the kernel call is the shipped code: the op layer, the graph cache, the launch lane, the
plan's direct launch and `DecodeLaunch.launch_addresses`.

The returned `DecodeCounts` says how many times each step ran: a cached call that takes
the fast path adds one `launches` and nothing else. `serving_step` and `serve` make and
run one decode (or speculative) step as a server does (also used on the GPU by
op_overhead.py --serve).
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import torch

from cudnn.engines import manifest
from cudnn.linear_attention import ops
from cudnn.linear_attention.frost import decode_engine, la_engine, runtime_probe
from cudnn.linear_attention.frost.kernels import decode as kernels_decode
from cudnn.linear_attention.ops import _op_factory


@dataclasses.dataclass
class DecodeCounts:
    builds: int = 0      # graphs built by the op layer (planning + plan build)
    binds: int = 0       # launcher checks + kernel lookups (direct_launch, once per entry)
    checked: int = 0     # checked launches through execute (frost_decode)
    launches: int = 0    # kernel calls through a DecodeLaunch (the lane)
    #: the kernel config of every bind and checked launch, in order
    configs: list = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def decode_engine_on_cpu() -> Iterator[DecodeCounts]:
    counts = DecodeCounts()

    def kernel(*args):  # the compiled kernel's place: TVM-FFI takes addresses as ints
        counts.launches += 1

    def bind_decode(*, arch=None, **operands):
        counts.binds += 1
        checked = kernels_decode.check_decode_operands(**operands)
        counts.configs.append(checked.config)
        return kernels_decode.DecodeLaunch(
            checked.config, kernel, "tvm", kernels_decode.operand_signature(checked.tensors),
            checked.T, checked.N, checked.S)

    def frost_decode(*, scale, stream=None, **operands):
        counts.checked += 1
        counts.configs.append(kernels_decode.check_decode_operands(**operands).config)

    build = _op_factory.FamilyOps._build

    def counted_build(self, op, values):
        counts.builds += 1
        return build(self, op, values)

    saved = [(runtime_probe, "runtime_reason"), (runtime_probe, "kernel_arch"),
             (la_engine, "handle_device_reason"), (decode_engine, "_build_device"),
             (decode_engine, "torch_stream"), (kernels_decode, "bind_decode"),
             (kernels_decode, "frost_decode"), (_op_factory.FamilyOps, "_build")]
    originals = [(module, name, getattr(module, name)) for module, name in saved]
    patches = {
        (runtime_probe, "runtime_reason"): lambda engine, device=None: None,
        (runtime_probe, "kernel_arch"): lambda device: runtime_probe.KERNEL_ARCHS[90],
        # the FROST engines' shared support rule asks it; only the decode engines may pass
        (la_engine, "handle_device_reason"): (
            lambda graph, engine, device_reason=la_engine.handle_device_reason:
            None if engine.endswith("_frost_decode") else device_reason(graph, engine)),
        (decode_engine, "_build_device"): lambda handle, engine: torch.device("cpu"),
        (decode_engine, "torch_stream"): lambda stream, device: None,
        (kernels_decode, "bind_decode"): bind_decode,
        (kernels_decode, "frost_decode"): frost_decode,
        (_op_factory.FamilyOps, "_build"): counted_build,
    }
    for (module, name), value in patches.items():
        setattr(module, name, value)
    manifest.clear_engine_cache()
    ops.clear_graph_caches()
    try:
        yield counts
    finally:
        for module, name, value in originals:
            setattr(module, name, value)
        manifest.clear_engine_cache()
        ops.clear_graph_caches()


FUNCTIONS = {"gdn": ops.gated_delta_net, "kda": ops.kimi_delta_attention,
             "gdn2": ops.gated_delta_net_v2}


def serving_step(family: str, seed: int, *, n: int, heads: int, dim: int, tokens: int = 1,
                 device: str = "cpu") -> dict:
    """Fresh tensors (new addresses) for one step of n sequences x `tokens` tokens: bf16
    q/k/v (and GDN-2's beta, w), float32 gates, int32 cu_seqlens, on `device`."""
    gen = torch.Generator().manual_seed(seed)
    T = n * tokens

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)
    bf16 = torch.bfloat16
    per_channel = family != "gdn"
    x = dict(q=rand(T, heads, dim, dtype=bf16), k=rand(T, heads, dim, dtype=bf16),
             v=rand(T, heads, dim, dtype=bf16),
             g=-rand(T, heads, dim).abs() if per_channel else -rand(T, heads).abs(),
             beta=(rand(T, heads, dim).sigmoid().to(bf16) if family == "gdn2"
                   else rand(T, heads).sigmoid()),
             cu_seqlens=torch.arange(0, T + 1, tokens, dtype=torch.int32, device=device))
    if family == "gdn2":
        x["w"] = rand(T, heads, dim, dtype=bf16)
    return x


def serve(family: str, x: dict, pool: torch.Tensor, slots: torch.Tensor, **kw):
    """One serving call: the pool read through `slots` and written back in place."""
    args = [x["q"], x["k"], x["v"], x["g"], x["beta"]]
    if family == "gdn2":
        args.append(x["w"])
    return FUNCTIONS[family](*args, x["cu_seqlens"], initial_state=pool, output_final_state=True,
                             overwrite_initial_state=True, state_indices=slots,
                             use_qk_l2norm_in_kernel=True, **kw)
