"""Launcher of the FROST recurrent (decode) kernel: operand checks, compile cache, launch.

``bind_decode`` checks every operand once (ValueError naming the argument), derives the
FrostDecodeConfig, gets the compiled kernel for it (once per config, arch and calling
convention per process; thread-safe) and returns a ``DecodeLaunch`` that repeats the launch
for operands of the same layout without checks: no host synchronisation, no allocation,
nothing looked up, so a launch can be captured in a CUDA graph and replayed with other
buffer contents. ``frost_decode`` is bind + launch. Never reads cu_seqlens or
state_indices on the host. Imports neither torch nor cutlass at import time.

Kernels come from the kernel cache (kernel_store.py: per user by default, FROST_KERNEL_CACHE
moves it; filled ahead of time by `python -m cudnn precompile` or tools/gpu/
frost_precompile.py --suites decode), else from a CuTe DSL compile (decode_compile.py),
which is then added to that cache.
"""
from __future__ import annotations

import dataclasses
import threading

from cudnn.linear_attention.common.switches import binary_switch
from cudnn.linear_attention.frost.kernels import kernel_store
from cudnn.linear_attention.frost.kernels.compile_kernel import preferred_ffi
from cudnn.linear_attention.frost.kernels.decode_compile import compile_decode
from cudnn.linear_attention.frost.kernels.operand_checks import check, check_token_operands, dtype_name, fail
from cudnn.linear_attention.frost.kernels.decode_config import (DECODE_OPERANDS,
                                                                FrostDecodeConfig,
                                                                checkpoint_rows,
                                                                decode_operand_alignment)

_INDEX_LIMIT = 2**31
_cache: dict[tuple[FrostDecodeConfig, str, str], object] = {}
_cache_lock = threading.Lock()
WHO = "frost_decode"
#: 0 or 1 (common.switches.binary_switch: other values are a ValueError naming the variable),
#: read when a call looks up its kernel. Unset or "1": lanes hold contiguous channels (vector state accesses: decode_config's
#: contiguous_channels) where the operands are aligned for it (on the H200 1-5 % less time
#: per decode step than the element-wise map, NOTES_decode.md); "0": the element-wise map
CONTIGUOUS_ENV = "FROST_DECODE_VEC"
#: "1": 64 value rows per CTA where the grid still fills two waves of 3 CTAs per SM
#: (choose_block_v); off by default until measured (NOTES_decode.md, second knob)
WIDE_TILE_ENV = "FROST_DECODE_BV64"
_SMS = 132  # H200


def _fail(arg: str, expected: str, got) -> ValueError:
    return fail(WHO, arg, expected, got)


def _check(name, t, shape, dtypes, device):
    check(WHO, name, t, shape, dtypes, device)


def contiguous_channels_wanted() -> bool:
    return binary_switch(CONTIGUOUS_ENV, default=True)


def _misaligned(cfg: FrostDecodeConfig, tensors: dict) -> str | None:
    """The first operand whose address breaks cfg's alignment, None if all hold."""
    for name, align in decode_operand_alignment(cfg).items():
        t = tensors[name]
        if t is not None and t.numel() and t.data_ptr() % align:
            return name
    return None


def wide_tiles_wanted() -> bool:
    return binary_switch(WIDE_TILE_ENV, default=False)


def serving_block_vs() -> tuple[int, ...]:
    """The tiles choose_block_v can pick in this process (what precompiling covers)."""
    return (16, 32, 64) if wide_tiles_wanted() else (16, 32)


def choose_block_v(N: int, HO: int, V: int) -> int:
    """Value rows per CTA: 32 (8 rows per warp) unless that leaves under two CTAs per SM of
    an H200 (132 SMs), then 16 (more CTAs for small batches). Under FROST_DECODE_BV64, 64
    (16 rows per warp, 3 CTAs per SM: more state bytes in flight per CTA, half the CTAs'
    fixed work) where that still gives two full waves."""
    if wide_tiles_wanted() and V % 64 == 0 and N * HO * (V // 64) >= 2 * 3 * _SMS:
        return 64
    return 32 if N * HO * (V // 32) >= 2 * _SMS else 16


@dataclasses.dataclass(frozen=True)
class CheckedDecode:
    config: FrostDecodeConfig
    tensors: dict
    T: int
    N: int
    S: int


def check_decode_operands(*, q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state,
                          state_indices, a_log, dt_bias, checkpoints, family: str,
                          use_l2norm: bool, checkpoint_every: int = 0,
                          beta_sigmoid: bool = False, neg_eigval: bool = False,
                          safe_gate: bool = False, gate_lower_bound: float = -5.0,
                          linear_gate: bool = False, block_v: int | None = None,
                          contiguous_channels: bool | None = None) -> CheckedDecode:
    """Every operand check of frost_decode except the CUDA-device one (CPU tests reach them).

    q [T,H,K], k [T,HK,K], v [T,HV,V] (bf16 / fp16); g fp32 [T,HO] (GDN) or [T,HO,K];
    beta fp32 [T,HO], or io-dtype [T,HO,K] with w [T,HO,V] (GDN-2); cu_seqlens int32 [N+1];
    out [T,HO,V]; initial_state / final_state None or [S,HO,V,K] fp32 or bf16 (S = N
    without state_indices; may be one buffer); state_indices None or int32 [N];
    a_log fp32 [HO], dt_bias fp32 [HO] (GDN) or [HO,K] (only with safe_gate);
    checkpoints [max(T // n + N, 1),HO,V,K] io dtype or fp32 when checkpoint_every = n > 0.
    contiguous_channels (None: unless FROST_DECODE_VEC=0) asks for the vector channel layout; it is
    taken where K > 32 and the channel operands are aligned to its vectors, else the
    element-wise layout serves (the choice follows the addresses modulo 16, which the
    operand signature and a direct launch's alignment key already hold).
    """
    if family not in ("gdn", "kda", "gdn2"):
        raise _fail("family", "'gdn', 'kda' or 'gdn2'", repr(family))
    per_channel = family != "gdn"
    d = check_token_operands(WHO, q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens,
                             out=out, gate_per_channel=per_channel,
                             beta_per_channel=family == "gdn2", min_seqs=1)
    T, H, HK, HV, HO, K, V, N, io, device = (d.T, d.H, d.HK, d.HV, d.HO, d.K, d.V, d.N, d.io,
                                             d.device)
    state_dtype, S = None, N
    if state_indices is not None:
        _check("state_indices", state_indices, (N,), ("int32",), device)
        if initial_state is None and final_state is None:
            raise _fail("state_indices", "given only with initial_state or final_state (a pool)",
                        "no state buffer")
        S = (initial_state if initial_state is not None else final_state).shape[0]
    for name, st in (("initial_state", initial_state), ("final_state", final_state)):
        if st is None:
            continue
        dtypes = ("float32", "bfloat16") if state_dtype is None else (state_dtype,)
        _check(name, st, (S, HO, V, K), dtypes, device)
        state_dtype = dtype_name(st)
    for name, t, shape in (("a_log", a_log, (HO,)),
                           ("dt_bias", dt_bias, (HO, K) if per_channel else (HO,))):
        if t is None:
            continue
        if not safe_gate:
            raise _fail(name, "None unless safe_gate=True", list(t.shape))
        _check(name, t, shape, ("float32",), device)
    ck_dtype = None
    if checkpoint_every > 0:
        if checkpoints is None:
            raise _fail("checkpoints", f"a buffer when checkpoint_every = {checkpoint_every}", None)
        ck_dtype = dtype_name(checkpoints)
        _check("checkpoints", checkpoints, (checkpoint_rows(T, N, checkpoint_every), HO, V, K),
               ("float32", io), device)
    elif checkpoints is not None:
        raise _fail("checkpoints", "None unless checkpoint_every > 0", list(checkpoints.shape))
    if T * HO * max(K, V) >= _INDEX_LIMIT or max(S, 1) * HO * V * K >= _INDEX_LIMIT:
        raise _fail("q", f"small enough for 32-bit offsets (< {_INDEX_LIMIT} elements)",
                    f"T={T}, N={N}, S={S}, HO={HO}, K={K}, V={V}")
    try:
        cfg = FrostDecodeConfig(
            family=family, io_dtype=io, state_dtype=state_dtype, H=H, HK=HK, HV=HV, K=K, V=V,
            use_l2norm=use_l2norm, has_initial_state=initial_state is not None,
            has_final_state=final_state is not None, has_pool=state_indices is not None,
            checkpoint_every=checkpoint_every, checkpoint_dtype=ck_dtype,
            beta_sigmoid=beta_sigmoid, neg_eigval=neg_eigval, safe_gate=safe_gate,
            has_a_log=a_log is not None, has_dt_bias=dt_bias is not None,
            gate_lower_bound=float(gate_lower_bound), linear_gate=linear_gate,
            block_v=block_v or choose_block_v(N, HO, V))
    except ValueError as e:
        raise ValueError(f"{WHO}: unsupported operands: {e}") from None
    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, out=out,
                   initial_state=initial_state, final_state=final_state,
                   state_indices=state_indices, a_log=a_log, dt_bias=dt_bias,
                   checkpoints=checkpoints)
    bad = _misaligned(cfg, tensors)
    if bad is not None:
        align = decode_operand_alignment(cfg)[bad]
        raise _fail(bad, f"{align}-byte aligned", f"address {tensors[bad].data_ptr():#x}")
    if contiguous_channels is None:
        contiguous_channels = contiguous_channels_wanted()
    if contiguous_channels and K > 32:
        vec = dataclasses.replace(cfg, contiguous_channels=True)
        if _misaligned(vec, tensors) is None:
            cfg = vec
    return CheckedDecode(cfg, tensors, T, N, S)


def compiled_decode(cfg: FrostDecodeConfig, arch: str, ffi: str | None = None):
    """The compiled_kernel.CompiledKernel for cfg on arch: loaded or compiled once per
    process."""
    key = (cfg, arch, ffi or preferred_ffi())
    kernel = _cache.get(key)
    if kernel is None:
        with _cache_lock:
            kernel = _cache.get(key)
            if kernel is None:
                kernel = _cache[key] = _load_or_compile(*key)
    return kernel


def _load_or_compile(cfg: FrostDecodeConfig, arch: str, ffi: str, device=None):
    """From the active kernel cache (a kernel `python -m cudnn precompile --arch` built for
    any x86-64 host in the DSL's convention serves too), else compiled and added to it:
    kernel_store.load_or_compile, as the forward's launcher does."""
    return kernel_store.load_or_compile(cfg, arch, ffi, lambda: compile_decode(cfg, arch, ffi=ffi),
                                        device)


def bind_decode(*, arch: str | None = None, **operands) -> DecodeLaunch:
    """check_decode_operands' checks and the kernel lookup, without launching."""
    checked = check_decode_operands(**operands)
    q = checked.tensors["q"]
    if q.device.type != "cuda":
        raise _fail("q", "a CUDA tensor (and every other operand on its device)", q.device)
    from cudnn.linear_attention.frost.kernels.fwd import device_arch

    kernel = compiled_decode(checked.config, arch or device_arch(q.device))
    return DecodeLaunch(checked.config, kernel.fn, kernel.ffi, operand_signature(checked.tensors),
                        checked.T, checked.N, checked.S)


def frost_decode(*, scale: float, stream=None, **operands) -> DecodeLaunch:
    """Check, bind and launch on `stream` (a torch.cuda.Stream; None: the current one)."""
    import torch

    bound = bind_decode(**operands)
    q = operands["q"]
    if stream is None:
        stream = torch.cuda.current_stream(q.device)
    bound.launch({name: operands.get(name) for name in DECODE_OPERANDS}, scale,
                 stream.cuda_stream)
    return bound


def operand_signature(tensors: dict) -> tuple:
    """Everything the checks read off the operands (shape, strides, dtype, device, and the
    address modulo 16), in ABI order; None for an absent operand."""
    return tuple(None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() & 15)
                 for t in map(tensors.get, DECODE_OPERANDS))


@dataclasses.dataclass(frozen=True)
class DecodeLaunch:
    """One checked launch, repeated by a caller for operands of the same layout
    (``matches`` tells). ``launch`` marshals and calls; nothing else happens on the host."""

    config: FrostDecodeConfig
    fn: object
    ffi: str
    signature: tuple
    T: int
    N: int
    S: int
    #: the DSL's own convention ("cute"): typed pointer objects, reused per operand while
    #: its address repeats (built once per launch otherwise, ~2 us each)
    pointers: object = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.ffi != "tvm" and self.pointers is None:
            object.__setattr__(self, "pointers", _PointerCache(self.config))

    def matches(self, tensors: dict) -> bool:
        return operand_signature(tensors) == self.signature

    def launch(self, tensors: dict, scale: float, stream_handle: int) -> None:
        """Run on ``tensors`` (by ABI name; absent: None or no key) on a raw stream handle."""
        addresses = [0 if t is None else t.data_ptr() for t in map(tensors.get, DECODE_OPERANDS)]
        self.launch_addresses(addresses, scale, stream_handle)

    def launch_addresses(self, addresses, scale: float, stream_handle: int) -> None:
        """Run on base addresses in ABI order (0 for an absent operand)."""
        self.with_scale(scale)(addresses, stream_handle)

    def with_scale(self, scale: float):
        """``launch_addresses`` with the scale bound, as ``(addresses, stream_handle) ->
        None``: what a cached call repeats (TVM-FFI: the kernel called directly with the
        counts bound here; the DSL's convention: cached argument objects)."""
        fn, T, N, S, scale = self.fn, self.T, self.N, self.S, float(scale)
        if self.ffi == "tvm":
            return lambda addresses, stream_handle: fn(*addresses, T, N, S, scale, stream_handle)
        from cutlass import Float32, Int32

        pointers, tail = self.pointers, (Int32(T), Int32(N), Int32(S), Float32(scale))
        return lambda addresses, stream_handle: fn(*pointers(addresses), *tail,
                                                   pointers.stream(stream_handle))


class _PointerCache:
    """cute.Pointer per operand for the DSL's calling convention: dtypes and alignments
    resolved once, the last Pointer (and CUstream) kept while its address repeats, as the
    forward's launch_args.ArgPacker does."""

    def __init__(self, cfg: FrostDecodeConfig) -> None:
        from cudnn.linear_attention.frost.kernels.decode_config import (decode_operand_alignment,
                                                                        decode_operand_dtypes)
        from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype

        from cutlass.cute import AddressSpace
        from cutlass.cute.runtime import make_ptr

        align = decode_operand_alignment(cfg)
        self._specs = tuple((i, cutlass_dtype(dt), align[name])
                            for i, (name, dt) in enumerate(decode_operand_dtypes(cfg).items()))
        self._last: list = [(None, None)] * len(self._specs)
        self._stream = None
        self._make_ptr, self._gmem = make_ptr, AddressSpace.gmem

    def __call__(self, addresses) -> list:
        last, out = self._last, []
        for (i, dtype, align), address in zip(self._specs, addresses):
            cached = last[i]
            if cached[0] != address:
                # one list store: a racing thread at worst builds the pointer again (each
                # call uses the pair it read or made, never another call's)
                cached = last[i] = (address, self._make_ptr(dtype, address, self._gmem,
                                                            assumed_align=align))
            out.append(cached[1])
        return out

    def stream(self, handle: int):
        cached = self._stream
        if cached is None or cached[0] != handle:
            import cuda.bindings.driver as cuda

            cached = self._stream = (handle, cuda.CUstream(handle))
        return cached[1]
