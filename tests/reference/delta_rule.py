"""Family-independent entry points behind gdn.py, kda.py and gdn2.py.

Four ways to evaluate a delta-rule node on raw inputs (the ports as a graph receives them):

- run_recurrent / recurrent_grads: the token-by-token recurrence (recurrent.py), its
  backward by torch autograd through pre-processing and recurrence;
- run_chunked / chunked_grads: the chunked algebra (chunk_fwd.py, chunk_bwd.py), its
  backward by explicit formulas, mapped back through the explicit pre-processing adjoints
  (preprocess.py) and the head-group reduction.

Results are float64 on the inputs' device. Gradients are w.r.t. each primal as passed
(docs/LINEAR_ATTENTION.md §3.7): grouped q/k/v reduced over their output-head group, dg w.r.t. the raw gate,
dbeta w.r.t. raw beta, d_a_log / d_dt_bias summed over tokens, d_initial_state V-major.
"""
from __future__ import annotations

import dataclasses

import torch

from tests.reference import preprocess as pp
from tests.reference.chunk_bwd import chunk_delta_rule_bwd
from tests.reference.chunk_fwd import chunk_delta_rule_fwd
from tests.reference.chunking import ChunkLayout
from tests.reference.recurrent import delta_rule_recurrence, to_stored

DEFAULT_CHUNK_SIZE = 64  # BT of the cuTile kernels (docs/LINEAR_ATTENTION.md §4)


@dataclasses.dataclass(frozen=True)
class Primals:
    """The tensor ports of a delta-rule node (w only for GDN-2)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    cu_seqlens: torch.Tensor
    w: torch.Tensor | None = None
    initial_state: torch.Tensor | None = None
    a_log: torch.Tensor | None = None
    dt_bias: torch.Tensor | None = None

    def validate(self, fn: str, family: pp.Family, opts: pp.Options) -> pp.Dims:
        return pp.validate(
            fn, family, opts, self.q, self.k, self.v, self.g, self.beta, self.cu_seqlens,
            w=self.w, initial_state=self.initial_state, a_log=self.a_log, dt_bias=self.dt_bias,
        )

    def prepare(self, fn: str, family: pp.Family, opts: pp.Options) -> pp.Prepared:
        return pp.prepare(
            fn, family, opts, self.q, self.k, self.v, self.g, self.beta, self.cu_seqlens,
            w=self.w, initial_state=self.initial_state, a_log=self.a_log, dt_bias=self.dt_bias,
        )


# (differentiable port, its LinearAttentionGrads field).
_GRAD_FIELDS = (
    ("q", "dq"), ("k", "dk"), ("v", "dv"), ("g", "dg"), ("beta", "dbeta"), ("w", "dw"),
    ("initial_state", "d_initial_state"), ("a_log", "d_a_log"), ("dt_bias", "d_dt_bias"),
)


@dataclasses.dataclass(frozen=True)
class LinearAttentionGrads:
    """Gradients of a delta-rule node, float64, each shaped like its primal.

    dw / d_initial_state / d_a_log / d_dt_bias are None exactly when their primal is absent.
    """

    dq: torch.Tensor
    dk: torch.Tensor
    dv: torch.Tensor
    dg: torch.Tensor
    dbeta: torch.Tensor
    dw: torch.Tensor | None = None
    d_initial_state: torch.Tensor | None = None
    d_a_log: torch.Tensor | None = None
    d_dt_bias: torch.Tensor | None = None

    def present(self) -> dict[str, torch.Tensor]:
        """Name -> gradient for every gradient that exists (for per-tensor comparisons)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


def _check_grad_outputs(fn: str, dims: pp.Dims, dO: torch.Tensor, d_final_state: torch.Tensor | None) -> None:
    want = (dims.T, dims.HO, dims.V)
    if not isinstance(dO, torch.Tensor) or tuple(dO.shape) != want:
        got = list(dO.shape) if isinstance(dO, torch.Tensor) else type(dO).__name__
        raise ValueError(f"{fn}: argument 'dO': expected shape {list(want)} [T, HO, V], got {got}")
    want_state = (dims.N, dims.HO, dims.V, dims.K)
    if d_final_state is not None and tuple(d_final_state.shape) != want_state:
        raise ValueError(
            f"{fn}: argument 'd_final_state': expected shape {list(want_state)} [N, HO, V, K], "
            f"got {list(d_final_state.shape)}"
        )


# --------------------------------------------------------------------------- recurrent


def run_recurrent(
    fn: str, family: pp.Family, opts: pp.Options, x: Primals, output_final_state: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(o [T, HO, V], final_state [N, HO, V, K] or None) by the token-by-token recurrence."""
    o, final = delta_rule_recurrence(x.prepare(fn, family, opts))
    return o, (to_stored(final) if output_final_state else None)


def recurrent_grads(
    fn: str,
    family: pp.Family,
    opts: pp.Options,
    x: Primals,
    dO: torch.Tensor,
    d_final_state: torch.Tensor | None,
) -> LinearAttentionGrads:
    """Autograd of L = <o, dO> + <final_state, d_final_state> through run_recurrent."""
    x.validate(fn, family, opts)  # on the primals as given, before the float64 leaf copies
    leaves = {
        name: getattr(x, name).detach().to(torch.float64).requires_grad_(True)
        for name, _ in _GRAD_FIELDS
        if getattr(x, name) is not None
    }
    xl = dataclasses.replace(x, **leaves)
    with torch.enable_grad():
        p = xl.prepare(fn, family, opts)
        _check_grad_outputs(fn, p.dims, dO, d_final_state)
        o, final = delta_rule_recurrence(p)
        loss = (o * dO.to(torch.float64)).sum()
        if d_final_state is not None:
            loss = loss + (to_stored(final) * d_final_state.to(torch.float64)).sum()
        grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    field_of = dict(_GRAD_FIELDS)
    return LinearAttentionGrads(**{
        field_of[name]: torch.zeros_like(leaf) if grad is None else grad
        for (name, leaf), grad in zip(leaves.items(), grads)
    })


# --------------------------------------------------------------------------- chunked


def _chunk_inputs(fn: str, family: pp.Family, opts: pp.Options, x: Primals, chunk_size: int):
    if family.vector_beta:
        raise NotImplementedError(f"{fn}: the chunked reference covers GDN and KDA (scalar beta) only")
    p = x.prepare(fn, family, opts)
    layout = ChunkLayout.from_bounds(p.dims.bounds, chunk_size)
    packed = tuple(layout.pack(t) for t in (p.q, p.k, p.v, p.gamma, p.write))
    return p, layout, packed


@torch.no_grad()
def run_chunked(
    fn: str, family: pp.Family, opts: pp.Options, x: Primals, output_final_state: bool, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(o, final_state or None) by the chunked algebra (chunk_fwd.py)."""
    p, layout, (q, k, v, gamma, beta) = _chunk_inputs(fn, family, opts, x, chunk_size)
    fwd = chunk_delta_rule_fwd(q, k, v, gamma, beta, layout, p.scale, p.initial_state)
    return layout.unpack(fwd.o), (to_stored(fwd.final_state) if output_final_state else None)


@torch.no_grad()
def chunked_grads(
    fn: str,
    family: pp.Family,
    opts: pp.Options,
    x: Primals,
    dO: torch.Tensor,
    d_final_state: torch.Tensor | None,
    chunk_size: int,
) -> LinearAttentionGrads:
    """Explicit chunked backward (chunk_bwd.py), then the pre-processing adjoints."""
    p, layout, (q, k, v, gamma, beta) = _chunk_inputs(fn, family, opts, x, chunk_size)
    d = p.dims
    _check_grad_outputs(fn, d, dO, d_final_state)
    dht = None if d_final_state is None else d_final_state.to(torch.float64).transpose(-1, -2)
    cg = chunk_delta_rule_bwd(
        q, k, v, gamma, beta, layout, p.scale, p.initial_state, layout.pack(dO.to(torch.float64)), dht
    )
    dq = pp.reduce_heads(layout.unpack(cg.dq), d.H)
    dk = pp.reduce_heads(layout.unpack(cg.dk), d.HK)
    dv = pp.reduce_heads(layout.unpack(cg.dv), d.HV)
    if opts.use_qk_l2norm:
        dq = pp.l2norm_bwd(x.q.to(torch.float64), dq)
        dk = pp.l2norm_bwd(x.k.to(torch.float64), dk)
    dgamma = layout.unpack(cg.dgamma)
    if not family.per_channel_gate:
        dgamma = dgamma[..., 0]
    dg, d_a_log, d_dt_bias = pp.log_decay_bwd(
        family, x.g.to(torch.float64), dgamma, opts, pp.to_float64(x.a_log), pp.to_float64(x.dt_bias)
    )
    dbeta = pp.beta_activation_bwd(x.beta.to(torch.float64), layout.unpack(cg.dbeta)[..., 0], opts)
    return LinearAttentionGrads(
        dq=dq,
        dk=dk,
        dv=dv,
        dg=dg,
        dbeta=dbeta,
        d_initial_state=None if x.initial_state is None else to_stored(cg.dh0),
        d_a_log=d_a_log,
        d_dt_bias=d_dt_bias,
    )
