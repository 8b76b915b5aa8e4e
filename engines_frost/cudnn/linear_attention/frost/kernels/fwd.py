"""STUB of the FROST forward launcher: the engines' interface, without a kernel.

The real module (CuTe DSL kernels for sm_90) is written on the frost-kernels branch and
replaces this file at merge. It exists so the engine layer and its CPU tests run; it
launches nothing.
"""
from __future__ import annotations

from typing import Any


def frost_workspace_size(*, total_tokens: int, num_seqs: int, heads_q: int, heads_k: int,
                         heads_v: int, head_dim_k: int, head_dim_v: int,
                         gate_per_channel: bool, beta_per_channel: bool) -> int:
    """Exact scratch bytes of one forward call (the v0 kernel needs none)."""
    return 0


def frost_fwd(*, q: Any, k: Any, v: Any, g: Any, beta: Any, w: Any, cu_seqlens: Any, out: Any,
              initial_state: Any, final_state: Any, scale: float, use_l2norm: bool,
              gate_per_channel: bool, beta_per_channel: bool, stream: Any) -> None:
    raise NotImplementedError("kernels/fwd.py is a stub: the FROST forward kernel is not in "
                              "this build")
