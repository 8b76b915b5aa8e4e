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

Which dtypes is the planner's answer, learnt on the first eager call of a configuration
(the forward op's cache key; cached, bounded): candidates are tried in this order and the
first whose forward graph plans (and its backward graph too, when the call records
autograd) is taken; the graphs built on the way are the ones the call then runs.
  1. the call as given (no conversion);
  2. the gate and index dtypes every shipped engine reads (above), the state as given;
  3. as 2, with the state in float32.
A call no candidate serves runs as given, so it fails with the op's usual error (which
lists why each engine declined). Calls that cannot plan here (torch.compile tracing,
dispatch modes, tensor subclasses, meta tensors) take candidate 3, which every shipped
engine reads, unless an eager call already chose for the same configuration.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from cudnn.linear_attention.ops._direct_call import DISPATCHER
from cudnn.ops.errors import OpTypeError, cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn.linear_attention.ops._op_factory import FamilyOps

#: the arguments that are normalised (those a family's signature has).
NORMALISED = ("g", "beta", "w", "cu_seqlens", "initial_state", "a_log", "dt_bias")
#: how many configurations keep their choice (the graph caches' default bound).
DECISIONS_MAXSIZE = 256

_Targets = tuple[torch.dtype | None, ...]


class DtypeNormaliser:
    """The normalisation of one family's forward calls (see the module docstring)."""

    def __init__(self, ops: FamilyOps) -> None:
        self.ops = ops
        names = ops.forward_signature.names
        self.positions = tuple(names.index(n) for n in NORMALISED if n in names)
        self.names = tuple(names[i] for i in self.positions)
        #: GDN-2 reads beta (and w) in q's dtype; GDN and KDA read float32 beta.
        self.beta_like_q = "w" in names
        self._state_at = self.names.index("initial_state")
        self._decisions: OrderedDict[Any, _Targets] = OrderedDict()
        self._lock = threading.Lock()

    # -- the call path -------------------------------------------------------------------
    def normalise(self, args: tuple[Any, ...], how: str
                  ) -> tuple[tuple[Any, ...], torch.dtype | None]:
        """(the call's arguments in the chosen dtypes, the dtype final_state must be
        converted back to, or None)."""
        kernel = self.kernel_targets(args, state_fp32=True)
        if self._converts(args, kernel) is None:
            return args, None  # already what every engine reads: nothing to decide
        if torch.compiler.is_compiling():
            return self._apply(args, kernel)
        key = None
        if how != DISPATCHER or self._plannable(args):
            key = (self.ops.forward_def.cache_key(args), _records(args))
            targets = self._decisions.get(key)
            if targets is None:
                return self._decide(args, key)
            return self._apply(args, targets)
        return self._apply(args, kernel)

    def clear(self) -> None:
        with self._lock:
            self._decisions.clear()

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
    def _decide(self, args: tuple[Any, ...], key: Any
                ) -> tuple[tuple[Any, ...], torch.dtype | None]:
        records = key[1]
        forward_only: tuple[_Targets, tuple[Any, ...], torch.dtype | None] | None = None
        for targets in self._candidates(args):
            converted, state_dtype = self._apply(args, targets)
            plans = self._plans(converted, records)
            if plans == "both":
                self._remember(key, targets)
                return converted, state_dtype
            if plans == "forward" and forward_only is None:
                forward_only = (targets, converted, state_dtype)
        if forward_only is not None:  # the backward's own error will say why, if it runs
            targets, converted, state_dtype = forward_only
            self._remember(key, targets)
            return converted, state_dtype
        return args, None  # nothing plans: the op raises its no-engine error, as given

    def _plans(self, values: tuple[Any, ...], records: bool) -> str:
        """"both", "forward" or "" as the forward (and backward) graphs of `values` build;
        the built graphs go into the ops' caches, where the call finds them."""
        ops = self.ops
        fwd = ops.forward_def
        try:
            fwd.cache.get_or_build(fwd.cache_key(values), lambda: ops._build(fwd, values))
        except (cudnnGraphNotSupportedError, OpTypeError):
            return ""
        if not records:
            return "both"
        bwd = ops.backward_def
        backward = _backward_values(ops, values)
        try:
            bwd.cache.get_or_build(bwd.cache_key(backward), lambda: ops._build(bwd, backward))
        except (cudnnGraphNotSupportedError, OpTypeError):
            return "forward"
        return "both"

    def _remember(self, key: Any, targets: _Targets) -> None:
        with self._lock:
            self._decisions[key] = targets
            while len(self._decisions) > DECISIONS_MAXSIZE:
                self._decisions.popitem(last=False)

    def _plannable(self, args: Sequence[Any]) -> bool:
        """Real tensors on a device engines can plan for (not meta, not fake)."""
        return all(type(args[i]) is torch.Tensor and args[i].device.type in ("cpu", "cuda")
                   for i in self.ops._forward_tensor_positions if args[i] is not None)

    def _apply(self, args: tuple[Any, ...], targets: _Targets
               ) -> tuple[tuple[Any, ...], torch.dtype | None]:
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


def _records(args: Sequence[Any]) -> bool:
    """Whether the call records autograd (then its backward graph must plan too)."""
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in args)


def _backward_values(ops: FamilyOps, values: Sequence[Any]) -> tuple[Any, ...]:
    """The backward op's arguments for the forward call `values`, as its autograd passes
    them when only o receives a gradient (dO contiguous in q's dtype)."""
    forward = dict(zip(ops.forward_signature.names, values))
    q, v = forward["q"], forward["v"]
    d_o = q.new_empty((q.shape[0], max(q.shape[1], v.shape[1]), v.shape[2]))
    forward["checkpoint_every_n_tokens"] = 0
    return ops.backward_signature.positional({**forward, "dO": d_o, "d_final_state": None,
                                              "state_checkpoints": None})


def restore_final_state(results: Sequence[torch.Tensor], dtype: torch.dtype | None
                        ) -> Sequence[torch.Tensor]:
    """results with final_state (position 1) back in the caller's state dtype."""
    if dtype is None:
        return results
    return (results[0], results[1].to(dtype), *results[2:])
