"""The argument rules FLA 0.6's public ops apply before running, as the same exception
types (so code written against FLA fails the same way), each message naming the function,
the argument, what was expected and what was given.

Where FLA accepts an argument that this library does not serve (context parallelism,
per-chunk intermediate states, a decay per value channel, a beta per value channel) the
functions raise NotImplementedError naming it: never a silent difference. Hints that
change no result (chunk_indices, cu_seqlens_cpu, disable_recompute, use_graph, safe_gate
without a fused gate) are accepted and have no effect.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, MutableMapping
from typing import Any

import torch


def _fail(exc: type[Exception], fn: str, argument: str, expected: str, given: Any) -> Exception:
    return exc(f"{fn}: argument '{argument}': expected {expected}; got {given}")


def state_v_first_from(fn: str, state_v_first: bool, kwargs: MutableMapping[str, Any]) -> bool:
    """`state_v_first`, honouring its deprecated name `transpose_state_layout` as FLA does."""
    if "transpose_state_layout" not in kwargs:
        return bool(state_v_first)
    if state_v_first:
        raise _fail(ValueError, fn, "transpose_state_layout", "only one of state_v_first "
                    "and its deprecated name transpose_state_layout", "both")
    warnings.warn(f"{fn}: `transpose_state_layout` is deprecated; use `state_v_first`",
                  DeprecationWarning, stacklevel=3)
    return bool(kwargs.pop("transpose_state_layout"))


def refuse_head_first(fn: str, kwargs: MutableMapping[str, Any], always: bool) -> None:
    """FLA removed head_first ([B, H, T, D] inputs): chunk_gated_delta_rule refuses the
    argument whatever its value (always=True); the other ops ignore it in FLA, which reads
    head-first tensors as [B, T, H, D] without a word, so here head_first=True is refused."""
    if "head_first" not in kwargs or (not always and not kwargs["head_first"]):
        return
    raise DeprecationWarning(f"{fn}: argument 'head_first' has been removed: inputs must be "
                             f"[B, T, H, ...]; got head_first={kwargs['head_first']!r}")


def check_packed(fn: str, q: torch.Tensor, cu_seqlens: torch.Tensor | None,
                 initial_state: torch.Tensor | None) -> None:
    """With cu_seqlens: one packed row (B = 1) and one initial state per sequence."""
    if cu_seqlens is None:
        return
    if q.shape[0] != 1:
        raise _fail(ValueError, fn, "q", "batch size B = 1 when cu_seqlens is given "
                    "(flatten variable-length inputs into one row)", f"B = {q.shape[0]}")
    sequences = cu_seqlens.shape[0] - 1
    if initial_state is not None and initial_state.shape[0] != sequences:
        raise _fail(ValueError, fn, "initial_state", f"one state per sequence, N = "
                    f"{sequences} (len(cu_seqlens) - 1)", f"{initial_state.shape[0]} states")


def check_neg_eigval(fn: str, allow_neg_eigval: bool, use_beta_sigmoid_in_kernel: bool) -> None:
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise _fail(ValueError, fn, "allow_neg_eigval", "False unless "
                    "use_beta_sigmoid_in_kernel=True (beta = 2 sigmoid(beta))", True)


def check_chunk_size(fn: str, kwargs: MutableMapping[str, Any], allowed: Iterable[int]) -> None:
    """FLA's chunk sizes (tiling only: the results do not depend on it here)."""
    allowed = tuple(allowed)
    size = kwargs.pop("chunk_size", 64)
    if size not in allowed:
        raise _fail(ValueError, fn, "chunk_size", f"one of {list(allowed)}", size)


def require_float32_state(fn: str, initial_state: torch.Tensor | None) -> None:
    """chunk_kda and chunk_gdn2 take float32 states only (as FLA, an AssertionError)."""
    if initial_state is not None and initial_state.dtype != torch.float32:
        raise AssertionError(f"{fn}: argument 'initial_state': expected float32; got "
                             f"{str(initial_state.dtype).removeprefix('torch.')}")


def refuse_unserved(fn: str, **given: Any) -> None:
    """Arguments FLA serves and this library does not: a NotImplementedError naming each."""
    why = {
        "cp_context": "context parallelism (FLACPContext) is not served by this drop-in; "
                      "run each rank's tokens with initial_state from the previous rank",
        "return_intermediate_states": "the per-chunk states are not returned by these "
                                      "kernels",
        "gv": "a decay per value channel is not served by these kernels",
    }
    for argument, value in given.items():
        if value is not None and value is not False:
            raise NotImplementedError(f"{fn}: argument '{argument}': {why[argument]}")


def refuse_value_beta(fn: str, beta: torch.Tensor, v: torch.Tensor) -> None:
    """A beta per value channel ([B, T, HV, V], which FLA's recurrent kernels read)."""
    if beta.dim() == v.dim():
        raise NotImplementedError(
            f"{fn}: argument 'beta': a beta per value channel {list(beta.shape)} is not "
            "served by these kernels; expected one beta per head [B, T, HV]")


def check_graph_sequences(fn: str, cu_seqlens: torch.Tensor | None, use_graph: bool,
                          max_num_seqs: int | None) -> None:
    """use_graph: cu_seqlens padded to exactly max_num_seqs + 1 entries (as FLA asserts)."""
    if not use_graph or cu_seqlens is None or max_num_seqs is None:
        return
    if cu_seqlens.shape[0] - 1 != max_num_seqs:
        raise AssertionError(f"{fn}: argument 'cu_seqlens': expected max_num_seqs + 1 = "
                             f"{max_num_seqs + 1} entries (pad with empty sequences); got "
                             f"{cu_seqlens.shape[0]}")
