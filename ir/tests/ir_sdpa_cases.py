"""Valid calls of the six SDPA builders, with hand-written expected outputs.

Geometry: q [B, Hq, Sq, D], k [B, Hk, Skv, D], v [B, Hk, Skv, Dv] with Hk dividing Hq
(GQA). Forward O = [B, Hq, Sq, Dv]; Stats = [B, Hq, Sq, 1] when requested; Amax_* are
[1, 1, 1, 1]; backward gradients have their primal's dims. sdpa_mxfp8_backward infers
nothing, so its case dimensions every output with out_dims.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import cudnn
from ir_case_types import Built, OpCase

D = cudnn.data_type
AMAX = (1, 1, 1, 1)


@dataclass(frozen=True)
class Geo:
    B: int
    Hq: int
    Hk: int
    Sq: int
    Skv: int
    D: int
    Dv: int

    @classmethod
    def draw(cls, rng: random.Random) -> "Geo":
        hk = rng.choice([1, 2])
        return cls(rng.randint(1, 3), hk * rng.choice([1, 2]), hk, rng.randint(1, 9),
                   rng.randint(1, 9), 8 * rng.randint(1, 4), 8 * rng.randint(1, 4))

    @property
    def q(self): return (self.B, self.Hq, self.Sq, self.D)  # noqa: E704
    @property
    def k(self): return (self.B, self.Hk, self.Skv, self.D)  # noqa: E704
    @property
    def v(self): return (self.B, self.Hk, self.Skv, self.Dv)  # noqa: E704
    @property
    def o(self): return (self.B, self.Hq, self.Sq, self.Dv)  # noqa: E704
    @property
    def stats(self): return (self.B, self.Hq, self.Sq, 1)  # noqa: E704


def _qkv(g, geo, dt=D.HALF):
    return tuple(g.tensor(list(d), data_type=dt) for d in (geo.q, geo.k, geo.v))


def _scalars(g, n, dt=D.FLOAT):
    return tuple(g.tensor([1, 1, 1, 1], data_type=dt) for _ in range(n))


def _fwd_stats(kwargs):
    def make(g, rng):
        geo = Geo.draw(rng)
        stats = kwargs.get("generate_stats") or kwargs.get("is_inference") is False
        return Built(_qkv(g, geo), dict(kwargs),
                     {"O": geo.o, "Stats": geo.stats if stats else None},
                     {"O": None, "Stats": None})
    return make


def _fwd_dropout(g, rng):
    geo = Geo.draw(rng)
    seed, offset = g.tensor([1, 1, 1, 1], data_type=D.INT64), g.tensor([1, 1, 1, 1],
                                                                       data_type=D.INT64)
    rng_dump = g.tensor(list(geo.q[:3]) + [geo.Skv], data_type=D.FLOAT)
    kwargs = {"attn_scale": 0.125, "dropout": (0.1, seed, offset), "rng_dump": rng_dump,
              "use_causal_mask": True, "generate_stats": True}
    return Built(_qkv(g, geo), kwargs, {"O": geo.o, "Stats": geo.stats},
                 {"O": None, "Stats": None})


def _bwd(g, rng):
    geo = Geo.draw(rng)
    q, k, v = _qkv(g, geo)
    o, d_o = g.tensor(list(geo.o)), g.tensor(list(geo.o))
    stats = g.tensor(list(geo.stats), data_type=D.FLOAT)
    return Built((q, k, v, o, d_o, stats), {"attn_scale": g.tensor_scalar(0.5)},
                 {"dQ": geo.q, "dK": geo.k, "dV": geo.v},
                 {"dQ": None, "dK": None, "dV": None})


def _fp8(g, rng):
    geo = Geo.draw(rng)
    args = _qkv(g, geo, D.FP8_E4M3) + _scalars(g, 6)
    return Built(args, {"is_inference": False},
                 {"O": geo.o, "Stats": geo.stats, "Amax_S": AMAX, "Amax_O": AMAX},
                 {"O": None, "Stats": None, "Amax_S": None, "Amax_O": None})


def _fp8_bwd(g, rng):
    geo = Geo.draw(rng)
    q, k, v = _qkv(g, geo, D.FP8_E4M3)
    o, d_o = g.tensor(list(geo.o), data_type=D.FP8_E4M3), g.tensor(list(geo.o))
    stats = g.tensor(list(geo.stats), data_type=D.FLOAT)
    args = (q, k, v, o, d_o, stats) + _scalars(g, 12)
    dims = {"dQ": geo.q, "dK": geo.k, "dV": geo.v}
    dims.update({f"amax_{n}": AMAX for n in ("dQ", "dK", "dV", "dP")})
    return Built(args, {"use_deterministic_algorithm": True}, dims, {n: None for n in dims})


def _mxfp8(g, rng):
    geo = Geo.draw(rng)
    descales = tuple(g.tensor([geo.B, h, s, -(-geo.D // 32)], data_type=D.FP8_E8M0)
                     for h, s in ((geo.Hq, geo.Sq), (geo.Hk, geo.Skv), (geo.Hk, geo.Skv)))
    return Built(_qkv(g, geo, D.FP8_E4M3) + descales, {"generate_stats": False},
                 {"O": geo.o, "Stats": None, "Amax_O": AMAX}, {"O": None, "Amax_O": None})


def _mxfp8_bwd(g, rng):
    geo = Geo.draw(rng)
    q, k, v = _qkv(g, geo, D.FP8_E4M3)
    t = lambda dims, dt=D.FP8_E4M3: g.tensor(list(dims), data_type=dt)  # noqa: E731
    transposed = lambda dims: (dims[0], dims[1], dims[3], dims[2])  # noqa: E731
    args = (q, t(transposed(geo.q)), k, t(transposed(geo.k)), v, t(geo.o, D.HALF),
            t(geo.o, D.HALF), t(geo.o), t(transposed(geo.o)), t(geo.stats, D.FLOAT))
    args += tuple(t(AMAX, D.FP8_E8M0) for _ in range(7))
    dims = {"dQ": geo.q, "dK": geo.k, "dV": geo.v, "amax_dQ": AMAX, "amax_dK": AMAX,
            "amax_dV": AMAX}
    return Built(args, {"out_dims": {k_: list(v_) for k_, v_ in dims.items()}}, dims,
                 {n: None for n in dims}, frozenset(dims))


CASES: list[OpCase] = [
    OpCase("sdpa", "generate_stats", _fwd_stats({"generate_stats": True})),
    OpCase("sdpa", "inference", _fwd_stats({"is_inference": True})),
    OpCase("sdpa", "training_legacy_flag", _fwd_stats({"is_inference": False})),
    OpCase("sdpa", "neither_flag", _fwd_stats({})),
    OpCase("sdpa", "dropout_rng_dump", _fwd_dropout),
    OpCase("sdpa_backward", "scalar_attn_scale", _bwd),
    OpCase("sdpa_fp8", "training", _fp8),
    OpCase("sdpa_fp8_backward", "deterministic", _fp8_bwd),
    OpCase("sdpa_mxfp8", "no_stats", _mxfp8),
    OpCase("sdpa_mxfp8_backward", "caller_dims", _mxfp8_bwd),
]
