"""How context parallelism calls each family's ops (all through cudnn.linear_attention.ops).

Per family: the gate tensors (g, beta and GDN-2's w), the flag keywords its ops share,
and the four ops a rank runs: the forward (public function), the backward (the registered
`cudnn::<name>_bwd` op, called with its schema's keywords), the span summary and its
backward. A `Segment` is a run of consecutive pieces of one rank's shard executed as one
batch (its own cu_seqlens); `forward`/`backward`/`summary`/`summary_bwd` run one.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from cudnn.linear_attention import ops


@dataclasses.dataclass(frozen=True)
class CpFamily:
    name: str
    gates: tuple[str, ...]
    flags: tuple[str, ...]
    forward_fn: Callable[..., Any]
    summary_fn: Callable[..., Any]
    summary_bwd_fn: Callable[..., Any]

    @property
    def backward_op(self) -> Any:
        return getattr(torch.ops.cudnn, f"{self.name}_bwd").default

    @property
    def inputs(self) -> tuple[str, ...]:
        """The differentiable tensor inputs, in the order the autograd function takes them;
        also the order of the backward op's gradients (docs/CONTEXT_PARALLEL.md)."""
        return ("q", "k", "v", *self.gates, "initial_state", "a_log", "dt_bias")


_FLAGS = ("use_qk_l2norm_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
          "safe_gate", "gate_domain")

FAMILIES: Mapping[str, CpFamily] = {f.name: f for f in (
    CpFamily("gated_delta_net", ("g", "beta"), _FLAGS, ops.gated_delta_net,
             ops.gated_delta_net_summary, ops.gated_delta_net_summary_bwd),
    CpFamily("kimi_delta_attention", ("g", "beta"), (*_FLAGS, "gate_lower_bound"),
             ops.kimi_delta_attention, ops.kimi_delta_attention_summary,
             ops.kimi_delta_attention_summary_bwd),
    CpFamily("gated_delta_net_v2", ("g", "beta", "w"),
             (*_FLAGS, "beta_guard", "gate_lower_bound"), ops.gated_delta_net_v2,
             ops.gated_delta_net_v2_summary, ops.gated_delta_net_v2_summary_bwd),
)}


@dataclasses.dataclass(frozen=True)
class Segment:
    """Local tokens [lo, hi) holding pieces with these cu_seqlens (host ints)."""
    lo: int
    hi: int
    cu: tuple[int, ...]


class FamilyCalls:
    """One call's fixed arguments (family, flags, scale, parameters) bound once."""

    def __init__(self, family: CpFamily, tensors: Mapping[str, Any], scale: float,
                 flags: Mapping[str, Any]) -> None:
        self.family, self.t, self.scale = family, tensors, scale
        self.flags = dict(flags)
        self.params = dict(a_log=tensors["a_log"], dt_bias=tensors["dt_bias"])
        self.device = tensors["q"].device

    def _cu(self, seg: Segment) -> torch.Tensor:
        return torch.tensor(seg.cu, dtype=torch.int32, device=self.device)

    def _slice(self, names: tuple[str, ...], seg: Segment) -> list[torch.Tensor]:
        return [self.t[n][seg.lo:seg.hi] for n in names]

    def forward(self, seg: Segment, initial_state: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(o [tokens, HO, V], final states [pieces, HO, V, K]) of the segment."""
        f = self.family
        o, final = f.forward_fn(*self._slice(("q", "k", "v", *f.gates), seg), self._cu(seg),
                                scale=self.scale, initial_state=initial_state,
                                output_final_state=True, **self.flags, **self.params)
        return o, final

    def backward(self, seg: Segment, dO: torch.Tensor, initial_state: torch.Tensor,
                 d_final_state: torch.Tensor) -> dict[str, torch.Tensor | None]:
        """{primal: gradient} of the segment (None for an absent primal)."""
        f = self.family
        grads = f.backward_op(dO[seg.lo:seg.hi].contiguous(),
                              *self._slice(("q", "k", "v", *f.gates), seg), self._cu(seg),
                              self.scale, initial_state=initial_state,
                              d_final_state=d_final_state, **self.flags, **self.params)
        return {name: (None if g.numel() == 0 and name in ("a_log", "dt_bias") else g)
                for name, g in zip(f.inputs, grads)}

    def _gates(self, names: tuple[str, ...], seg: Segment) -> list[torch.Tensor]:
        """Gate slices for the summary ops, which take the dtypes as given: a 16-bit gate
        (and GDN/KDA's 16-bit beta) goes as float32, the dtype the kernels read (the main
        ops convert these themselves)."""
        out = []
        for name, t in zip(names, self._slice(names, seg)):
            scalar_beta = name == "beta" and self.family.name != "gated_delta_net_v2"
            if (name == "g" or scalar_beta) and t.dtype in (torch.float16, torch.bfloat16):
                t = t.float()
            out.append(t)
        return out

    def summary(self, seg: Segment) -> tuple[torch.Tensor, torch.Tensor]:
        """(final state from zero, transition) of a one-piece segment, [1, HO, ...]."""
        f = self.family
        return f.summary_fn(*self._slice(("k", "v"), seg), *self._gates(f.gates, seg),
                            self._cu(seg), **self.flags, **self.params)

    def summary_bwd(self, seg: Segment, dO: torch.Tensor) -> torch.Tensor:
        """The state gradient of a one-piece segment from its own outputs, [1, HO, V, K]."""
        q, k = self._slice(("q", "k"), seg)
        g, beta = self._gates(("g", "beta"), seg)
        return self.family.summary_bwd_fn(q, k, g, beta, dO[seg.lo:seg.hi].contiguous(),
                                          self._cu(seg), scale=self.scale, **self.flags,
                                          **self.params)
