"""Seeded random inputs for delta-rule tests, with realistic value ranges.

``InputConfig`` names one test case (family, sequence lengths, head counts, head dims,
dtypes, device, flags); ``make_inputs(config, seed)`` draws the node's ports and
``make_grad_outputs(config, seed)`` the upstream gradients. Values are drawn in float32
on the CPU from a seeded generator and then cast and moved, so a seed gives the same
numbers on every device.

Ranges (the regimes the kernels are built for):
- q, k ~ N(0, 1); without in-kernel L2 norm both are L2-normalised here, since the delta
  rule is only stable for |k| <= 1 (I - beta k k^T must not expand);
- v ~ N(0, 1); w (GDN-2) = sigmoid(N(0, 1));
- beta = sigmoid(N(0, 1)) in (0, 1), or raw N(0, 1) logits under use_beta_sigmoid;
- log-domain g = logsigmoid(N(0, 1)) (< 0); linear-domain g = sigmoid(N(0, 1)) in (0, 1);
  under safe_gate g holds raw N(0, 1) logits, a_log = ln U(1, 16) and dt_bias is the
  inverse softplus of dt ~ logU(1e-3, 1e-1) (GDN, the Mamba-style init) or 0.5 N(0, 1)
  per channel (KDA/GDN-2);
- initial_state and d_final_state ~ N(0, 1), dO ~ N(0, 1).
"""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F

from tests.reference.preprocess import Family, Options, l2norm, validate


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputConfig:
    family: Family
    seq_lens: tuple[int, ...]
    H: int
    K: int
    V: int
    HK: int | None = None  # None -> H
    HV: int | None = None  # None -> H
    dtype: torch.dtype = torch.float32  # q, k, v, dO (and GDN-2 beta, w)
    gate_dtype: torch.dtype = torch.float32  # g and beta (GDN/KDA)
    state_dtype: torch.dtype = torch.float32  # initial_state, d_final_state
    param_dtype: torch.dtype = torch.float32  # a_log, dt_bias
    device: str = "cpu"
    scale: float | None = None
    use_qk_l2norm: bool = False
    use_beta_sigmoid: bool = False
    allow_neg_eigval: bool = False
    safe_gate: bool = False
    gate_domain: str = "log"
    gate_lower_bound: float | None = None
    with_initial_state: bool = False
    with_a_log: bool = True  # only drawn under safe_gate
    with_dt_bias: bool = True  # only drawn under safe_gate

    def __post_init__(self):
        if not self.seq_lens or any(n < 0 for n in self.seq_lens):
            raise ValueError(f"InputConfig: seq_lens must be a non-empty list of lengths >= 0, got {self.seq_lens}")
        for name in ("H", "K", "V", "num_k_heads", "num_v_heads"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"InputConfig: {name} must be >= 1, got {value}")
        if self.HO % self.H or self.HO % self.num_v_heads:
            raise ValueError(f"InputConfig: H={self.H} and HV={self.num_v_heads} must divide one another")

    @property
    def num_k_heads(self) -> int:
        return self.H if self.HK is None else self.HK

    @property
    def num_v_heads(self) -> int:
        return self.H if self.HV is None else self.HV

    @property
    def HO(self) -> int:
        return max(self.H, self.num_v_heads)

    @property
    def N(self) -> int:
        return len(self.seq_lens)

    @property
    def T(self) -> int:
        return sum(self.seq_lens)

    def options(self) -> Options:
        return Options(
            scale=self.scale, use_qk_l2norm=self.use_qk_l2norm, use_beta_sigmoid=self.use_beta_sigmoid,
            allow_neg_eigval=self.allow_neg_eigval, safe_gate=self.safe_gate, gate_domain=self.gate_domain,
            gate_lower_bound=self.gate_lower_bound,
        )


@dataclasses.dataclass(frozen=True)
class Inputs:
    """One draw of a node's ports; args()/options() feed the naive_* references."""

    config: InputConfig
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

    def args(self) -> tuple[torch.Tensor, ...]:
        """Positional tensor ports in the family's order (q, k, v, g, beta, [w,] cu_seqlens)."""
        gates = (self.g, self.beta) if self.w is None else (self.g, self.beta, self.w)
        return (self.q, self.k, self.v, *gates, self.cu_seqlens)

    def options(self) -> dict[str, object]:
        """Keyword arguments of the naive_* references (initial_state, a_log, dt_bias, flags)."""
        c = self.config
        kwargs: dict[str, object] = dict(
            scale=c.scale, initial_state=self.initial_state, use_qk_l2norm=c.use_qk_l2norm,
            use_beta_sigmoid=c.use_beta_sigmoid, allow_neg_eigval=c.allow_neg_eigval,
            safe_gate=c.safe_gate, gate_domain=c.gate_domain, a_log=self.a_log, dt_bias=self.dt_bias,
        )
        if c.family is not Family.GDN:
            kwargs["gate_lower_bound"] = c.gate_lower_bound
        return kwargs

    def to(self, dtype: torch.dtype | None = None, device: str | torch.device | None = None) -> "Inputs":
        """A copy with every floating tensor cast to dtype (if given) and all moved to device."""
        def move(t):
            if t is None:
                return None
            return t.to(device=device, dtype=dtype if (dtype is not None and t.is_floating_point()) else t.dtype)

        fields = {f.name: move(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "config"}
        return Inputs(config=self.config, **fields)


def _inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


def make_inputs(config: InputConfig, seed: int) -> Inputs:
    c = config
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    def uniform(lo: float, hi: float, *shape: int) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(*shape, generator=gen, dtype=torch.float32)

    T, HO, K, V = c.T, c.HO, c.K, c.V
    q, k = randn(T, c.H, K), randn(T, c.num_k_heads, K)
    if not c.use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    v = randn(T, c.num_v_heads, V)

    gate_shape = (T, HO, K) if c.family.per_channel_gate else (T, HO)
    raw = randn(*gate_shape)
    if c.safe_gate:
        g = raw
    elif c.gate_domain == "linear":
        g = torch.sigmoid(raw)
    else:
        g = F.logsigmoid(raw)
    beta_raw = randn(*((T, HO, K) if c.family.vector_beta else (T, HO)))
    beta = beta_raw if c.use_beta_sigmoid else torch.sigmoid(beta_raw)
    w = torch.sigmoid(randn(T, HO, V)) if c.family is Family.GDN2 else None
    h0 = randn(c.N, HO, V, K) if c.with_initial_state else None

    a_log = dt_bias = None
    if c.safe_gate and c.with_a_log:
        a_log = torch.log(uniform(1.0, 16.0, HO))
    if c.safe_gate and c.with_dt_bias:
        if c.family is Family.GDN:
            dt = torch.exp(uniform(math.log(1e-3), math.log(1e-1), HO))
            dt_bias = _inverse_softplus(dt)
        else:
            dt_bias = 0.5 * randn(HO, K)

    cu = torch.tensor([0, *torch.tensor(c.seq_lens, dtype=torch.long).cumsum(0).tolist()], dtype=torch.int32)
    beta_dtype = c.dtype if c.family.vector_beta else c.gate_dtype
    inputs = Inputs(
        config=c,
        q=q.to(c.dtype), k=k.to(c.dtype), v=v.to(c.dtype),
        g=g.to(c.gate_dtype), beta=beta.to(beta_dtype), cu_seqlens=cu,
        w=None if w is None else w.to(c.dtype),
        initial_state=None if h0 is None else h0.to(c.state_dtype),
        a_log=None if a_log is None else a_log.to(c.param_dtype),
        dt_bias=None if dt_bias is None else dt_bias.to(c.param_dtype),
    ).to(device=c.device)
    validate(
        "make_inputs", c.family, c.options(), inputs.q, inputs.k, inputs.v, inputs.g, inputs.beta,
        inputs.cu_seqlens, w=inputs.w, initial_state=inputs.initial_state, a_log=inputs.a_log,
        dt_bias=inputs.dt_bias,
    )
    return inputs


def make_grad_outputs(config: InputConfig, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(dO [T, HO, V] in config.dtype, d_final_state [N, HO, V, K] in config.state_dtype)."""
    c = config
    gen = torch.Generator().manual_seed(seed)
    dO = torch.randn(c.T, c.HO, c.V, generator=gen, dtype=torch.float32)
    dht = torch.randn(c.N, c.HO, c.V, c.K, generator=gen, dtype=torch.float32)
    return dO.to(device=c.device, dtype=c.dtype), dht.to(device=c.device, dtype=c.state_dtype)
