"""Input checking and pre-processing shared by the float64 linear-attention references.

Owns everything that happens before the delta-rule recurrence proper
(docs/LINEAR_ATTENTION.md §1.1 and §2):

- argument validation (THD shapes, head grouping, flag combinations), with errors that
  name the calling function, the argument, what was expected and what was given;
- head mapping: every per-token tensor is brought to HO = max(H, HV) heads by
  ``repeat_interleave`` (output head h reads native head h // (HO / H_native));
- q/k L2 normalisation ``x / sqrt(sum x^2 + 1e-6)``;
- the beta activation (identity, sigmoid, or 2*sigmoid under allow_neg_eigval);
- the log-decay gamma from the raw gate (log / linear domain, the GDN and KDA/GDN2
  safe gates with a_log and dt_bias).

Each transform comes as a forward function written with differentiable torch ops (the
recurrent references differentiate through them with autograd) and an explicit
``*_bwd`` (the chunked backward uses those, so it has no autograd inside).

Everything is computed in float64 on the device of the inputs.
"""
from __future__ import annotations

import dataclasses
import enum
import math

import torch

L2NORM_EPS = 1e-6
LINEAR_GATE_FLOOR = 1e-10  # docs/LINEAR_ATTENTION.md §1.3: gate_domain="linear" takes ln(alpha + 1e-10)
DEFAULT_GATE_LOWER_BOUND = -5.0  # docs/LINEAR_ATTENTION.md §1.3: gate_lower_bound None -> -5.0
GATE_DOMAINS = ("log", "linear")


class Family(enum.Enum):
    """The delta-rule families these references cover, with their gate/beta shapes."""

    GDN = "gdn"
    KDA = "kda"
    GDN2 = "gdn2"

    @property
    def per_channel_gate(self) -> bool:
        """g is [T, HO, K] (one decay per key channel) rather than [T, HO]."""
        return self is not Family.GDN

    @property
    def vector_beta(self) -> bool:
        """beta is [T, HO, K] (GDN-2's channel-wise erase gate) rather than [T, HO]."""
        return self is Family.GDN2


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """Attributes shared by the delta-rule nodes (docs/LINEAR_ATTENTION.md §1.3), as the references take them."""

    scale: float | None = None
    use_qk_l2norm: bool = False
    use_beta_sigmoid: bool = False
    allow_neg_eigval: bool = False
    safe_gate: bool = False
    gate_domain: str = "log"
    gate_lower_bound: float | None = None

    def lower_bound(self) -> float:
        return DEFAULT_GATE_LOWER_BOUND if self.gate_lower_bound is None else float(self.gate_lower_bound)


@dataclasses.dataclass(frozen=True)
class Dims:
    """Sizes read off validated inputs."""

    T: int
    N: int
    H: int
    HK: int
    HV: int
    HO: int
    K: int
    V: int
    bounds: tuple[tuple[int, int], ...]  # (start, end) token range of each sequence


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Inputs after pre-processing, all float64 at HO heads, ready for the recurrence.

    gamma is the natural-log decay per token: [T, HO, 1] for a scalar gate (GDN), [T, HO, K]
    per channel. erase (b) is [T, HO, 1] or [T, HO, K]; write (w) is [T, HO, 1] or
    [T, HO, V]. initial_state is in FLA orientation [N, HO, K, V] (S = X^T), or None.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    gamma: torch.Tensor
    erase: torch.Tensor
    write: torch.Tensor
    scale: float
    initial_state: torch.Tensor | None
    dims: Dims


# --------------------------------------------------------------------------- validation


def _fail(fn: str, arg: str, expected: str, got: object) -> ValueError:
    return ValueError(f"{fn}: argument '{arg}': expected {expected}, got {got}")


def _shape(t: torch.Tensor) -> str:
    return str(list(t.shape))


def _check_rank(fn: str, name: str, t: torch.Tensor, rank: int, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != rank:
        raise _fail(fn, name, f"rank {rank} {what}", f"shape {_shape(t)}")
    if not t.is_floating_point():
        raise TypeError(f"{fn}: argument '{name}': expected a floating-point tensor, got {t.dtype}")


def _check_exact(fn: str, name: str, t: torch.Tensor | None, shape: tuple[int, ...], what: str) -> None:
    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
    if tuple(t.shape) != shape:
        raise _fail(fn, name, f"shape {list(shape)} {what}", f"shape {_shape(t)}")
    if not t.is_floating_point():
        raise TypeError(f"{fn}: argument '{name}': expected a floating-point tensor, got {t.dtype}")


def sequence_bounds(fn: str, cu_seqlens: torch.Tensor, total: int) -> tuple[tuple[int, int], ...]:
    """Validates cu_seqlens ([N+1] prefix sums from 0 to total) and returns (start, end) pairs."""
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1:
        got = _shape(cu_seqlens) if isinstance(cu_seqlens, torch.Tensor) else type(cu_seqlens).__name__
        raise _fail(fn, "cu_seqlens", "a 1-D [N+1] tensor", got)
    if cu_seqlens.is_floating_point() or cu_seqlens.is_complex():
        raise TypeError(f"{fn}: argument 'cu_seqlens': expected an integer tensor, got {cu_seqlens.dtype}")
    cu = [int(x) for x in cu_seqlens.tolist()]
    if cu[0] != 0 or cu[-1] != total or any(b < a for a, b in zip(cu, cu[1:])):
        raise _fail(fn, "cu_seqlens", f"non-decreasing prefix sums from 0 to total_T={total}", cu)
    return tuple(zip(cu[:-1], cu[1:]))


def validate(
    fn: str,
    family: Family,
    opts: Options,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: torch.Tensor,
    *,
    w: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    a_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
) -> Dims:
    """Checks shapes, head grouping and flag combinations; returns the sizes."""
    _check_rank(fn, "q", q, 3, "[T, H, K]")
    _check_rank(fn, "k", k, 3, "[T, HK, K]")
    _check_rank(fn, "v", v, 3, "[T, HV, V]")
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    if k.shape[0] != T or k.shape[2] != K:
        raise _fail(fn, "k", f"shape [T={T}, HK, K={K}]", f"shape {_shape(k)}")
    if v.shape[0] != T:
        raise _fail(fn, "v", f"shape [T={T}, HV, V]", f"shape {_shape(v)}")
    HO = max(H, HV)
    if HO % H or HO % HV:
        raise _fail(fn, "v", f"a head count HV that divides or is a multiple of H={H}", f"HV={HV}")
    if HK not in (H, HV):
        raise _fail(fn, "k", f"a head count HK in {{H={H}, HV={HV}}}", f"HK={HK}")
    bounds = sequence_bounds(fn, cu_seqlens, T)
    N = len(bounds)

    gate_shape = (T, HO, K) if family.per_channel_gate else (T, HO)
    _check_exact(fn, "g", g, gate_shape, "(gate at HO = max(H, HV) heads)")
    beta_shape = (T, HO, K) if family.vector_beta else (T, HO)
    _check_exact(fn, "beta", beta, beta_shape, "(beta at HO heads)")
    if family is Family.GDN2:
        if w is None:
            raise _fail(fn, "w", f"a [T, HO, V] = {[T, HO, V]} write gate", None)
        _check_exact(fn, "w", w, (T, HO, V), "(write gate at HO heads)")
    elif w is not None:
        raise _fail(fn, "w", "None (only GDN-2 has a write gate)", f"shape {_shape(w)}")
    _check_exact(fn, "initial_state", initial_state, (N, HO, V, K), "[N, HO, V, K] (V-major)")
    _check_exact(fn, "a_log", a_log, (HO,), "[HO]")
    dt_shape = (HO, K) if family.per_channel_gate else (HO,)
    _check_exact(fn, "dt_bias", dt_bias, dt_shape, "(dt_bias)")

    if opts.gate_domain not in GATE_DOMAINS:
        raise _fail(fn, "gate_domain", f"one of {GATE_DOMAINS}", repr(opts.gate_domain))
    if opts.allow_neg_eigval and not opts.use_beta_sigmoid:
        raise _fail(fn, "allow_neg_eigval", "use_beta_sigmoid=True alongside it", "use_beta_sigmoid=False")
    if opts.safe_gate and opts.gate_domain != "log":
        raise _fail(fn, "gate_domain", "'log' with safe_gate=True", repr(opts.gate_domain))
    for name, t in (("a_log", a_log), ("dt_bias", dt_bias)):
        if t is not None and not opts.safe_gate:
            raise _fail(fn, name, "None unless safe_gate=True", f"a tensor of shape {_shape(t)}")
    if opts.gate_lower_bound is not None:
        if family is Family.GDN:
            raise _fail(fn, "gate_lower_bound", "None (GDN's safe gate has no lower bound)", opts.gate_lower_bound)
        if not opts.safe_gate:
            raise _fail(fn, "gate_lower_bound", "None unless safe_gate=True", opts.gate_lower_bound)
        if not opts.gate_lower_bound < 0:
            raise _fail(fn, "gate_lower_bound", "a negative float", opts.gate_lower_bound)
    return Dims(T=T, N=N, H=H, HK=HK, HV=HV, HO=HO, K=K, V=V, bounds=bounds)


def resolve_scale(scale: float | None, K: int) -> float:
    return 1.0 / math.sqrt(K) if scale is None else float(scale)


# --------------------------------------------------------------------------- head mapping


def expand_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[T, h, ...] -> [T, heads, ...]: output head i reads native head i // (heads / h)."""
    return x.repeat_interleave(heads // x.shape[1], dim=1)


def reduce_heads(dx: torch.Tensor, heads: int) -> torch.Tensor:
    """Adjoint of expand_heads: [T, HO, ...] -> [T, heads, ...] summing each group."""
    T, HO = dx.shape[:2]
    return dx.reshape(T, heads, HO // heads, *dx.shape[2:]).sum(dim=2)


# --------------------------------------------------------------------------- L2 norm


def l2norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2NORM_EPS)


def l2norm_bwd(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """y = x r with r = (|x|^2 + eps)^-1/2  =>  dx = r (dy - y <y, dy>)."""
    r = torch.rsqrt((x * x).sum(-1, keepdim=True) + L2NORM_EPS)
    y = x * r
    return r * (dy - y * (y * dy).sum(-1, keepdim=True))


# --------------------------------------------------------------------------- beta


def beta_activation(beta: torch.Tensor, opts: Options) -> torch.Tensor:
    if not opts.use_beta_sigmoid:
        return beta
    s = torch.sigmoid(beta)
    return 2.0 * s if opts.allow_neg_eigval else s


def beta_activation_bwd(beta: torch.Tensor, dbeta_eff: torch.Tensor, opts: Options) -> torch.Tensor:
    if not opts.use_beta_sigmoid:
        return dbeta_eff
    s = torch.sigmoid(beta)
    d = dbeta_eff * s * (1.0 - s)
    return 2.0 * d if opts.allow_neg_eigval else d


# --------------------------------------------------------------------------- gate


def _gate_params(family: Family, g: torch.Tensor, a_log, dt_bias):
    """exp(a_log) broadcastable to g (1 when absent) and dt_bias broadcastable to g (0 when absent)."""
    amp = torch.ones((), dtype=g.dtype, device=g.device) if a_log is None else torch.exp(a_log.to(g.dtype))
    if a_log is not None and family.per_channel_gate:
        amp = amp[:, None]
    bias = torch.zeros((), dtype=g.dtype, device=g.device) if dt_bias is None else dt_bias.to(g.dtype)
    return amp, bias


def log_decay(family: Family, g: torch.Tensor, opts: Options, a_log=None, dt_bias=None) -> torch.Tensor:
    """gamma = ln(alpha) per token: [T, HO] (GDN) or [T, HO, K]; docs/LINEAR_ATTENTION.md §2."""
    if opts.gate_domain == "linear":
        return torch.log(g + LINEAR_GATE_FLOOR)
    if not opts.safe_gate:
        return g
    amp, bias = _gate_params(family, g, a_log, dt_bias)
    if family is Family.GDN:
        return -amp * torch.nn.functional.softplus(g + bias)
    return opts.lower_bound() * torch.sigmoid(amp * (g + bias))


def log_decay_bwd(family: Family, g: torch.Tensor, dgamma: torch.Tensor, opts: Options, a_log=None, dt_bias=None):
    """Explicit adjoint of log_decay: returns (dg, d_a_log or None, d_dt_bias or None)."""
    if opts.gate_domain == "linear":
        return dgamma / (g + LINEAR_GATE_FLOOR), None, None
    if not opts.safe_gate:
        return dgamma, None, None
    amp, bias = _gate_params(family, g, a_log, dt_bias)
    z = g + bias
    if family is Family.GDN:
        dz = -dgamma * amp * torch.sigmoid(z)  # d softplus = sigmoid
        damp = -dgamma * torch.nn.functional.softplus(z)
    else:
        s = torch.sigmoid(amp * z)
        dlogit = dgamma * opts.lower_bound() * s * (1.0 - s)
        dz = dlogit * amp
        damp = dlogit * z
    d_a_log = None
    if a_log is not None:
        # d amp / d a_log = amp; reduce over tokens (and channels for KDA/GDN2).
        per_head = damp.sum(0) if family is Family.GDN else damp.sum((0, 2))
        d_a_log = per_head * torch.exp(a_log.to(g.dtype))
    d_dt_bias = None if dt_bias is None else dz.sum(0)
    return dz, d_a_log, d_dt_bias


# --------------------------------------------------------------------------- assembly


def to_float64(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.to(torch.float64)


def prepare(
    fn: str,
    family: Family,
    opts: Options,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: torch.Tensor,
    *,
    w: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    a_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
) -> Prepared:
    """Validates, converts to float64 and applies every pre-processing step (differentiably)."""
    dims = validate(
        fn, family, opts, q, k, v, g, beta, cu_seqlens,
        w=w, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias,
    )
    q, k, v, g, beta = (t.to(torch.float64) for t in (q, k, v, g, beta))
    if opts.use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    gamma = log_decay(family, g, opts, to_float64(a_log), to_float64(dt_bias))
    beta_eff = beta_activation(beta, opts)
    if not family.per_channel_gate:
        gamma = gamma[..., None]
    erase = beta_eff if family.vector_beta else beta_eff[..., None]
    write = w.to(torch.float64) if family is Family.GDN2 else beta_eff[..., None]
    h0 = None if initial_state is None else initial_state.to(torch.float64).transpose(-1, -2)
    return Prepared(
        q=expand_heads(q, dims.HO),
        k=expand_heads(k, dims.HO),
        v=expand_heads(v, dims.HO),
        gamma=gamma,
        erase=erase,
        write=write,
        scale=resolve_scale(opts.scale, dims.K),
        initial_state=h0,
        dims=dims,
    )
