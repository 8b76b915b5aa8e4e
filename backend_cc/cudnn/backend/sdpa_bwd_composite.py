"""The composite lowering of one IR `sdpa_backward` node: the flash-attention backward
written out as the operation graph cuDNN's fused-attention bprop engines recognise
(Ampere, Hopper and later), for where the native SDPA_BWD descriptor cannot run
(sdpa_bwd_route.py decides).

With P the forward's probabilities recomputed from its softmax statistics (logsumexp):

    P   = exp(scale * Q K^T - stats)                     [b, h_q, s_q, s_kv]
    dV  = P^T dO
    D   = rowsum(dO * O)                                 [b, h_q, s_q, 1]
    dS  = scale * P * (dO V^T - D)
    dK  = dS^T Q,   dQ = dS K

cuDNN matches the whole graph against its pattern, so the shape of the graph is dictated:
K and V enter transposed ([b, h, d, s_kv], the same memory with the last two strides
swapped) and K is reshaped back for dQ; P and dS are transposed by view-only reshapes that
also narrow them to the I/O type before the matmuls that read them transposed; D passes
through a multiply by 1 (the pattern's dropout-rescale slot) into a FLOAT tensor the
engines read back, and dQ is accumulated in a FLOAT tensor then copied out by an identity.
Those two are materialized but are neither inputs nor outputs: they live in the execute
workspace (workspace-resident tensors of the extension). With grouped heads (h_k or h_v <
h_q) dK/dV are formed per query head and summed over each group by a reduction. Without
attn_scale the scale is 1.

Every graph input keeps its IR uid (K and V are described transposed under their own
uids); each tensor the expansion adds gets a fresh uid from the lowering, drawn above all
of the graph's. Arguments the pattern cannot carry (masks, bias, dropout, deterministic
mode, ...) are declined statically, before anything is recorded.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudnn.backend.broadcast_layout import natural_layout
from cudnn.ops.data_types import data_type
from cudnn.ops.enums import diagonal_alignment, reduction_mode

if TYPE_CHECKING:
    from cudnn import Node, Tensor, pygraph

#: ports the composite graph reads or writes; any other wired port is a decline.
INPUTS = frozenset({"q", "k", "v", "o", "dO", "stats", "attn_scale"})
OUTPUTS = frozenset({"dQ", "dK", "dV"})
#: cuDNN before 9.6 expected the caller to zero the dQ accumulator in the workspace.
MIN_CUDNN = 90600

_FLOAT = data_type.FLOAT


def _neutral(name: str, value: Any) -> bool:
    """True for an attr value that asks for nothing (what leaving it out means)."""
    if value is None or value is False:
        return True
    return name == "diagonal_alignment" and value == diagonal_alignment.TOP_LEFT


def decline_reasons(node: Node, graph: pygraph, cudnn_version: int | None) -> list[str]:
    """Why the composite graph cannot express `node` (empty: it can)."""
    where = f"node '{node.name}': the composite sdpa_backward graph"
    reasons = []
    if cudnn_version is not None and cudnn_version < MIN_CUDNN:
        reasons.append(f"{where} needs cuDNN >= 9.6.0 (older libraries expect the caller to "
                       f"zero the dQ accumulator); this one is {cudnn_version}")
    others = [n.name for n in graph.nodes if n is not node]
    if others:
        reasons.append(f"{where} must be the only node of its graph (cuDNN matches the whole "
                       f"operation graph against its fused-attention pattern); the graph also "
                       f"has {others}")
    for port in ("k", "v"):
        shared = [p for p, t in node.inputs.items() if p != port and t is node.inputs.get(port)]
        if shared:
            reasons.append(f"{where} describes '{port}' transposed under its own uid, so it "
                           f"cannot be the same tensor as {shared}")
    for port, t in sorted({**node.inputs, **node.outputs}.items()):
        if getattr(t, "ragged_offset", None) is not None:
            reasons.append(f"{where} has no ragged (packed-sequence) layouts; '{port}' has a "
                           "ragged offset")
    for name in sorted(set(node.inputs) - INPUTS):
        reasons.append(f"{where} cannot take '{name}'")
    for name in sorted(set(node.outputs) - OUTPUTS):
        reasons.append(f"{where} cannot write '{name}'")
    python_only = {a.name for a in node.spec.attrs if a.python_only}
    for name, value in sorted(node.params.items()):
        if name in INPUTS or name in python_only or _neutral(name, value):
            continue  # a scalar attn_scale; python-only attrs are declined on their own
        shown = value.name if isinstance(value, enum.Enum) else repr(value)
        reasons.append(f"{where} cannot take {name}={shown}")
    cdt = node.compute_data_type
    if cdt is not None and cdt != _FLOAT:
        reasons.append(f"{where} computes in FLOAT; compute_data_type={cdt.name} was asked")
    return reasons


def _transposed(dims: tuple[int, ...], strides: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """The same memory seen with its last two axes swapped."""
    return ([*dims[:-2], dims[-1], dims[-2]], [*strides[:-2], strides[-1], strides[-2]])


def _packed(dims: list[int]) -> list[int]:
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return strides


@dataclass(frozen=True)
class _Shape:
    b: int
    h_q: int
    s_q: int
    d_qk: int
    h_k: int
    s_kv: int
    h_v: int
    d_v: int

    @classmethod
    def of(cls, q: Tensor, k: Tensor, v: Tensor) -> _Shape:
        b, h_q, s_q, d_qk = q.dim
        _, h_k, s_kv, _ = k.dim
        _, h_v, _, d_v = v.dim
        return cls(b, h_q, s_q, d_qk, h_k, s_kv, h_v, d_v)

    @property
    def scores(self) -> list[int]:
        return [self.b, self.h_q, self.s_q, self.s_kv]

    @property
    def scores_transposed(self) -> tuple[list[int], list[int]]:
        """[b, h_q, s_kv, s_q] over a packed [b, h_q, s_q, s_kv] buffer."""
        dims = self.scores
        return _transposed(tuple(dims), tuple(_packed(dims)))

    @property
    def rows(self) -> list[int]:
        return [self.b, self.h_q, self.s_q, 1]


class CompositeSdpaBackward:
    """Records the composite graph of one node into a lowering (lowering._Lowering)."""

    def __init__(self, lowering: Any, node: Node) -> None:
        self.low = lowering
        self.g = lowering.backend
        self.node = node
        #: the I/O type the transposed P and dS are narrowed to (q's, else the graph's)
        self.io = node.inputs["q"].data_type or lowering.io_data_type

    # -- tensors ------------------------------------------------------------------
    def _name(self, step: str) -> str:
        return f"{self.node.name}::{step}"

    def _shape(self, bt: Any, dims: list[int], strides: list[int] | None,
               dtype: data_type, step: str) -> Any:
        """Uid, layout and type of an intermediate the expansion adds (virtual as born)."""
        bt.set_uid(self.low.fresh_uid()).set_name(self._name(step))
        bt.set_dim(dims).set_stride(strides or _packed(dims)).set_data_type(dtype)
        return bt

    def _in_workspace(self, bt: Any) -> Any:
        return bt.set_workspace_resident(True)

    def _transposed_input(self, port: str) -> Any:
        """K or V as [b, h, d, s_kv]: its own uid and memory, last two strides swapped."""
        ir = self.node.inputs[port]
        dims, strides = _transposed(*natural_layout(ir))
        bt = self.g.tensor(uid=ir.uid, dim=dims, stride=strides, data_type=ir.data_type,
                           name=ir.name)
        self.low.tensors[ir] = bt
        return bt

    def _scalar(self, value: float, step: str) -> Any:
        return self.low.scalar(value, self._name(step))

    def _scale(self) -> Any:
        given = self.node.argument("attn_scale")
        if given is None:
            return self._scalar(1.0, "attn_scale")
        return self.low.value(self.node, "attn_scale", self.node.spec.port("attn_scale"), given)

    # -- ops ----------------------------------------------------------------------
    def _op(self, method: str, step: str, **inputs: Any) -> Any:
        """One builder call; every op that computes does so in FLOAT."""
        return getattr(self.g, method)(**inputs, compute_data_type=_FLOAT, name=self._name(step))

    def _view(self, step: str, source: Any) -> Any:
        """A view-only reshape (it computes nothing, so it takes no compute type)."""
        return self.g.reshape(input=source, name=self._name(step))

    def _output(self, port: str, bt: Any) -> None:
        self.low.output(True, False, self.node.outputs[port], bt)

    def _grad(self, port: str, a: Any, b: Any, s: _Shape, heads: int, d: int) -> None:
        """dK or dV = a @ b, summed over each group of query heads when `heads` < h_q."""
        if heads == s.h_q:
            self._output(port, self._op("matmul", f"matmul_{port}", A=a, B=b))
            return
        full = self._shape(self._op("matmul", f"matmul_{port}_per_q_head", A=a, B=b),
                           [s.b, s.h_q, s.s_kv, d], None, self.io, f"{port}_per_q_head")
        total = self._op("reduction", f"sum_{port}_over_head_group", input=full,
                         mode=reduction_mode.ADD)
        self._output(port, total)

    def record(self) -> None:
        n = self.node.inputs
        s = _Shape.of(n["q"], n["k"], n["v"])
        q, o, do, stats = (self.low.tensor(n[p]) for p in ("q", "o", "dO", "stats"))
        k_t, v_t = self._transposed_input("k"), self._transposed_input("v")
        scale = self._scale()
        one = self._scalar(1.0, "one")

        # D = rowsum(dO * O), kept in the workspace for the engines to read back
        prod = self._shape(self._op("mul", "mul_dO_O", a=do, b=o),
                           [s.b, s.h_q, s.s_q, s.d_v], None, _FLOAT, "dO_O")
        rows = self._shape(self._op("reduction", "rowsum_dO_O", input=prod,
                                    mode=reduction_mode.ADD), s.rows, None, _FLOAT, "rowsum")
        d_rows = self._shape(self._op("mul", "mul_rowsum_one", a=rows, b=one),
                             s.rows, None, _FLOAT, "softmax_sum")
        self._in_workspace(d_rows)

        # P = exp(scale * Q K^T - stats); dV = P^T dO
        scores = self._shape(self._op("matmul", "matmul_Q_KT", A=q, B=k_t),
                             s.scores, None, _FLOAT, "S")
        scaled = self._shape(self._op("mul", "mul_S_scale", a=scores, b=scale),
                             s.scores, None, _FLOAT, "S_scaled")
        shifted = self._shape(self._op("sub", "sub_S_stats", a=scaled, b=stats),
                              s.scores, None, _FLOAT, "S_shifted")
        probs = self._shape(self._op("exp", "exp_P", input=shifted), s.scores, None, _FLOAT, "P")
        probs_t = self._shape(self._view("transpose_P", probs),
                              *s.scores_transposed, self.io, "P_T")
        self._grad("dV", probs_t, do, s, s.h_v, s.d_v)

        # dS = scale * P * (dO V^T - D); dK = dS^T Q
        dp = self._shape(self._op("matmul", "matmul_dO_VT", A=do, B=v_t),
                         s.scores, None, _FLOAT, "dP")
        centred = self._shape(self._op("sub", "sub_dP_softmax_sum", a=dp, b=d_rows),
                              s.scores, None, _FLOAT, "dP_centred")
        dsoft = self._shape(self._op("mul", "mul_P", a=centred, b=probs),
                            s.scores, None, _FLOAT, "dS_unscaled")
        ds = self._shape(self._op("mul", "mul_dS_scale", a=dsoft, b=scale),
                         s.scores, None, _FLOAT, "dS")
        ds_t = self._shape(self._view("transpose_dS", ds),
                           *s.scores_transposed, self.io, "dS_T")
        self._grad("dK", ds_t, q, s, s.h_k, s.d_qk)

        # dQ = dS K, accumulated in FLOAT in the workspace, then copied out
        k_dims, k_strides = natural_layout(n["k"])
        k = self._shape(self._view("untranspose_K", k_t),
                        list(k_dims), list(k_strides), self.io, "K")
        acc_dims = [s.b, s.h_q, s.s_q, s.d_qk]
        acc = self._shape(self._op("matmul", "matmul_dS_K", A=ds, B=k), acc_dims, None, _FLOAT,
                          "dQ_accum")
        self._in_workspace(acc)
        self._output("dQ", self._op("identity", "copy_dQ", input=acc))


def lower_composite(lowering: Any, node: Node) -> None:
    """Record `node`'s composite graph (decline_reasons() must have come back empty)."""
    CompositeSdpaBackward(lowering, node).record()
