"""FROST forward launcher: argument checks, the per-config compile cache and the launch.

``frost_fwd`` is the one entry point the FROST engines call (GDN, KDA and GDN-2 forward);
it validates every operand (raising ValueError that names the argument), derives the
static FrostFwdConfig, gets the CuTe DSL kernel for it on first use (lazily, once per
config per process, thread-safe): from the on-disk kernel cache (kernel_store.py), else by
compiling it (and adding it to that cache), and launches
it on the caller's stream. It never reads cu_seqlens on the host and never allocates.
``bind_fwd`` does the same checks and lookup without launching and returns the
``BoundLaunch`` a caller repeats for operands of the same layout; that object, held by
the caller, is the only thing kept per layout: this module's one cache is the compiled
kernel per (config, arch, calling convention).
This module imports neither torch nor cutlass at import time, so CPU-only CI can import it.
"""
from __future__ import annotations

import dataclasses
import threading
import types

from cudnn.linear_attention.common.cu_seqlens_check import check_cu_seqlens, strict_requested
from cudnn.linear_attention.frost.kernels import kernel_store
# compile_fwd is looked up here at call time (tests replace fwd.compile_fwd)
from cudnn.linear_attention.frost.kernels.compile_kernel import (  # noqa: F401
    compile_fwd,
    four_roles_possible,
    preferred_ffi,
)
from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_rows
from cudnn.linear_attention.frost.kernels.config import (CHECKPOINT_OPERAND, OPERANDS, PIPELINE_MIN_TOKENS,
                                                          VALUES_OPERAND, FrostFwdConfig, abi_operands)
from cudnn.linear_attention.frost.kernels.operand_checks import check, check_token_operands, dtype_name, fail

# One kernel family serves every config: the wgmma layer on sm_90a (training forwards
# too), its base the pipelined layer on other archs (compile_kernel.product_algorithm).
# Other builds (the mma layer alone, a forced pipelined or wgmma layer) and experiment switches are the test and bench tooling's
# (engines_frost/tests/frost_fwd_experiments.py); nothing here reads them.
_INDEX_LIMIT = 2**31  # the kernels index with 32-bit offsets

_cache: dict[tuple[FrostFwdConfig, str, str], object] = {}
_cache_lock = threading.Lock()


def frost_workspace_size(**static_config) -> int:
    """Scratch bytes the forward needs for a static configuration: the fused kernels keep
    everything on chip, so 0 for every configuration."""
    return 0


def device_arch(device) -> str:
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"


def _compiled(cfg: FrostFwdConfig, arch: str, ffi: str | None = None, device=None):
    """The kernel for cfg on arch in calling convention ffi (default preferred_ffi()), as a
    compiled_kernel.CompiledKernel: loaded or compiled once per process (device: named in
    the log line of a long compile). bind_fwd looks it up at call time: the test tooling's
    frost_fwd_experiments.use_kernel wraps it to launch another kernel layer."""
    key = (cfg, arch, ffi or preferred_ffi())
    fn = _cache.get(key)
    if fn is None:
        with _cache_lock:
            fn = _cache.get(key)
            if fn is None:
                fn = _load_or_compile(*key, device=device)
                _cache[key] = fn
    return fn


def _load_or_compile(cfg: FrostFwdConfig, arch: str, ffi: str, device=None):
    """The kernel from the kernel cache, else a fresh compile (then cached on disk)."""
    return kernel_store.load_or_compile(cfg, arch, ffi, lambda: compile_fwd(cfg, arch, ffi=ffi),
                                        device)


WHO = "frost_fwd"
_dtype_name = dtype_name


def _fail(arg: str, expected: str, got, who: str = WHO) -> ValueError:
    return fail(who, arg, expected, got)


def _check(name, t, shape, dtypes, device, who: str = WHO):
    """operand_checks.check with frost_fwd (or `who`) named."""
    check(who, name, t, shape, dtypes, device)


def frost_fwd(*, q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state,
              scale: float, use_l2norm: bool, gate_per_channel: bool, beta_per_channel: bool,
              stream, bind: bool = False,
              strict_cu_seqlens: bool | None = None, state_checkpoints=None, values=None,
              write_output: bool = True, batch_invariant: bool = False) -> BoundLaunch | None:
    """Chunked linear-attention forward (GDN / KDA / GDN-2), written into out and final_state.

    q [T,H,K], k [T,HK,K], v [T,HV,V] (bf16 or fp16, one dtype); g fp32 [T,HO] or [T,HO,K]
    (log decays); beta fp32 [T,HO], or io-dtype [T,HO,K] with beta_per_channel (GDN-2 erase
    gate, then w [T,HO,V] io dtype is required); cu_seqlens int32 [N+1] on the device;
    out [T,HO,V] io dtype; initial_state / final_state None or [N,HO,V,K] fp32 or bf16
    (equal dtypes). state_checkpoints None or bf16 [T // 64 + N, HO, V, K]: also written,
    the state entering every 64-token chunk (checkpoints.py). values None or bf16
    [T, HO, V] (only with state_checkpoints): also written, U = (I + M)^-1 (W0 - KBA S) per
    token, the values the backward's grads kernel reads (frost_bwd's ``values``). HO = max(H, HV).
    write_output=False: only final_state is written (the span summaries): q and out must be
    None, and the kernel compiled without everything that serves the output runs
    (FrostFwdConfig.write_output); H is then operand_checks.queryless_heads.
    batch_invariant=True: one kernel whatever the batch's composition (otherwise GDN's
    bf16 forwards at K = V = 128 whose sequences average >= 512 tokens run the four-role
    kernel, the others the scaled chain: FrostFwdConfig.pipelined).
    All CUDA tensors on one device, contiguous, 16-byte aligned (4 for fp32/int32 operands). stream: a torch.cuda.Stream (None: the current
    one).
    Every call is checked (H200 host: ~48 us); with ``bind``, returns the BoundLaunch that
    repeats this launch for operands of the same layout without the checks (None when
    nothing was launched: N == 0). Any cu_seqlens table is safe (kernels/seq_bounds.py);
    ``strict_cu_seqlens`` (None: the CUDNN_STRICT_CU_SEQLENS environment variable) checks
    it on the device first and raises ValueError naming its first bad entry (one
    synchronisation).
    """
    import torch

    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, out=out,
                   initial_state=initial_state, final_state=final_state, state_checkpoints=state_checkpoints,
                   values=values)
    bound = bind_fwd(**tensors, scale=scale, use_l2norm=use_l2norm,
                     gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel,
                     write_output=write_output, batch_invariant=batch_invariant)
    if bound is None:
        return None
    if stream is None:
        stream = torch.cuda.current_stream(k.device)
    if strict_requested(strict_cu_seqlens):
        with torch.cuda.stream(stream):
            check_cu_seqlens(cu_seqlens, bound.T, "frost_fwd")
    bound.launch(tensors, stream)
    return bound if bind else None


def bind_fwd(*, q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state,
             scale: float, use_l2norm: bool, gate_per_channel: bool, beta_per_channel: bool,
             state_checkpoints=None, values=None, write_output: bool = True,
             batch_invariant: bool = False) -> BoundLaunch | None:
    """frost_fwd's checks and kernel lookup without the launch: the BoundLaunch for
    operands laid out like these (None when N == 0: there is nothing to launch)."""
    launch = check_operands(
        q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, out=out,
        initial_state=initial_state, final_state=final_state, use_l2norm=use_l2norm,
        gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel,
        state_checkpoints=state_checkpoints, values=values, write_output=write_output,
        batch_invariant=batch_invariant)
    lead = q if write_output else k  # the operand the others' device is checked against
    if lead.device.type != "cuda":
        raise _fail("q" if write_output else "k", "a CUDA tensor (and every other operand on its device)",
                    lead.device)
    if launch.N == 0:
        return None
    return BoundLaunch(launch.config, _compiled(launch.config, device_arch(lead.device), device=lead.device),
                       operand_signature(launch.tensors), launch.T, launch.N, float(scale))


def operand_signature(tensors: dict) -> tuple:
    """Everything check_operands reads off the operands (by ABI name, None when absent):
    dims, strides, dtype, device and the base address modulo 16 (which decides every
    alignment check and gate_align16)."""
    return tuple(None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() & 15)
                 for t in map(tensors.get, (*OPERANDS, CHECKPOINT_OPERAND, VALUES_OPERAND)))


@dataclasses.dataclass(frozen=True)
class BoundLaunch:
    """One checked frost_fwd launch, held by a caller that repeats it (bind_fwd: the
    engine's direct launch, kept by the torch ops' cached graph; the benchmarks).
    Operands with the same ``operand_signature`` pass the same checks and derive the same
    config, so ``launch`` goes straight to the compiled kernel; the caller owes operands
    of that layout (``matches`` tells) and falls back to frost_fwd otherwise."""

    config: FrostFwdConfig
    kernel: object  # compiled_kernel.CompiledKernel
    signature: tuple
    T: int
    N: int
    scale: float

    def matches(self, tensors: dict) -> bool:
        return operand_signature(tensors) == self.signature

    def launch(self, tensors: dict, stream) -> None:
        """Run the kernel on ``tensors`` (by ABI name) on a torch.cuda.Stream."""
        self.kernel.launch(tensors, self.T, self.N, self.scale, stream)

    def pointer_launch(self, names: tuple):
        """``launch(addresses, stream_handle)`` for the base addresses of the ABI operands
        ``names`` (in that order; the other operands absent), buffers laid out as this
        launch's, and a raw stream handle; None unless the kernel takes TVM-FFI's plain
        ints. No checks."""
        if self.kernel.ffi != "tvm":
            return None
        operands = abi_operands(self.config)
        slots = tuple(operands.index(name) for name in names)
        width, fn, tail = len(operands), self.kernel.fn, (self.T, self.N, self.scale)

        def launch(addresses, stream: int) -> None:
            args = [0] * width
            for slot, address in zip(slots, addresses):
                args[slot] = address
            fn(*args, *tail, stream)
        return launch

    def buffer_launch(self, names: tuple):
        """``launch(tensors, stream_handle)``: the same for torch tensors of the ABI operands
        ``names`` (in that order), for kernels in either calling convention. No checks."""
        kernel, tail = self.kernel, (self.T, self.N, self.scale)

        def launch(tensors, stream: int) -> None:
            kernel.launch(dict(zip(names, tensors)), *tail, _RawStream(stream))
        return launch


class _RawStream:
    """A raw CUDA stream handle where a launch reads ``stream.cuda_stream``."""

    __slots__ = ("cuda_stream",)

    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle


@dataclasses.dataclass(frozen=True)
class CheckedLaunch:
    config: FrostFwdConfig
    tensors: dict
    T: int
    N: int


def check_operands(*, q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state, use_l2norm,
                   gate_per_channel, beta_per_channel, state_checkpoints=None,
                   values=None, write_output: bool = True, batch_invariant: bool = False) -> CheckedLaunch:
    """Every operand check of frost_fwd except the CUDA-device one (so CPU tests reach them);
    returns the static config and the operands by ABI name. write_output=False: q and out
    must be None (and final_state given; no checkpoints). batch_invariant: the kernel may
    not depend on the batch's composition, so the config is never `pipelined` (a choice
    made from the launch's average sequence length, and only for configs where it selects
    a kernel: compile_kernel.four_roles_possible)."""
    for name, flag in (("write_output", write_output), ("batch_invariant", batch_invariant)):
        if not isinstance(flag, bool):
            raise _fail(name, "True or False", repr(flag))
    d = check_token_operands(WHO, q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens,
                             out=out, gate_per_channel=gate_per_channel,
                             beta_per_channel=beta_per_channel, queryless=not write_output)
    T, H, HK, HV, HO, K, V, N, io, device = (d.T, d.H, d.HK, d.HV, d.HO, d.K, d.V, d.N, d.io,
                                             d.device)
    state_dtype = None
    for name, st in (("initial_state", initial_state), ("final_state", final_state)):
        if st is None:
            continue
        _check(name, st, (N, HO, V, K), ("float32", "bfloat16") if state_dtype is None else (state_dtype,), device)
        state_dtype = _dtype_name(st)
    if state_checkpoints is not None:
        _check("state_checkpoints", state_checkpoints, (checkpoint_rows(T, N), HO, V, K), ("bfloat16",), device)
        if checkpoint_rows(T, N) * HO * V * K >= _INDEX_LIMIT:
            raise _fail("state_checkpoints", f"smaller than {_INDEX_LIMIT} elements (32-bit offsets)",
                        list(state_checkpoints.shape))
    if values is not None:
        if state_checkpoints is None:
            raise _fail("values", "None unless state_checkpoints is given (U is written by the kernel that "
                        "writes the checkpoints)", f"a tensor of dims {list(values.shape)}")
        _check("values", values, (T, HO, V), ("bfloat16",), device)
    if T * HO * max(K, V) >= _INDEX_LIMIT or N * HO * V * K >= _INDEX_LIMIT:
        raise _fail("q", f"small enough for 32-bit offsets (T*HO*max(K,V) and N*HO*V*K < {_INDEX_LIMIT})",
                    f"T={T}, N={N}, HO={HO}, K={K}, V={V}")
    fields = dict(
        io_dtype=io, state_dtype=state_dtype, H=H, HK=HK, HV=HV, K=K, V=V,
        gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel, has_w=beta_per_channel,
        use_l2norm=use_l2norm, has_initial_state=initial_state is not None,
        has_final_state=final_state is not None,
        gate_align16=gate_per_channel and g.data_ptr() % 16 == 0,
        write_checkpoints=state_checkpoints is not None, write_values=values is not None,
        write_output=write_output,
    )
    # `pipelined` only where it selects a kernel: elsewhere a long and a short batch would
    # key two compiled copies of one kernel (the fields, read as attributes, answer
    # four_roles_possible before the one config of the call is built)
    fields["pipelined"] = (not batch_invariant and T >= PIPELINE_MIN_TOKENS * N
                           and four_roles_possible(types.SimpleNamespace(**fields)))
    try:
        cfg = FrostFwdConfig(**fields)
    except ValueError as e:
        raise ValueError(f"frost_fwd: unsupported operands: {e}") from None
    from cudnn.linear_attention.frost.kernels.config import operand_alignment

    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, out=out,
                   initial_state=initial_state, final_state=final_state, state_checkpoints=state_checkpoints,
                   values=values)
    for name, align in operand_alignment(cfg).items():
        t = tensors[name]
        if t is not None and t.numel() and t.data_ptr() % align:
            raise _fail(name, f"{align}-byte aligned", f"address {t.data_ptr():#x}")
    return CheckedLaunch(cfg, tensors, T, N)
