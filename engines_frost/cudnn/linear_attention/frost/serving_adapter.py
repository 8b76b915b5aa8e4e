"""Serving features for the chunked FROST forward, supplied around its kernel with torch.

The chunked kernel (kernels/fwd.py) reads log-domain float32 gates, betas as they are and
states [N, HO, V, K] indexed by sequence. A forward node with a state pool
(`state_indices`), `overwrite_initial_state`, `safe_gate` (with `a_log` / `dt_bias`),
`use_beta_sigmoid` / `allow_neg_eigval` or `gate_domain="linear"` runs the same kernel on
operands prepared here - the spec's pre-processing (§3) in float32, the pool rows gathered
into a per-sequence state - and its final states are scattered back into the pool. Only
device-side tensor operations, no host synchronisation: a slot outside [0, S) is masked
(read as a zero state, its output rows zeroed, nothing written), never looked at on the
host. This is the prefill side of serving (long sequences, where the chunked algebra wins);
decode steps take the recurrent engine (decode_engine.py), which does all of it in its
kernel. Costs over the plain kernel: one pass over the gates (and betas) when they are
transformed, one gather and one scatter of the served states when there is a pool.
"""
from __future__ import annotations

from typing import Any

LINEAR_GATE_FLOOR = 1e-10  # docs/LINEAR_ATTENTION.md §2: gate_domain="linear" takes ln(alpha + 1e-10)


def needed(f: Any) -> bool:
    """Whether the forward node described by facts `f` needs the adapter."""
    flags = f.flags
    return (f.uses_state_pool or flags.overwrite_initial_state or flags.safe_gate
            or flags.use_beta_sigmoid or flags.gate_domain != "log")


def log_decay(g: Any, flags: Any, per_channel: bool, a_log: Any, dt_bias: Any) -> Any:
    """gamma = ln(alpha) in float32, from the gate as the node holds it (docs/LINEAR_ATTENTION.md §2)."""
    import torch

    g = g.float()
    if flags.gate_domain == "linear":
        return torch.log(g + LINEAR_GATE_FLOOR)
    if not flags.safe_gate:
        return g.contiguous()
    z = g if dt_bias is None else g + dt_bias.float()
    amp = None if a_log is None else torch.exp(a_log.float())
    if per_channel:  # KDA / GDN-2: lb * sigmoid(exp(a_log) (g + dt_bias)), per channel
        scaled = z if amp is None else z * amp[:, None]
        bound = -5.0 if flags.gate_lower_bound is None else flags.gate_lower_bound
        return (bound * torch.sigmoid(scaled)).contiguous()
    soft = torch.nn.functional.softplus(z)  # GDN: -exp(a_log) softplus(g + dt_bias)
    return (-soft if amp is None else -(amp * soft)).contiguous()


def beta_activation(beta: Any, flags: Any) -> Any:
    """The beta the kernel reads (in beta's own dtype): sigmoid, or 2 sigmoid."""
    import torch

    if not flags.use_beta_sigmoid:
        return beta
    b = torch.sigmoid(beta.float())
    if flags.allow_neg_eigval:
        b = 2.0 * b
    return b.to(beta.dtype)


def gather_states(pool: Any, slots: Any) -> tuple[Any, Any]:
    """(the pool's rows of each sequence [N, HO, V, K], zero for a slot outside the pool;
    the served mask [N])."""
    import torch

    rows = pool.shape[0]
    valid = (slots >= 0) & (slots < rows)
    safe = torch.where(valid, slots, torch.zeros_like(slots)).long()
    h0 = pool.index_select(0, safe)
    return torch.where(valid[:, None, None, None], h0, torch.zeros_like(h0)), valid


def zero_skipped_tokens(out: Any, cu_seqlens: Any, valid: Any) -> None:
    """Zero the output rows of the sequences that are not served."""
    import torch

    tokens = torch.arange(out.shape[0], device=out.device, dtype=cu_seqlens.dtype)
    sequence = torch.searchsorted(cu_seqlens[1:].contiguous(), tokens, right=True)
    out.masked_fill_(~valid[sequence][:, None, None], 0)


def scatter_states(target: Any, slots: Any, valid: Any, final: Any) -> None:
    """target[slots[i]] = final[i] for the served sequences, in place. An unserved entry is
    pointed at a served one's row with that one's value (duplicate writes of equal values:
    the same result whichever lands last), or, when none is served, at row 0 with row 0's
    own value; so no index is ever outside the pool and no host round trip is needed."""
    import torch

    any_valid = valid.any()
    first = torch.argmax(valid.to(torch.int32))  # the first served sequence (0 if none)
    fallback_row = torch.where(any_valid, slots[first], torch.zeros_like(slots[first])).long()
    fallback_value = torch.where(any_valid, final[first], target[0])
    rows = torch.where(valid, slots.long(), fallback_row)
    values = torch.where(valid[:, None, None, None], final, fallback_value[None])
    target.index_copy_(0, rows, values.to(target.dtype))


def run(frost_fwd: Any, t: dict, f: Any, per_channel: bool, kernel_flags: dict,
        stream: Any) -> None:
    """The chunked forward of node facts `f` on buffers `t` (by graph port) with the
    serving features applied around `frost_fwd`."""
    import contextlib

    import torch

    # the adapter's tensor work goes on the kernel's stream (the caller's)
    on_stream = (torch.cuda.stream(stream) if isinstance(stream, torch.cuda.Stream)
                 else contextlib.nullcontext())
    with on_stream:
        _run(frost_fwd, t, f, per_channel, kernel_flags, stream)


def _run(frost_fwd: Any, t: dict, f: Any, per_channel: bool, kernel_flags: dict,
         stream: Any) -> None:
    import torch

    flags = f.flags
    g = log_decay(t["g"], flags, per_channel, t.get("a_log"), t.get("dt_bias"))
    beta = beta_activation(t["beta"], flags)
    pool, out = t.get("initial_state"), t["O"]
    final = t.get("final_state")
    slots = t.get("state_indices")
    target = pool if flags.overwrite_initial_state else final
    h0, valid = pool, None
    if slots is not None and pool is not None:
        h0, valid = gather_states(pool, slots)
    ht = None
    if target is not None:
        n = t["cu_seqlens"].numel() - 1
        ht = torch.empty((n, *target.shape[1:]), dtype=target.dtype, device=target.device)
    if h0 is not None and ht is not None and h0.dtype != ht.dtype:
        h0 = h0.to(ht.dtype)
    frost_fwd(q=t["q"], k=t["k"], v=t["v"], g=g, beta=beta, w=t.get("w"),
              cu_seqlens=t["cu_seqlens"], out=out, initial_state=h0, final_state=ht,
              stream=stream, **kernel_flags)
    if valid is not None:
        zero_skipped_tokens(out, t["cu_seqlens"], valid)
        if ht is not None:
            scatter_states(target, slots, valid, ht)
    elif ht is not None:
        target.copy_(ht)
