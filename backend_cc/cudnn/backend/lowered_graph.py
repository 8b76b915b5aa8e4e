"""`LoweredGraph`: the C++ backend_graph made from one IR graph, and its invariants.

It is what `graph.lifecycle.planning.lowered` holds. It keeps the IR tensor -> backend
tensor map, the uids the lowering added itself (pass-by-value scalars made from Python
numbers), the handle the graph was lowered with, and the adapter's plan bookkeeping.

Invariants it checks, loudly (AssertionError: a broken invariant is a bug, never a
decline):
- `verify_uids()`: every backend tensor reports exactly its IR uid, and no tensor carries
  a uid nobody pushed. Run after recording and again after `build_operation_graph()`.
- `copy_back_layouts()`: dims/strides the backend inferred for op outputs are written into
  the IR tensors whose layouts the caller did not set (through the IR's provisional
  hooks, so they stay marked as inferred).

Anything else asked of it (serialize, deserialize, plan queries by backend index, ...) is
answered by the backend_graph itself; `pygraph` forwards unknown attributes here.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudnn import Tensor


class LoweredGraph:
    def __init__(self, backend: Any, tensors: Mapping[Tensor, Any],
                 internal_uids: frozenset[int], handle: int | None,
                 outputs: Sequence[Tensor] = (), notes: Sequence[str] = ()) -> None:
        self.backend = backend
        self.tensors: dict[Tensor, Any] = dict(tensors)
        #: the IR tensors op outputs were lowered from (what copy_back_layouts updates).
        self.outputs: tuple[Tensor, ...] = tuple(outputs)
        self.internal_uids = frozenset(internal_uids)
        self.handle = handle
        #: lowering choices worth showing, one line each (e.g. the composite sdpa_backward)
        self.notes: tuple[str, ...] = tuple(notes)
        #: the adapter's per-graph plan bookkeeping (cudnn.backend.plan_book.PlanBook).
        self.plan_book: Any = None

    # -- invariants -------------------------------------------------------------------
    def pushed_uids(self) -> set[int]:
        return {t.uid for t in self.tensors} | set(self.internal_uids)

    def verify_uids(self, when: str = "after lowering") -> None:
        for ir, bt in self.tensors.items():
            got = bt.get_uid()
            if got != ir.uid:
                raise AssertionError(f"{when}: tensor '{ir.name}': IR uid {ir.uid}, backend uid "
                                     f"{got} (the backend must only carry uids Python pushed)")
        pushed = self.pushed_uids()
        carried = {bt.get_uid() for bt in self.backend.tensors()}
        stray = carried - pushed
        if None in stray:
            raise AssertionError(f"{when}: a backend tensor has no uid")
        stray |= set(self.backend.tensor_uids()) - pushed
        if stray:
            raise AssertionError(f"{when}: backend tensors carry uids nobody pushed: "
                                 f"{sorted(stray)}")

    def copy_back_layouts(self) -> None:
        """Backend-inferred layouts of op outputs into their IR tensors (inferred ones only).
        The adapter calls it once the backend has accepted the graph, so a decline leaves
        the IR as it was."""
        for ir in self.outputs:
            bt = self.tensors[ir]
            dims, strides = tuple(bt.get_dim()), tuple(bt.get_stride())
            if not ir.dim_assigned and dims and dims != tuple(ir.dim):
                ir._provisional_dims(dims)
            if not ir.stride_assigned and strides and strides != tuple(ir.stride):
                ir._provisional_stride(strides)

    # -- building ---------------------------------------------------------------------
    def build_operation_graph(self) -> None:
        """cuDNN's operation graph (needs libcudnn and a handle), then the uid check again."""
        self.backend.build_operation_graph()
        self.verify_uids("after build_operation_graph")

    def backend_tensor(self, ir: Tensor) -> Any:
        try:
            return self.tensors[ir]
        except KeyError:
            raise KeyError(f"tensor '{ir.name}' (uid {ir.uid}) is not part of the lowered "
                           "graph") from None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "backend":
            raise AttributeError(name)
        return getattr(self.backend, name)

    def __repr__(self) -> str:
        return f"LoweredGraph({self.backend!r}, tensors={len(self.tensors)})"
