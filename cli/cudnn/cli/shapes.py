"""The shape flags the commands share, and the graphs and torch inputs they describe.

Linear attention (gdn, kda, gdn2 and their `_bwd` ops) uses the packed layout: `--seqs`
sequences of `--seq_len` tokens each, T = seqs * seq_len tokens in all; q and k have
`--heads` heads of `--head_dim` channels, v has `--v_heads` heads (default: --heads) of
`--v_dim` channels (default: --head_dim). `matmul` multiplies [batch, m, k] by
[batch, k, n]. docs/LINEAR_ATTENTION.md gives every port's shape.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from absl import flags

import cudnn

D = cudnn.data_type
LINEAR_ATTENTION = ("gdn", "kda", "gdn2")
OPS = (*LINEAR_ATTENTION, *(f"{op}_bwd" for op in LINEAR_ATTENTION), "matmul")
DTYPES = {"bf16": D.BFLOAT16, "fp16": D.HALF}

SEQS = flags.DEFINE_integer("seqs", 2, "sequences in the packed batch (linear attention)")
SEQ_LEN = flags.DEFINE_integer("seq_len", 256, "tokens per sequence (linear attention)")
HEADS = flags.DEFINE_integer("heads", 16, "q/k heads H")
V_HEADS = flags.DEFINE_integer("v_heads", None, "v heads HV (default: --heads)")
HEAD_DIM = flags.DEFINE_integer("head_dim", 128, "q/k channels K")
V_DIM = flags.DEFINE_integer("v_dim", None, "v channels V (default: --head_dim)")
DTYPE = flags.DEFINE_enum("dtype", "bf16", list(DTYPES), "q/k/v and output dtype")
INITIAL_STATE = flags.DEFINE_bool("initial_state", False, "pass an fp32 initial state")
FINAL_STATE = flags.DEFINE_bool("final_state", True, "write the fp32 final state (forward)")
BACKWARD = flags.DEFINE_bool("backward", False, "precompile / bench: the backward too")
L2NORM = flags.DEFINE_bool("l2norm", False, "normalise q and k in the kernel (use_qk_l2norm)")
BATCH = flags.DEFINE_integer("batch", 4, "matmul batch")
M = flags.DEFINE_integer("m", 256, "matmul rows of A")
N = flags.DEFINE_integer("n", 128, "matmul columns of B")
K = flags.DEFINE_integer("k", 512, "matmul inner dim")


@dataclasses.dataclass(frozen=True)
class Shape:
    """One linear-attention problem size."""

    seqs: int = 2
    seq_len: int = 256
    H: int = 16
    HV: int = 16
    K: int = 128
    V: int = 128
    dtype: str = "bf16"
    initial_state: bool = False
    final_state: bool = True
    l2norm: bool = False

    @property
    def T(self) -> int:
        return self.seqs * self.seq_len

    @property
    def HO(self) -> int:
        return max(self.H, self.HV)

    def describe(self) -> str:
        return (f"{self.seqs}x{self.seq_len} tokens, H={self.H} HV={self.HV} K={self.K} "
                f"V={self.V} {self.dtype}" + " h0" * self.initial_state
                + " l2norm" * self.l2norm)


def shape_from_flags() -> Shape:
    return Shape(seqs=SEQS.value, seq_len=SEQ_LEN.value, H=HEADS.value,
                 HV=V_HEADS.value or HEADS.value, K=HEAD_DIM.value,
                 V=V_DIM.value or HEAD_DIM.value, dtype=DTYPE.value,
                 initial_state=INITIAL_STATE.value, final_state=FINAL_STATE.value,
                 l2norm=L2NORM.value)


def port_dims(family: str, s: Shape) -> dict[str, list[int]]:
    """Every port's dims for a family (gdn, kda, gdn2) at shape s."""
    channel = family in ("kda", "gdn2")  # per-channel decay
    return {
        "q": [s.T, s.H, s.K], "k": [s.T, s.H, s.K], "v": [s.T, s.HV, s.V],
        "g": [s.T, s.HO, s.K] if channel else [s.T, s.HO],
        "beta": [s.T, s.HO, s.K] if family == "gdn2" else [s.T, s.HO],
        "w": [s.T, s.HO, s.V], "cu_seqlens": [s.seqs + 1],
        "initial_state": [s.seqs, s.HO, s.V, s.K], "dO": [s.T, s.HO, s.V],
        "d_final_state": [s.seqs, s.HO, s.V, s.K],
    }


def port_dtypes(family: str, s: Shape) -> dict[str, Any]:
    """The dtypes the kernels read: io for q/k/v (and GDN-2's beta and w), fp32 gates."""
    io = DTYPES[s.dtype]
    return {"q": io, "k": io, "v": io, "g": D.FLOAT, "beta": io if family == "gdn2" else D.FLOAT,
            "w": io, "cu_seqlens": D.INT32, "initial_state": D.FLOAT, "dO": io,
            "d_final_state": D.FLOAT}


def linear_attention_graph(op: str, s: Shape, handle: Any = None) -> cudnn.pygraph:
    """A single-node graph of `op` (gdn, kda, gdn2 or a `_bwd` op) at shape s."""
    from cudnn.ops import linear_attention as specs

    family, backward = op.removesuffix("_bwd"), op.endswith("_bwd")
    spec = getattr(specs, op.upper())
    ports = [p.name for p in spec.input_ports if p.required]
    if s.initial_state:
        ports.append("initial_state")
    if backward and s.final_state:
        ports.append("d_final_state")
    dims, types = port_dims(family, s), port_dtypes(family, s)
    graph = cudnn.pygraph(name=f"{op}_{s.seqs}x{s.seq_len}", handle=handle)
    tensors = {p: graph.tensor(dims[p], data_type=types[p], name=p) for p in ports}
    attrs = {"use_qk_l2norm": s.l2norm}
    if not backward:
        attrs["output_final_state"] = s.final_state
    outputs = getattr(graph, op)(**tensors, **attrs, name=op)
    for out in outputs:
        if out is not None:
            out.set_output(True)
    return graph


def matmul_graph(batch: int, m: int, n: int, k: int, dtype: str = "bf16") -> cudnn.pygraph:
    graph = cudnn.pygraph(name=f"matmul_{batch}x{m}x{n}x{k}", io_data_type=DTYPES[dtype],
                          compute_data_type=D.FLOAT)
    a = graph.tensor([batch, m, k], name="A")
    b = graph.tensor([batch, k, n], name="B")
    graph.matmul(a, b, name="mm").set_output(True)
    return graph


def graph_from_flags(op: str) -> cudnn.pygraph:
    if op == "matmul":
        return matmul_graph(BATCH.value, M.value, N.value, K.value, DTYPE.value)
    return linear_attention_graph(op, shape_from_flags())


def torch_inputs(family: str, s: Shape, device: Any, seed: int = 0) -> dict[str, Any]:
    """Random inputs for the public op of `family` (gated_delta_net, ...) at shape s: the
    keyword arguments of that function, gates in their working range (log decays in
    [-0.1, 0), beta in (0, 1))."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    io = {"bf16": torch.bfloat16, "fp16": torch.float16}[s.dtype]
    dims = port_dims(family, s)

    def rand(name, dtype, low=-1.0, high=1.0):
        x = torch.rand(dims[name], generator=gen) * (high - low) + low
        return x.to(device=device, dtype=dtype)

    args = {"q": rand("q", io), "k": rand("k", io), "v": rand("v", io),
            "g": rand("g", torch.float32, -0.1, -1e-3),
            "beta": rand("beta", io if family == "gdn2" else torch.float32, 0.05, 0.95),
            "cu_seqlens": torch.arange(0, s.T + 1, s.seq_len, dtype=torch.int32, device=device)}
    if family == "gdn2":
        args["w"] = rand("w", io, 0.05, 0.95)
    if s.initial_state:
        args["initial_state"] = rand("initial_state", torch.float32, -0.1, 0.1)
    return args
