"""Valid calls of the norm, reduction, block-scale, MoE, conv and structural builders.

Expected output dims are written out per case (worked by hand from each op's shape
rule, e.g. conv extents), never computed with the OpSpec inference functions.
"""
from __future__ import annotations

import cudnn
from ir_case_types import Built, OpCase

D = cudnn.data_type
PHASE = cudnn.norm_forward_phase
_CASES: list[OpCase] = []


def case(op: str, case_id: str):
    def register(fn):
        _CASES.append(OpCase(op, case_id, fn))
        return fn
    return register


def _t(g: cudnn.pygraph, *dims: int, dt=D.FLOAT) -> cudnn.Tensor:
    return g.tensor(list(dims), data_type=dt)


def _eps(g: cudnn.pygraph) -> cudnn.Tensor:
    return g.tensor_scalar(1e-5)


# -- norms -------------------------------------------------------------------------------
@case("rmsnorm", "training_scale")
def _(g, rng):
    b, s, d = rng.randint(1, 4), rng.randint(1, 5), rng.randint(2, 9)
    x = _t(g, b, s, d)
    return Built((x, _t(g, 1, 1, d), None, _eps(g)), {},
                 {"Y": (b, s, d), "inv_var": (b, s, 1)}, {"Y": None, "inv_var": None})


@case("rmsnorm", "training_no_scale")
def _(g, rng):
    return Built((_t(g, 3, 4, 5),), {"epsilon": _eps(g)},
                 {"Y": (3, 4, 5), "inv_var": (3, 1, 1)}, {"Y": None, "inv_var": None})


@case("rmsnorm", "inference")
def _(g, rng):
    return Built((_t(g, 3, 4, 5), _t(g, 1, 1, 5), None, _eps(g), PHASE.INFERENCE), {},
                 {"Y": (3, 4, 5), "inv_var": None}, {"Y": None})


@case("rmsnorm_backward", "scale_no_dbias")
def _(g, rng):
    return Built((_t(g, 2, 3, 8), _t(g, 2, 3, 8), _t(g, 1, 1, 8), _t(g, 2, 3, 1)),
                 {"has_dbias": False},
                 {"DX": (2, 3, 8), "DScale": (1, 1, 8), "DBias": None},
                 {"DX": None, "DScale": None})


@case("rmsnorm_backward", "no_scale")
def _(g, rng):
    return Built((_t(g, 2, 3, 8), _t(g, 2, 3, 8)), {"inv_variance": _t(g, 2, 3, 1)},
                 {"DX": (2, 3, 8), "DScale": None, "DBias": None}, {"DX": None})


@case("layernorm", "training")
def _(g, rng):
    return Built((_t(g, 2, 3, 8), _t(g, 1, 1, 8), _t(g, 1, 1, 8), _eps(g)), {},
                 {"Y": (2, 3, 8), "mean": (2, 3, 1), "inv_var": (2, 3, 1)},
                 {"Y": None, "mean": None, "inv_var": None})


@case("layernorm", "sibling_stat_dims")
def _(g, rng):
    # the caller dimensions `mean`; inv_var copies the sibling's caller-set dims
    return Built((_t(g, 2, 3, 8), _t(g, 1, 1, 8), _t(g, 1, 1, 8), _eps(g)),
                 {"out_dims": {"mean": [2, 1, 1]}},
                 {"Y": (2, 3, 8), "mean": (2, 1, 1), "inv_var": (2, 1, 1)},
                 {"Y": None, "mean": None, "inv_var": None}, frozenset({"mean"}))


@case("layernorm_backward", "full")
def _(g, rng):
    return Built((_t(g, 2, 3, 8), _t(g, 2, 3, 8), _t(g, 1, 1, 8), _t(g, 2, 3, 1),
                  _t(g, 2, 3, 1)), {},
                 {"DX": (2, 3, 8), "DScale": (1, 1, 8), "DBias": (1, 1, 8)},
                 {"DX": None, "DScale": None, "DBias": None})


@case("adalayernorm", "per_batch_scale")
def _(g, rng):
    # axis 0 is kept although scale's extent there is not 1
    return Built((_t(g, 2, 3, 8), _t(g, 2, 1, 8), None, _eps(g)), {},
                 {"Y": (2, 3, 8), "mean": (2, 3, 1), "inv_var": (2, 3, 1)},
                 {"Y": None, "mean": None, "inv_var": None})


@case("adalayernorm_backward", "full")
def _(g, rng):
    return Built((_t(g, 2, 3, 8), _t(g, 2, 3, 8), _t(g, 2, 1, 8), _t(g, 2, 3, 1),
                  _t(g, 2, 3, 1)), {},
                 {"DX": (2, 3, 8), "DScale": (2, 1, 8), "DBias": (2, 1, 8)},
                 {"DX": None, "DScale": None, "DBias": None})


@case("instancenorm", "nchw")
def _(g, rng):
    return Built((_t(g, 2, 4, 3, 5), _t(g, 1, 4, 1, 1), _t(g, 1, 4, 1, 1), _eps(g)), {},
                 {"Y": (2, 4, 3, 5), "mean": (2, 4, 1, 1), "inv_var": (2, 4, 1, 1)},
                 {"Y": None, "mean": None, "inv_var": None})


@case("instancenorm_backward", "nchw")
def _(g, rng):
    return Built((_t(g, 2, 4, 3, 5), _t(g, 2, 4, 3, 5), _t(g, 1, 4, 1, 1)), {},
                 {"DX": (2, 4, 3, 5), "DScale": (1, 4, 1, 1), "DBias": (1, 4, 1, 1)},
                 {"DX": None, "DScale": None, "DBias": None})


@case("batchnorm", "running_stats_and_peers")
def _(g, rng):
    c = rng.randint(1, 6)
    stat = (1, c, 1, 1)
    args = (_t(g, 2, c, 3, 5), _t(g, *stat), _t(g, *stat), _t(g, *stat), _t(g, *stat),
            _eps(g), g.tensor_scalar(0.1), [_t(g, 2, c, 1, 1), _t(g, 2, c, 1, 1)])
    return Built(args, {}, {"Y": (2, c, 3, 5), "mean": stat, "inv_var": stat,
                            "next_running_mean": stat, "next_running_var": stat},
                 {k: None for k in ("Y", "mean", "inv_var", "next_running_mean",
                                    "next_running_var")})


@case("batchnorm", "no_running_stats")
def _(g, rng):
    stat = (1, 4, 1, 1)
    return Built((_t(g, 2, 4, 3, 5), _t(g, *stat), _t(g, *stat)), {"epsilon": _eps(g)},
                 {"Y": (2, 4, 3, 5), "mean": stat, "inv_var": stat,
                  "next_running_mean": None, "next_running_var": None},
                 {"Y": None, "mean": None, "inv_var": None})


@case("batchnorm_inference", "nchw")
def _(g, rng):
    stat = (1, 4, 1, 1)
    return Built((_t(g, 2, 4, 3, 5),) + tuple(_t(g, *stat) for _ in range(4)), {},
                 {"Y": (2, 4, 3, 5)}, {"Y": None})


@case("batchnorm_backward", "nchw")
def _(g, rng):
    stat = (1, 4, 1, 1)
    return Built((_t(g, 2, 4, 3, 5), _t(g, 2, 4, 3, 5)) + tuple(_t(g, *stat) for _ in range(3)),
                 {}, {"DX": (2, 4, 3, 5), "DScale": stat, "DBias": stat},
                 {"DX": None, "DScale": None, "DBias": None})


@case("genstats", "nchw")
def _(g, rng):
    return Built((_t(g, 2, 4, 3, 5),), {}, {"SUM": (1, 4, 1, 1), "SQ_SUM": (1, 4, 1, 1)},
                 {"SUM": None, "SQ_SUM": None})


# -- reduction, block scale, MoE -----------------------------------------------------------
@case("reduction", "caller_dims")
def _(g, rng):
    return Built((_t(g, 2, 3, 4), None, cudnn.reduction_mode.ADD), {"out_dims": [2, 1, 4]},
                 {"OUT_0": (2, 1, 4)}, {"OUT_0": None}, frozenset({"OUT_0"}))


@case("block_scale_quantize", "last_axis")
def _(g, rng):
    return Built((_t(g, 4, 70), None, 32), {}, {"Y": (4, 70), "scale": (4, 3)},
                 {"Y": None, "scale": None})


@case("block_scale_quantize", "axis0")
def _(g, rng):
    return Built((_t(g, 4, 70),), {"block_size": 3, "axis": 0, "transpose": True},
                 {"Y": (4, 70), "scale": (2, 70)}, {"Y": None, "scale": None})


@case("block_scale_dequantize", "blocks")
def _(g, rng):
    return Built((_t(g, 4, 64, dt=D.FP8_E4M3), _t(g, 4, 2, dt=D.FP8_E8M0), [1, 32]), {},
                 {"OUT_0": (4, 64)}, {"OUT_0": None})


def _moe_inputs(g):
    return _t(g, 1, 10, 6), _t(g, 3, 6, 5), _t(g, 3, dt=D.INT32)


@case("moe_grouped_matmul", "none")
def _(g, rng):
    return Built(_moe_inputs(g), {}, {"OUT_0": (1, 10, 5)}, {"OUT_0": None})


@case("moe_grouped_matmul", "gather")
def _(g, rng):
    token, weight, offsets = _moe_inputs(g)
    return Built((token, weight, offsets, _t(g, 1, 7, 1, dt=D.INT32), None,
                  cudnn.moe_grouped_matmul_mode.GATHER, 2), {}, {"OUT_0": (1, 7, 5)},
                 {"OUT_0": None})


@case("moe_grouped_matmul", "combine")
def _(g, rng):
    token, weight, offsets = _moe_inputs(g)
    return Built((token, weight, offsets), {"mode": cudnn.moe_grouped_matmul_mode.COMBINE,
                                            "top_k_scores": _t(g, 1, 4, 2)},
                 {"OUT_0": (1, 4, 5)}, {"OUT_0": None})


@case("moe_grouped_matmul_bwd", "dweight")
def _(g, rng):
    return Built((_t(g, 1, 10, 5), _t(g, 1, 10, 6), _t(g, 3, dt=D.INT32)), {},
                 {"dweight": (3, 6, 5)}, {"dweight": None})


# -- convolution ---------------------------------------------------------------------------
@case("conv_fprop", "padded_strided_dilated")
def _(g, rng):
    # h: (9 + 1 + 1 - 3) // 2 + 1 = 5;  w: (11 + 1 + 1 - ((3 - 1) * 2 + 1)) // 1 + 1 = 9
    return Built((_t(g, 2, 4, 9, 11), _t(g, 6, 4, 3, 3)),
                 {"padding": [1, 1], "stride": [2, 1], "dilation": [1, 2]},
                 {"Y": (2, 6, 5, 9)}, {"Y": None})


@case("conv_fprop", "grouped_asymmetric")
def _(g, rng):
    # C = 4 image channels, 2 per group; h: (7 + 0 + 2 - 3) // 1 + 1 = 7, w: (5 + 1 + 0 - 2) + 1
    return Built((_t(g, 1, 4, 7, 5), _t(g, 8, 2, 3, 2)),
                 {"pre_padding": [0, 1], "post_padding": [2, 0]},
                 {"Y": (1, 8, 7, 5)}, {"Y": None})


@case("conv_dgrad", "strided_dilated")
def _(g, rng):
    # h: (5 - 1) * 2 + (3 - 1) * 1 + 1 - 1 - 1 = 9;  w: (9 - 1) * 1 + (3 - 1) * 2 + 1 - 2 = 11
    return Built((_t(g, 2, 6, 5, 9), _t(g, 6, 4, 3, 3)),
                 {"pre_padding": [1, 1], "post_padding": [1, 1], "stride": [2, 1],
                  "dilation": [1, 2]},
                 {"DX": (2, 4, 9, 11)}, {"DX": None})


@case("conv_wgrad", "caller_dims")
def _(g, rng):
    return Built((_t(g, 2, 4, 9, 11), _t(g, 2, 6, 9, 11)), {"out_dims": [6, 4, 3, 3]},
                 {"DW": (6, 4, 3, 3)}, {"DW": None}, frozenset({"DW"}))


# -- structural ----------------------------------------------------------------------------
@case("reshape", "caller_dims")
def _(g, rng):
    return Built((_t(g, 2, 3, 4),), {"out_dims": [6, 4]}, {"OUT_0": (6, 4)}, {"OUT_0": None},
                 frozenset({"OUT_0"}))


@case("slice", "steps")
def _(g, rng):
    # range(2, 9, 3) -> 2, 5, 8; reversed full axis keeps 8; the last axis is untouched
    return Built((_t(g, 10, 8, 3, dt=D.HALF), [slice(2, 9, 3), slice(None, None, -1)]), {},
                 {"OUT_0": (3, 8, 3)}, {"OUT_0": D.HALF})


@case("transpose", "rotate")
def _(g, rng):
    return Built((_t(g, 2, 3, 4), [2, 0, 1]), {}, {"OUT_0": (4, 2, 3)}, {"OUT_0": None})


@case("concatenate", "axis1")
def _(g, rng):
    return Built(([_t(g, 2, 3, 4), _t(g, 2, 5, 4), _t(g, 2, 1, 4)], 1), {},
                 {"OUT_0": (2, 9, 4)}, {"OUT_0": None})


@case("concatenate", "negative_axis")
def _(g, rng):
    return Built(([_t(g, 2, 3), _t(g, 2, 4)],), {"axis": -1, "in_place_index": 0},
                 {"OUT_0": (2, 7)}, {"OUT_0": None})


@case("rope", "scaled")
def _(g, rng):
    return Built((_t(g, 2, 3, 8), _t(g, 3, 8)), {"output_scale": 0.5, "rope_dim": 8},
                 {"OUT_0": (2, 3, 8)}, {"OUT_0": None})


@case("rope_backward", "plain")
def _(g, rng):
    return Built((_t(g, 2, 3, 8), _t(g, 3, 8)), {}, {"OUT_0": (2, 3, 8)}, {"OUT_0": None})


CASES: list[OpCase] = list(_CASES)
