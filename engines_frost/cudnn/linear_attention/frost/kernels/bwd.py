"""FROST backward launcher: operand checks, the workspace layout, the per-config compile
cache and the three launches (kernels/NOTES_bwd.md).

``frost_bwd`` is the one entry point the FROST engines call for gdn_bwd / kda_bwd /
gdn2_bwd. It checks every operand (ValueError naming the argument), carves its scratch
from the caller's workspace (``frost_bwd_workspace_size`` is exact), gets the three
kernels for the static config (compiled once per process, or loaded from the kernel
store), launches states (or, given the forward's state_checkpoints, values; given its U as
well, nothing) -> chain -> grads on the caller's stream, and sums dq/dk/dv over
their head groups when q/k/v heads are shared by several output heads. It never reads
cu_seqlens on the host (no synchronisation) and never allocates; launches are ordered on
one stream and every result is written by exactly one thread (no atomics), so two runs
give bitwise-identical gradients, and a sequence's results do not depend on the others
in the batch. ``bind_bwd`` does the checks, the layout and the kernel lookups once for a
caller that repeats a call (``BoundBwd``: the direct launches of the FROST backward plan
and of the backward summary). Imports neither torch nor cutlass at import time.
"""
from __future__ import annotations

import dataclasses
import threading

from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig, checkpoint_rows
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.workspace_regions import Region, carve, pack

_INDEX_LIMIT = 2**31

_cache: dict[tuple, object] = {}
_cache_lock = threading.Lock()


def workspace_layout(*, total_tokens: int, num_seqs: int, heads_q: int, heads_k: int, heads_v: int,
                     head_dim_k: int, head_dim_v: int,
                     checkpoints: bool = False, values: bool = False) -> tuple[tuple[Region, ...], int]:
    """The backward's scratch regions and their total size in bytes: per-chunk states
    (unless ``checkpoints``: the node's state_checkpoints input holds them) and state
    gradients [R, HO, V, K] (bf16, R = checkpoint_rows), U (unless ``values``: the
    forward's U input holds it) and dR [T, HO, V] (bf16), and fp32 per-output-head
    dq/dk/dv where their heads are grouped."""
    if values and not checkpoints:
        raise _fail("values", "False unless checkpoints (U is read together with the forward's states)", values)
    T, N, K, V = total_tokens, num_seqs, head_dim_k, head_dim_v
    HO = max(heads_q, heads_v)
    R = checkpoint_rows(T, N)
    want = [] if checkpoints else [("ckpt", (R, HO, V, K), "bfloat16")]
    want += [("dckpt", (R, HO, V, K), "bfloat16")]
    want += [] if values else [("u", (T, HO, V), "bfloat16")]
    want += [("dr", (T, HO, V), "bfloat16")]
    if heads_q != HO:
        want.append(("dq", (T, HO, K), "float32"))
    if heads_k != HO:
        want.append(("dk", (T, HO, K), "float32"))
    if heads_v != HO:
        want.append(("dv", (T, HO, V), "float32"))
    return pack(want)


def frost_bwd_workspace_size(**static_config) -> int:
    """Exact scratch bytes of the backward for a static configuration (workspace_layout's
    keywords)."""
    return workspace_layout(**static_config)[1]


class _Address:
    """A workspace region as a kernel launch reads an operand: its address only
    (CompiledKernel.args and launch_args.ArgPacker call data_ptr(), nothing else)."""
    __slots__ = ("_address",)

    def __init__(self, address: int):
        self._address = address

    def data_ptr(self) -> int:
        return self._address


#: the regions the host itself reads after the kernels (grouped heads' partial sums)
_PARTIALS = ("dq", "dk", "dv")


def _region_operands(workspace, regions, views=()) -> dict:
    """The workspace's regions as launch operands: an _Address each, torch views (carve)
    only for the names in `views`. Three torch view ops per region cost ~10-40 us of host
    time on every backward call; the kernels need the addresses alone."""
    base = workspace.data_ptr()
    out = {r.name: _Address(base + r.offset) for r in regions}
    wanted = [r for r in regions if r.name in views]
    if wanted:
        import torch

        out.update(carve(workspace.reshape(-1).view(torch.uint8), wanted))
    return out


def _compiled(cfg: FrostBwdConfig, arch: str, ffi: str, device=None):
    """One stage's kernel: loaded or compiled once per process (kernel_store.py)."""
    key = (cfg, arch, ffi)
    fn = _cache.get(key)
    if fn is None:
        with _cache_lock:
            fn = _cache.get(key)
            if fn is None:
                from cudnn.linear_attention.frost.kernels import kernel_store
                from cudnn.linear_attention.frost.kernels.bwd_compile import compile_bwd

                fn = kernel_store.load_or_compile(
                    cfg, arch, ffi, lambda: compile_bwd(cfg, arch, ffi=ffi), device)
                _cache[key] = fn
    return fn


def _fail(arg: str, expected: str, got) -> ValueError:
    return ValueError(f"frost_bwd: {arg} must be {expected}, got {got}")


def _check_grad(name, t, shape, dtypes, device):
    from cudnn.linear_attention.frost.kernels.fwd import _check

    if t is None:
        raise _fail(name, f"a {list(shape)} tensor", None)
    _check(name, t, shape, dtypes, device, who="frost_bwd")


def check_bwd_operands(*, q, k, v, g, beta, w, cu_seqlens, dO, initial_state, d_final_state, dq, dk, dv, dg,
                       dbeta, dw, d_initial_state, use_l2norm, gate_per_channel, beta_per_channel,
                       state_checkpoints=None, values=None, batch_invariant: bool = False):
    """Every operand check of frost_bwd except the CUDA-device one; returns the config
    (the first stage of its path) and T, N. Its fwd is the config the user's forward had
    (check_operands, batch_invariant included): its `pipelined` picks the recompute path's
    states kernel as it picked the forward's (recompute_configs); every backward kernel
    drops it (FrostBwdConfig.with_stage)."""
    from cudnn.linear_attention.frost.kernels.fwd import _dtype_name, check_operands

    try:  # the forward's operands pass the forward's checks (dO as the output it mirrors)
        launch = check_operands(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, out=dO,
                                initial_state=initial_state, final_state=None, use_l2norm=use_l2norm,
                                gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel,
                                batch_invariant=batch_invariant)
    except ValueError as e:
        raise ValueError(str(e).replace("frost_fwd: out ", "frost_bwd: dO ")
                         .replace("frost_fwd:", "frost_bwd:")) from None
    f = launch.config
    T, N, device = launch.T, launch.N, q.device
    io = f.io_dtype
    HO = f.HO
    _check_grad("dq", dq, tuple(q.shape), (io,), device)
    _check_grad("dk", dk, tuple(k.shape), (io,), device)
    _check_grad("dv", dv, tuple(v.shape), (io,), device)
    _check_grad("dg", dg, tuple(g.shape), ("float32",), device)
    _check_grad("dbeta", dbeta, tuple(beta.shape), (_dtype_name(beta),), device)
    if beta_per_channel:
        _check_grad("dw", dw, (T, HO, f.V), (io,), device)
    elif dw is not None:
        raise _fail("dw", "None unless beta_per_channel (GDN-2)", list(dw.shape))
    states = ("float32", "bfloat16")
    if d_final_state is not None:
        _check_grad("d_final_state", d_final_state, (N, HO, f.V, f.K), states, device)
    if (d_initial_state is None) != (initial_state is None):
        raise _fail("d_initial_state", "given exactly when initial_state is (the kernels write it then)",
                    None if d_initial_state is None else list(d_initial_state.shape))
    if d_initial_state is not None:
        _check_grad("d_initial_state", d_initial_state, (N, HO, f.V, f.K), states, device)
    R = checkpoint_rows(T, N)
    if state_checkpoints is not None:
        _check_grad("state_checkpoints", state_checkpoints, (R, HO, f.V, f.K), ("bfloat16",), device)
    if R * HO * f.V * f.K >= _INDEX_LIMIT:
        raise _fail("q", f"small enough for 32-bit offsets of the state workspace (R*HO*V*K < {_INDEX_LIMIT})",
                    f"R={R}, HO={HO}, K={f.K}, V={f.V}")
    if values is not None:
        if state_checkpoints is None:
            raise _fail("values", "None unless state_checkpoints is given (the forward writes U with them)",
                        list(values.shape))
        _check_grad("values", values, (T, HO, f.V), ("bfloat16",), device)
    with_checkpoints = state_checkpoints is not None
    with_values = values is not None
    cfg = FrostBwdConfig(
        fwd=f, stage="chain" if with_values else "values" if with_checkpoints else "states",
        dht_dtype=None if d_final_state is None else _dtype_name(d_final_state),
        dh0_dtype=None if d_initial_state is None else _dtype_name(d_initial_state),
        checkpoints=with_checkpoints, forward_values=with_values, grads_ctas=_sm_count(device),
        **product_choice(f))
    return cfg, T, N


# ---- the product's kernel choice ------------------------------------------------------------
# The one place the launcher picks its backward kernels: check_bwd_operands and
# recompute_configs ask these two functions, by their module-level names, and read no
# environment. The test and bench tooling (engines_frost/tests/frost_bwd_experiments.py,
# use_bwd_variants) wraps them to build its experiment variants, as frost_fwd_experiments
# wraps fwd._compiled; FrostBwdConfig keeps the experiments' fields so that it can.
# Why these picks (kernels/NOTES_bwd.md has the runs): GDN's four-role chain, fwd+bwd
# -3.4 % (recompute) / -2.6 % (checkpoints) against the scaled chain on the H200, which had
# been -12 % chain against the folded one; the wgmma grads and their L2 prefetch, faster on
# the H200 and the H100. KDA / GDN-2: the wgmma chain, -10 % chain on the H100 (its async
# schedule flat for KDA on the H200); dO staged and the rows by bulk copies, fwd+bwd -3 to
# -4 % on the H100; the grads' wide loads and fused decay, KDA fwd+bwd -1.5 to -2 % and -5 %
# on the H200, their tf32 adjoints, KDA grads -4 % (H100); their bulk load phase -0.03 to
# -0.05 ms for GDN-2 but +0.065 ms for KDA (H100); their state products on wgmma no faster
# on the H200, so mma.sync.


def product_choice(f: FrostFwdConfig) -> dict:
    """The kernel-choice fields of the FrostBwdConfig the product builds for the forward
    config f (FrostBwdConfig's comments and kernels/NOTES_bwd.md give each one's reason).
    Scalar gates (GDN): the wgmma chain with its dS update retired under the next chunk's
    rows, with bf16 io the decays as per-token factors, and at K = V = 128 that chain in
    four warp roles on raw rows with the inverse applied in the chain (bwd_chain_ws4.
    FrostBwdChainWs4RawInChain); the wgmma grads with their L2 prefetch. Vector gates (KDA,
    GDN-2): the synchronous wgmma chain with its next rows by bulk copies and, where K >= V,
    dO staged in shared memory; the mma.sync grads with wide loads, the fused decay and the
    tf32 score adjoints, their load phase by bulk copies for GDN-2 only (slower for KDA)."""
    vector = f.gate_per_channel
    scaled = not vector and f.io_dtype == "bfloat16"
    four_roles = scaled and (f.K, f.V) == (128, 128)
    return dict(
        chain_pipeline=False, chain_wgmma=True, chain_async=not vector, chain_scaled=scaled,
        chain_ws=four_roles, chain_wy=four_roles, chain_ws4=four_roles, chain_a_in_chain=four_roles,
        chain_raw_rows=four_roles, chain_ws_regs=(),
        chain_staged_do=vector and f.K >= f.V, chain_bulk_rows=vector,
        grads_wgmma=not vector, grads_prefetch=not vector,
        vec_wide_loads=vector, vec_fast_decay=vector, vec_tf32_adjoints=vector,
        vec_bulk_copies=vector and f.beta_per_channel)


def recompute_on_forward(cfg: FrostBwdConfig) -> bool:
    """Whether a recompute path call (cfg: its checked config) runs its states stage on the
    forward kernel (recompute_configs): the product's always, since its H200 run
    (kernels/NOTES_bwd.md); the backward's own states kernel is a tooling variant."""
    return True


_sm_counts: dict = {}


def _sm_count(device) -> int:
    """The persistent grads grid for `device`: its SM count (a CUDA device), else the
    ahead-of-time default (bwd_config.DEFAULT_GRADS_CTAS)."""
    from cudnn.linear_attention.frost.kernels.bwd_config import DEFAULT_GRADS_CTAS

    if getattr(device, "type", None) != "cuda":
        return DEFAULT_GRADS_CTAS
    import torch

    index = torch.cuda.current_device() if device.index is None else device.index
    n = _sm_counts.get(index)
    if n is None:
        n = _sm_counts[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return n


def frost_bwd(*, q, k, v, g, beta, w, cu_seqlens, dO, initial_state, d_final_state, dq, dk, dv, dg, dbeta, dw,
              d_initial_state, workspace, scale: float, use_l2norm: bool, gate_per_channel: bool,
              beta_per_channel: bool, stream, stages: tuple[str, ...] | None = None,
              strict_cu_seqlens: bool | None = None, state_checkpoints=None, values=None,
              batch_invariant: bool = False) -> None:
    """Gradients of the chunked linear-attention forward (GDN / KDA / GDN-2), written into
    dq [T,H,K], dk [T,HK,K], dv [T,HV,V] (io dtype), dg like g, dbeta like beta, dw (GDN-2)
    and d_initial_state [N,HO,V,K] (exactly when initial_state is given). Inputs as
    frost_fwd plus dO [T,HO,V] (io dtype) and d_final_state [N,HO,V,K] (fp32 or bf16, or
    None). state_checkpoints: None, or the bf16 [T // 64 + N, HO, V, K] checkpoints the
    forward wrote (checkpoints.py); then kernel 1 is ``values`` (U from them, chunks in
    parallel) instead of ``states`` (the serial recompute), and the workspace has no
    state region. values: None, or the bf16 [T, HO, V] U the forward wrote with those
    checkpoints (frost_fwd's values); then neither states nor values runs (chain -> grads)
    and the workspace has no U region either. workspace: a uint8 CUDA tensor of at least frost_bwd_workspace_size
    bytes (with checkpoints=True when they are given, values=True when U is). ``stages`` (benchmarks) launches a
    subset of the path's kernels (FrostBwdConfig.stages, None: all); each later stage reads
    what an earlier full call left in the workspace. Any cu_seqlens table is safe
    (kernels/seq_bounds.py: gradient rows no sequence covers are zero); ``strict_cu_seqlens``
    (None: the CUDNN_STRICT_CU_SEQLENS environment variable) checks it on the device first
    and raises ValueError naming its first bad entry (one synchronisation).
    batch_invariant: as frost_fwd's; the recompute path's states stage (the forward kernel)
    then never takes the long-sequence kernel, so a sequence's gradients do not depend on
    the batch around it."""
    import torch

    from cudnn.linear_attention.common.cu_seqlens_check import check_cu_seqlens, strict_requested

    # one home for the checks, the layout, the launch order and the head-group sums: the
    # bound call a direct launch keeps, here bound and run once (bitwise the same work)
    operands = dict(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, dO=dO,
                    initial_state=initial_state, d_final_state=d_final_state, dq=dq, dk=dk, dv=dv,
                    dg=dg, dbeta=dbeta, dw=dw, d_initial_state=d_initial_state,
                    state_checkpoints=state_checkpoints, values=values)
    bound = _bind(operands, workspace=workspace, scale=scale, use_l2norm=use_l2norm,
                  gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel, stages=stages,
                  batch_invariant=batch_invariant)
    if bound is None:
        return
    if stream is None:
        stream = torch.cuda.current_stream(q.device)
    if strict_requested(strict_cu_seqlens):
        with torch.cuda.stream(stream):
            check_cu_seqlens(cu_seqlens, bound.T, "frost_bwd")
    bound.launch(operands, workspace, stream.cuda_stream)


def _sum_head_groups(ws: dict, T: int, **grads) -> None:
    """dq / dk / dv (``grads``, the caller's [T, heads, D] results) as the sums over their
    head groups of the fp32 per-output-head partials the grads kernel wrote into the
    workspace regions of the same names (layouts without such a region: nothing to do).
    On torch's current stream; BoundBwd.launch ends with it (frost_bwd's calls and the
    direct launches alike)."""
    for name, out in grads.items():
        part = ws.get(name)
        if part is not None and T:
            out.copy_(part.view(T, out.shape[1], part.shape[1] // out.shape[1], -1).sum(2))


def _require_cuda(q) -> None:
    if q.device.type != "cuda":
        raise _fail("q", "a CUDA tensor (and every other operand on its device)", q.device)


def _regions(cfg: FrostBwdConfig, T: int, N: int):
    f = cfg.fwd
    return workspace_layout(total_tokens=T, num_seqs=N, heads_q=f.H, heads_k=f.HK, heads_v=f.HV,
                            head_dim_k=f.K, head_dim_v=f.V, checkpoints=cfg.checkpoints,
                            values=cfg.forward_values)


def _check_workspace(workspace, size: int) -> None:
    if workspace is None or workspace.numel() * workspace.element_size() < size:
        got = None if workspace is None else workspace.numel() * workspace.element_size()
        raise _fail("workspace", f"at least {size} bytes", got)


def _launch_tensors(cfg: FrostBwdConfig, ws: dict, *, q, k, v, g, beta, w, cu_seqlens, dO, initial_state,
                    d_final_state, dq, dk, dv, dg, dbeta, dw, d_initial_state, state_checkpoints,
                    values) -> dict:
    """The kernels' operands by ABI name: the caller's buffers and the carved workspace
    regions (dq/dk/dv partials where the layout has them, the states, U, the chain's)."""
    return dict(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, dO=dO, initial_state=initial_state,
                d_final_state=d_final_state, dq=ws.get("dq", dq), dk=ws.get("dk", dk), dv=ws.get("dv", dv),
                dg=dg, dbeta=dbeta, dw=dw, d_initial_state=d_initial_state,
                ckpt=state_checkpoints if cfg.checkpoints else ws["ckpt"], dckpt=ws["dckpt"],
                u=values if cfg.forward_values else ws["u"], dr=ws["dr"])


def _stage_kernels(cfg: FrostBwdConfig, stages, device) -> tuple:
    """The compiled kernels of the path's stages in `stages` (None: all), in launch order
    (stage_configs: a forward config is the output-free forward as the states stage)."""
    from cudnn.linear_attention.frost.kernels import fwd
    from cudnn.linear_attention.frost.kernels.compile_kernel import preferred_ffi

    arch, ffi = fwd.device_arch(device), preferred_ffi()
    return tuple(_compiled(config, arch, ffi, device) if isinstance(config, FrostBwdConfig)
                 else ForwardStates(fwd._compiled(config, arch, ffi, device))
                 for config in stage_configs(cfg, stages))


def stage_configs(cfg: FrostBwdConfig, stages=None) -> tuple:
    """The kernel configs of a call's stages in `stages` (None: all), in launch order: a
    FrostBwdConfig per stage, except that a recompute path call that runs its states stage
    runs recompute_configs' kernels (its states stage
    a FrostFwdConfig); a call of some stages without states (the backward summary's chain
    alone) keeps the path's own kernels. What the launcher compiles and what precompile
    lists (frost_configs.py)."""
    runs_states = stages is None or "states" in stages
    on_forward = (recompute_configs(cfg) if runs_states else None) or {}
    return tuple(on_forward.get(stage) or cfg.with_stage(stage) for stage in cfg.stages
                 if stages is None or stage in stages)


def recompute_configs(cfg: FrostBwdConfig) -> dict | None:
    """Where recompute_on_forward (the product: always), for a call on the recompute path
    (no checkpoints from the forward): the kernels that replace the states kernel's work, by
    stage. "states": the forward kernel compiled with write_checkpoints and write_values
    and without its output (no q, no o, no final state), which writes the per-chunk bf16
    states and U into the workspace regions the states kernel fills, in the same layout
    (checkpoints.py's packed rows; U per token); "chain": the chain kernel of the
    forward-values path, which zeroes the gradient rows no sequence covers (the states
    kernel's job on this path); "grads": the checkpoint paths' grads kernel, which reads
    the states at the forward's packed rows (the states kernel writes chunk j of sequence
    n at row cu[n] // 64 + n + j instead: the two differ once a sequence starts off a
    chunk boundary or is empty). None otherwise (the checkpoint paths, or a tooling
    run on the states kernel). U and the states come from the forward's chain, so the gradients are within
    rounding of the states kernel's, not bitwise (as the training path's)."""
    if cfg.checkpoints or not recompute_on_forward(cfg):
        return None
    forward = dataclasses.replace(cfg.fwd, has_final_state=False, write_checkpoints=True,
                                  write_values=True, write_output=False)
    chain = dataclasses.replace(cfg, stage="chain", forward_values=True).with_stage("chain")
    grads = dataclasses.replace(cfg, stage="grads", checkpoints=True).with_stage("grads")
    return {"states": forward, "chain": chain, "grads": grads}


@dataclasses.dataclass(frozen=True)
class ForwardStates:
    """The output-free training forward as the backward's states stage: launched with the
    backward's operands by ABI name (its state_checkpoints and values are the workspace's
    ckpt and u regions; q and out are absent, no final state)."""
    kernel: object  # compiled_kernel.CompiledKernel of recompute_configs' "states" config

    def launch(self, tensors: dict, T: int, N: int, scale: float, stream) -> None:
        forward = {name: tensors[name] for name in ("k", "v", "g", "beta", "w", "cu_seqlens",
                                                      "initial_state")}
        self.kernel.launch({**forward, "state_checkpoints": tensors["ckpt"], "values": tensors["u"]},
                           T, N, scale, stream)


@dataclasses.dataclass(frozen=True)
class BoundBwd:
    """Kernel stages of one checked frost_bwd call: what frost_bwd runs once, and what a
    caller that repeats the call keeps (bind_bwd: the FROST backward plan's and the FROST
    summary's direct launches).
    `launch` carves the workspace, launches the stages with no checks and, when the bound
    stages end with the grads and the layout has per-head partials (grouped heads), sums
    them into dq / dk / dv; the caller owes operands laid out as the
    bound call's and a workspace of at least its size (as BoundLaunch's callers do)."""
    cfg: FrostBwdConfig
    T: int
    N: int
    regions: tuple
    kernels: tuple
    scale: float
    #: the grads stage is bound and the layout has dq / dk / dv partial regions
    sums: bool = False

    def launch(self, operands: dict, workspace, stream: int) -> None:
        """Run the stages on ``operands`` (frost_bwd's names, state_checkpoints and values
        included) on the raw CUDA stream handle ``stream``."""
        import torch

        from cudnn.linear_attention.frost.kernels.fwd import _RawStream

        ws = _region_operands(workspace, self.regions, _PARTIALS if self.sums else ())
        tensors = _launch_tensors(self.cfg, ws, **operands)
        handle = _RawStream(stream)
        for kernel in self.kernels:
            kernel.launch(tensors, self.T, self.N, self.scale, handle)
        if self.sums:
            grads = {name: operands[name] for name in _PARTIALS}
            if _is_current(operands["dq"].device, stream):
                _sum_head_groups(ws, self.T, **grads)
                return
            # torch queues the sums on its current stream, and they must follow the grads
            # kernel on `stream`: point torch at that stream for them (ExternalStream wraps
            # the handle, it creates nothing). The op's launch lane passes torch's current
            # stream, so it never pays for the wrapper.
            with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=operands["dq"].device)):
                _sum_head_groups(ws, self.T, **grads)


def _is_current(device, stream: int) -> bool:
    """Whether the raw handle ``stream`` is torch's current stream on ``device`` (a
    non-CUDA device has no streams: always)."""
    if device.type != "cuda":
        return True
    import torch

    return torch._C._cuda_getCurrentRawStream(device.index) == stream


def bind_bwd(*, workspace, scale: float, use_l2norm: bool, gate_per_channel: bool,
             beta_per_channel: bool, stages: tuple[str, ...] | None = None,
             batch_invariant: bool = False, **operands) -> BoundBwd | None:
    """frost_bwd's checks, workspace layout and kernel lookups without the launches, for
    operands (frost_bwd's names: q ... d_initial_state, state_checkpoints and values) and a
    workspace laid out like these, `stages` only (None: every stage of the path, as
    frost_bwd); None when there is nothing to launch (N == 0). The bound launch ends with
    frost_bwd's head-group sums where its stages include the grads."""
    return _bind(operands, workspace=workspace, scale=scale, use_l2norm=use_l2norm,
                 gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel, stages=stages,
                 batch_invariant=batch_invariant)


def _bind(operands: dict, *, workspace, scale: float, use_l2norm: bool, gate_per_channel: bool,
          beta_per_channel: bool, stages, batch_invariant: bool = False) -> BoundBwd | None:
    """bind_bwd's work (frost_bwd binds through here, so that a caller counting bind_bwd's
    calls sees only the direct launches' binds)."""
    cfg, T, N = check_bwd_operands(**operands, use_l2norm=use_l2norm,
                                   gate_per_channel=gate_per_channel,
                                   beta_per_channel=beta_per_channel, batch_invariant=batch_invariant)
    _require_cuda(operands["q"])
    if N == 0:
        return None
    regions, size = _regions(cfg, T, N)
    _check_workspace(workspace, size)
    sums = (stages is None or "grads" in stages) and any(r.name in ("dq", "dk", "dv") for r in regions)
    return BoundBwd(cfg, T, N, regions, _stage_kernels(cfg, stages, operands["q"].device),
                    float(scale), sums)
