"""Which FROST kernels a public op call launches, and compiling them into the kernel cache
without a GPU (`python -m cudnn precompile --arch`).

`call_configs(op, args, ...)` takes the keyword arguments of a public function
(gated_delta_net, kimi_delta_attention, gated_delta_net_v2) as CPU tensors and derives,
through the launchers' own checks (fwd.check_operands, bwd.check_bwd_operands), the
forward config and, with `backward`, the three backward stage configs that the FROST
engines would launch for tensors laid out like those: the forward, with an fp32 final
state when the call asks for one; the backward with and without
an fp32 gradient of the final state; for bf16 training calls also the forwards that write
state checkpoints (and U with them) and the backward stages that read them. Vector gates also get the config of a gate at an
address that is not 16-byte aligned. `serving_configs(op, args, ...)` derives the
recurrent (decode) kernel's configs that serving calls with state pools launch (decode.py).
`split_configs(op, args, spans=...)` derives those of the same call run as spans side by
side (torch_ops/README.md, "Long sequences on few heads"): the span summary's two forward
passes, the forward over all spans from their entering states and, with `backward`, the
backward summary's chain stage and the backward over all spans; the caller picks the span
length (the op's rule lives in torch_ops, which this layer does not import).
`compile_into_cache(cfg, arch)` cross-compiles one
config with host code for any x86-64 CPU in the DSL's own calling convention (what a
machine without the target GPU can build) and adds it to the active kernel cache, where
the launchers find it (kernel_store.load_or_compile).
"""
from __future__ import annotations

import dataclasses

from cudnn.linear_attention.frost.kernels import kernel_store

_OUTPUTS = ("o", "final_state")


def call_configs(op: str, args: dict, *, final_state: bool, l2norm: bool,
                 backward: bool) -> list:
    """The forward (and backward stage) configs for a call of family `op` with `args`."""
    import torch

    from cudnn.linear_attention.frost.kernels.bwd import check_bwd_operands, stage_configs
    from cudnn.linear_attention.frost.kernels.fwd import check_operands

    q, v, g, beta = args["q"], args["v"], args["g"], args["beta"]
    T, HO, V, K = q.shape[0], max(q.shape[1], v.shape[1]), v.shape[2], q.shape[2]
    N = args["cu_seqlens"].numel() - 1
    h0 = args.get("initial_state")
    flags = dict(use_l2norm=l2norm, gate_per_channel=g.dim() == 3,
                 beta_per_channel=beta.dim() == 3)
    inputs = {name: args.get(name) for name in ("q", "k", "v", "g", "beta", "w", "cu_seqlens")}
    fwd = check_operands(**inputs, out=torch.empty(T, HO, V, dtype=q.dtype), initial_state=h0,
                         final_state=torch.empty(N, HO, V, K) if final_state else None, **flags).config
    found = [fwd]
    if backward:
        grads = {"dq": torch.empty_like(q), "dk": torch.empty_like(args["k"]),
                 "dv": torch.empty_like(v), "dg": torch.empty_like(g),
                 "dbeta": torch.empty_like(beta),
                 "dw": torch.empty_like(args["w"]) if args.get("w") is not None else None,
                 "d_initial_state": torch.empty_like(h0) if h0 is not None else None}
        # a bf16 training call on FROST keeps the state checkpoints the forward writes
        # (torch_ops/README.md): that forward, and the backward that reads them
        training = q.dtype == torch.bfloat16
        for dht in ((None, torch.empty(N, HO, V, K)) if final_state else (None,)):
            ckpt = torch.empty(T // 64 + N, HO, V, K, dtype=torch.bfloat16)
            values = torch.empty(T, HO, V, dtype=torch.bfloat16)
            for saved in (((None, None), (ckpt, None), (ckpt, values)) if training else ((None, None),)):
                cfg, _, _ = check_bwd_operands(**inputs, dO=torch.empty(T, HO, V, dtype=q.dtype),
                                               initial_state=h0, d_final_state=dht, **grads,
                                               state_checkpoints=saved[0], values=saved[1], **flags)
                found += list(stage_configs(cfg))
        if training:
            found.append(dataclasses.replace(fwd, write_checkpoints=True))
            found.append(dataclasses.replace(fwd, write_checkpoints=True, write_values=True))
    if fwd.gate_per_channel and fwd.gate_align16:
        found.append(dataclasses.replace(fwd, gate_align16=False))
    return list(dict.fromkeys(found))


def split_configs(op: str, args: dict, *, spans: int, final_state: bool, l2norm: bool,
                  backward: bool, no_output: bool | None = None) -> list:
    """The configs a call of family `op` with `args` (as call_configs takes them) launches
    when it runs as `spans` spans side by side (torch_ops' _span_split.py; `spans`: the
    rows of its span table, N + T // span). Each launch's operands are built as the
    launcher that makes it builds them, on CPU tensors of the same layouts, and go through
    that launcher's own checks:
    - the span summary (summary.frost_summary over the span table, no initial state): the
      final-state-from-zero pass and the transition pass (identity initial state, v = 0 of
      width K), their fp32 states; with no_output (None: FROST_SUMMARY_NO_OUTPUT now, as a
      summary plan reads it when it is built) the write_output=False kernels;
    - the forward over all spans from their entering states (the call's initial-state
      dtype, else fp32), with the spans' final states when the call asks for its own;
    - with `backward` (the split backward, training calls without checkpoints): the
      backward summary's chain stage (summary.frost_summary_bwd: zero initial state, no
      final-state gradient) and every stage of the backward over all spans (entering
      states and leaving-state gradients given).
    Vector gates also get the forward configs of a gate that is not 16-byte aligned (the
    split hands every launch the call's own g)."""
    import torch

    from cudnn.linear_attention.frost.kernels import summary
    from cudnn.linear_attention.frost.kernels.bwd import check_bwd_operands, stage_configs
    from cudnn.linear_attention.frost.kernels.fwd import check_operands

    q, k, v, g, beta, w = (args.get(name) for name in ("q", "k", "v", "g", "beta", "w"))
    T, H, HK, HV = q.shape[0], q.shape[1], k.shape[1], v.shape[1]
    HO, V, K = max(H, HV), v.shape[2], q.shape[2]
    # the launchers read only the table's length (the kernels read its values)
    span_cu = torch.zeros(spans + 1, dtype=torch.int32)
    flags = dict(use_l2norm=l2norm, gate_per_channel=g.dim() == 3,
                 beta_per_channel=beta.dim() == 3)
    # the summary ops' states: fp32 for a 16-bit io dtype (_summary_checks.state_dtype_for)
    fp32 = torch.float32
    no_output = summary._resolve_no_output(no_output)

    def scratch(shape):  # the summary call's workspace, carved as the summary carves it
        regions, size = summary.summary_workspace_layout(shape)
        return summary._carve(torch.empty(size, dtype=torch.uint8), regions)

    found = []
    final0, transition = torch.empty(spans, HO, V, K, dtype=fp32), torch.empty(spans, HO, K, K, dtype=fp32)
    ws = scratch(summary._shape_of(False, T, spans, HO, HK, HV, K, V, k, final0, transition, g,
                                   beta, no_output=no_output))
    for _, operands in summary._forward_runs(
            ws, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=span_cu, initial_state=None,
            final_state=final0, transition=transition,
            beta_per_channel=flags["beta_per_channel"], no_output=no_output):
        found.append(check_operands(**operands, **flags, write_output=not no_output).config)
    h0 = args.get("initial_state")
    entering = torch.empty(spans, HO, V, K, dtype=h0.dtype if h0 is not None else fp32)
    inputs = dict(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=span_cu)
    found.append(check_operands(**inputs, out=torch.empty(T, HO, V, dtype=q.dtype),
                                initial_state=entering,
                                final_state=torch.empty_like(entering) if final_state else None,
                                **flags).config)
    if backward:
        dO = torch.empty(T, HO, V, dtype=q.dtype)
        d_entering = torch.empty(spans, HO, V, K, dtype=fp32)
        ws = scratch(summary._shape_of(True, T, spans, HO, HK, H, K, V, q, d_entering, None, g,
                                       beta))
        chain = summary._chain_operands(
            ws, q=q, k=k, g=g, beta=beta, cu_seqlens=span_cu, dO=dO, d_final_state=None,
            d_initial_state=d_entering, beta_per_channel=flags["beta_per_channel"],
            stand_in=summary.stand_in_heads(HK, H, HO))
        chain.pop("workspace")
        cfg, _, _ = check_bwd_operands(**chain, **flags)
        found.append(cfg.with_stage("chain"))  # frost_summary_bwd launches that stage alone
        grads = {"dq": torch.empty_like(q), "dk": torch.empty_like(k), "dv": torch.empty_like(v),
                 "dg": torch.empty_like(g), "dbeta": torch.empty_like(beta),
                 "dw": torch.empty_like(w) if w is not None else None,
                 "d_initial_state": torch.empty_like(entering)}
        cfg, _, _ = check_bwd_operands(**inputs, dO=dO, initial_state=entering,
                                       d_final_state=torch.empty_like(entering), **grads, **flags)
        found += list(stage_configs(cfg))
    found += [dataclasses.replace(c, gate_align16=False) for c in found
              if not hasattr(c, "stage") and c.gate_per_channel and c.gate_align16]
    return list(dict.fromkeys(found))


def serving_configs(op: str, args: dict, *, l2norm: bool) -> list:
    """The recurrent (decode) kernel configs a server's serving calls of family `op` launch
    with tensors laid out like `args` (heads, K, V, io dtype and gate layout: a public
    function's keyword arguments, CPU tensors): a state pool [S, HO, V, K] read through
    state_indices and written back in place (overwrite_initial_state), in float32 and
    bfloat16, for each V tile decode.choose_block_v can pick (16 value rows per CTA for
    small batches, 32 otherwise, 64 under FROST_DECODE_BV64: decode.serving_block_vs), no in-kernel gates, derived through the launcher's own checks
    (decode.check_decode_operands) with the flags the decode engine passes."""
    import torch

    from cudnn.linear_attention.frost.kernels.decode import check_decode_operands, serving_block_vs

    q, v = args["q"], args["v"]
    T, HO, V, K = q.shape[0], max(q.shape[1], v.shape[1]), v.shape[2], q.shape[2]
    N = args["cu_seqlens"].numel() - 1
    inputs = {name: args.get(name) for name in ("q", "k", "v", "g", "beta", "w", "cu_seqlens")}
    found = []
    for state_dtype in (torch.float32, torch.bfloat16):
        pool = torch.empty(N + 1, HO, V, K, dtype=state_dtype)
        for block_v in serving_block_vs():
            found.append(check_decode_operands(
                **inputs, out=torch.empty(T, HO, V, dtype=q.dtype), initial_state=pool,
                final_state=pool, state_indices=torch.zeros(N, dtype=torch.int32), a_log=None,
                dt_bias=None, checkpoints=None, family=op, use_l2norm=l2norm,
                block_v=block_v).config)
    return list(dict.fromkeys(found))


def is_cached(store: kernel_store.KernelStore, cfg, arch: str) -> bool:
    """Whether the cache already has cfg's portable precompiled kernel for arch."""
    key = kernel_store.entry_key(cfg, arch, "cute", host=kernel_store.GENERIC_X86_64)
    return store.sidecar(key).is_file()


def compile_into_cache(cfg, arch: str) -> None:
    """Cross-compile cfg for arch (no GPU needed) and add it to the active kernel cache."""
    store = kernel_store.active_store()
    if store is None:
        raise RuntimeError(f"the FROST kernel cache is off ({kernel_store.STORE_ENV})")
    if hasattr(cfg, "stage"):
        from cudnn.linear_attention.frost.kernels.bwd_compile import compile_bwd as compile_fn
    elif hasattr(cfg, "block_v"):  # a decode_config.FrostDecodeConfig
        from cudnn.linear_attention.frost.kernels.decode_compile import compile_decode as compile_fn
    else:
        from cudnn.linear_attention.frost.kernels.compile_kernel import compile_fwd as compile_fn
    kernel = compile_fn(cfg, arch, host_target=kernel_store.GENERIC_X86_64, ffi="cute")
    store.save(cfg, arch, kernel)
