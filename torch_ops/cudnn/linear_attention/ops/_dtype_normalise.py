"""Dtype normalisation of one op call: the caller's gate, index and state dtypes are
converted on the torch side, once per call, to the dtypes the engine that runs it reads.

Engines are pass-through: each reads only its kernels' own dtypes and declines the others
(FROST and cuTile read g, beta, a_log and dt_bias in float32, GDN-2's beta and w in q's
dtype, cu_seqlens in int32, states in float32 and, FROST only, bfloat16). So the public
functions convert before calling the op: g, beta, w, a_log and dt_bias in any floating
dtype, cu_seqlens in int32 or int64, initial_state in float32, bfloat16 or float16. The
conversion is `Tensor.to`, which autograd differentiates, so every gradient comes back
in its argument's own dtype and the backward reuses the converted tensors the forward
saved; a tensor already in its target dtype is passed as it is (no copy). A converted
initial_state gives a final_state converted back to the caller's state dtype (the op's
contract: final_state in initial_state's dtype).

Which dtypes is the planner's answer. Candidates, in this order:
  1. the call as given (no conversion);
  2. the gate and index dtypes every shipped engine reads (above), the state as given;
  3. as 2, with the state in float32.
A call takes the first candidate whose forward graph (and backward graph, when the call
records autograd) is in the ops' graph caches. When none is, the candidates are built in
order until one plans, and its graphs go into those caches: so the choice is kept where
the graphs are (the torch-op layer's one cache, docs/CACHING.md), and forgotten with them.
A call no candidate serves runs as given, so it fails with the op's usual error (which
lists why each engine declined). Calls that cannot plan here (torch.compile tracing,
dispatch modes, tensor subclasses, meta tensors) take candidate 3, which every shipped
engine reads.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from cudnn.linear_attention.ops._direct_call import DISPATCHER
from cudnn.ops.errors import OpTypeError, cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn.linear_attention.ops._op_factory import FamilyOps

#: the arguments that are normalised (those a family's signature has).
NORMALISED = ("g", "beta", "w", "cu_seqlens", "initial_state", "a_log", "dt_bias")

_Targets = tuple[torch.dtype | None, ...]
_Converted = tuple[tuple[Any, ...], torch.dtype | None]


class DtypeNormaliser:
    """The normalisation of one family's forward calls (see the module docstring)."""

    def __init__(self, ops: FamilyOps) -> None:
        self.ops = ops
        names = ops.forward_signature.names
        self.positions = tuple(names.index(n) for n in NORMALISED if n in names)
        self.names = tuple(names[i] for i in self.positions)
        #: GDN-2 reads beta (and w) in q's dtype; GDN and KDA read float32 beta.
        self.beta_like_q = "w" in names

    # -- the call path -------------------------------------------------------------------
    def normalise(self, args: tuple[Any, ...], how: str) -> _Converted:
        """(the call's arguments in the chosen dtypes, the dtype final_state must be
        converted back to, or None)."""
        kernel = self.kernel_targets(args, state_fp32=True)
        if self._converts(args, kernel) is None:
            return args, None  # already what every engine reads: nothing to decide
        if torch.compiler.is_compiling() or (how == DISPATCHER and not self._plannable(args)):
            return self._apply(args, kernel)
        records = _records(args)
        candidates = self._candidates(args)
        for targets in candidates:  # a choice made before: its graphs are cached
            converted = self._apply(args, targets)
            if self._cached(converted[0], records):
                return converted
        return self._decide(args, [self._apply(args, t) for t in candidates], records)

    # -- candidates ----------------------------------------------------------------------
    def kernel_targets(self, args: Sequence[Any], state_fp32: bool) -> _Targets:
        """Candidate 2 (state_fp32=False) or 3: the dtypes every shipped engine reads."""
        q_dtype = args[0].dtype
        targets = []
        for name, position in zip(self.names, self.positions):
            t = args[position]
            if not isinstance(t, torch.Tensor):
                targets.append(None)
            elif name == "cu_seqlens":
                targets.append(torch.int32 if t.dtype == torch.int64 else None)
            elif not t.is_floating_point():
                targets.append(None)  # not a float: the op's checks name it
            elif name == "w" or (name == "beta" and self.beta_like_q):
                targets.append(q_dtype)
            elif name == "initial_state" and not state_fp32:
                targets.append(None)
            else:
                targets.append(torch.float32)
        return tuple(targets)

    def _candidates(self, args: Sequence[Any]) -> list[_Targets]:
        out: list[_Targets] = []
        for targets in ((None,) * len(self.names), self.kernel_targets(args, False),
                        self.kernel_targets(args, True)):
            effective = self._converts(args, targets) or ()
            if all(effective != self._converts(args, seen) or () for seen in out):
                out.append(targets)
        return out

    def _converts(self, args: Sequence[Any], targets: _Targets) -> tuple[Any, ...] | None:
        """(position, dtype) of every argument `targets` changes, or None if none."""
        changes = tuple((p, d) for p, d in zip(self.positions, targets)
                        if d is not None and args[p].dtype != d)
        return changes or None

    # -- deciding ------------------------------------------------------------------------
    def _cached(self, values: tuple[Any, ...], records: bool) -> bool:
        ops = self.ops
        if ops.forward_def.cache_key(values) not in ops.forward_def.cache:
            return False
        if not records:
            return True
        backward = _backward_values(ops, values, _GradientOfO)
        return ops.backward_def.cache_key(backward) in ops.backward_def.cache

    def _decide(self, args: tuple[Any, ...], candidates: list[_Converted],
                records: bool) -> _Converted:
        ops = self.ops
        forward_only = None
        for converted in candidates:
            values = converted[0]
            if records:  # the backward first: a forward graph in the cache means "chosen"
                if not _builds(ops, ops.backward_def, _backward_values(ops, values)):
                    if forward_only is None and _plans(ops, values):
                        forward_only = converted
                    continue
            if _builds(ops, ops.forward_def, values):
                return converted
        if forward_only is not None:  # no candidate has a backward: its own error will say
            _builds(ops, ops.forward_def, forward_only[0])
            return forward_only
        return args, None  # nothing plans: the op raises its no-engine error, as given

    def _plannable(self, args: Sequence[Any]) -> bool:
        """Real tensors on a device engines can plan for (not meta, not fake)."""
        return all(type(args[i]) is torch.Tensor and args[i].device.type in ("cpu", "cuda")
                   for i in self.ops._forward_tensor_positions if args[i] is not None)

    def _apply(self, args: tuple[Any, ...], targets: _Targets) -> _Converted:
        values = list(args)
        restore = None
        for name, position, dtype in zip(self.names, self.positions, targets):
            t = values[position]
            if dtype is None or t.dtype == dtype:
                continue
            if name == "initial_state":
                restore = t.dtype
            values[position] = t.to(dtype)
        return tuple(values), restore


def _builds(ops: FamilyOps, op: Any, values: tuple[Any, ...]) -> bool:
    """Whether `op`'s graph for `values` builds; a built graph goes into `op`'s cache."""
    try:
        op.cache.get_or_build(op.cache_key(values), lambda: ops._build(op, values))
    except (cudnnGraphNotSupportedError, OpTypeError):
        return False
    return True


def _plans(ops: FamilyOps, values: tuple[Any, ...]) -> bool:
    """Whether the forward graph for `values` plans, without keeping it (a forward
    graph in the cache stands for a choice made)."""
    try:
        ops._build(ops.forward_def, values)
    except (cudnnGraphNotSupportedError, OpTypeError):
        return False
    return True


def _records(args: Sequence[Any]) -> bool:
    """Whether the call records autograd (then its backward graph must plan too)."""
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in args)


class _GradientOfO:
    """What a backward cache key reads of dO (contiguous [T, HO, V] in q's dtype, on q's
    device), without allocating it."""
    __slots__ = ("shape", "dtype", "_device")

    def __init__(self, q: torch.Tensor, v: torch.Tensor) -> None:
        self.shape = torch.Size((q.shape[0], max(q.shape[1], v.shape[1]), v.shape[2]))
        self.dtype = q.dtype
        self._device = q.get_device()

    def stride(self) -> tuple[int, ...]:
        return (self.shape[1] * self.shape[2], self.shape[2], 1)

    def get_device(self) -> int:
        return self._device


def _real_gradient_of_o(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return q.new_empty((q.shape[0], max(q.shape[1], v.shape[1]), v.shape[2]))


def _backward_values(ops: FamilyOps, values: Sequence[Any],
                     gradient_of_o: Any = _real_gradient_of_o) -> tuple[Any, ...]:
    """The backward op's arguments for the forward call `values`, as its autograd passes
    them when only o receives a gradient (dO contiguous in q's dtype)."""
    forward = dict(zip(ops.forward_signature.names, values))
    d_o = gradient_of_o(forward["q"], forward["v"])
    forward["checkpoint_every_n_tokens"] = 0
    return ops.backward_signature.positional({**forward, "dO": d_o, "d_final_state": None,
                                              "state_checkpoints": None, "values": None})


def restore_final_state(results: Sequence[torch.Tensor], dtype: torch.dtype | None
                        ) -> Sequence[torch.Tensor]:
    """results with final_state (position 1) back in the caller's state dtype."""
    if dtype is None:
        return results
    return (results[0], results[1].to(dtype), *results[2:])
