"""cudnn.backend.lowering on CPU for the classic ops that lower through their own
descriptors or the extension's composite graphs (batchnorm_inference, block-scale quantize /
dequantize, MoE grouped matmul forward/backward, slice, transpose, RoPE forward/backward,
FP8 SDPA forward/backward) and those the backend declines (MXFP8 SDPA): the builder call each
node becomes, its keywords, pushed uids (composite internal tensors included), and declines
that name the cuDNN version or the GPU. When a libcudnn loads here, cuDNN also finalizes
every descriptor (no GPU needed).
"""
import json
import re

import pytest

import cudnn
from cudnn.backend import loader, lowering
from cudnn.ops import registry

EXT = loader.extension()
if EXT is None:
    raise ImportError("lowering tests need the built extension: " + loader.unavailable_reason())

from fake_cudnn import CudnnScript, FakeExtension  # noqa: E402

DT = cudnn.data_type
SCHEMAS = {s["method"]: s for s in EXT.op_schemas()}
CLASSIC = ["batchnorm_inference", "block_scale_quantize", "block_scale_dequantize",
           "moe_grouped_matmul", "moe_grouped_matmul_bwd", "slice", "transpose", "rope",
           "rope_backward", "sdpa_fp8", "sdpa_fp8_backward", "sdpa_mxfp8", "sdpa_mxfp8_backward"]


def new_graph():
    return cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                         compute_data_type=DT.FLOAT)


def lowered_of(g, ext=EXT, handle=None):
    g.validate()
    lowered = lowering.lower(g, ext, handle=handle)
    if loader.is_available():
        lowered.backend.finalize_op_descriptors()  # cuDNN checks every descriptor
    return lowered


def only_op(lowered):
    (op,) = lowered.backend.ops()
    return op


def device(sm):
    """A stand-in extension whose handle's GPU is sm_<sm> (cuDNN's device JSON)."""
    return FakeExtension(CudnnScript(device_json=json.dumps({"deviceVer": sm * 10})))


# -- every IR op of the classic surface has a builder with the IR's keywords ----------------
def ir_keywords(spec):
    names = {p.name for p in spec.ports if p.to_backend and not p.python_only}
    names |= {a.name for a in spec.attrs if not a.python_only} | {"name"}
    return names | (set() if spec.no_cdt else {"compute_data_type"})


def builder_keywords(schema):
    names = {p["name"] for p in schema["inputs"]} | {a["name"] for a in schema["attrs"]}
    return names | {"name"} | ({"compute_data_type"} if schema["takes_compute_data_type"] else set())


@pytest.mark.parametrize("method", CLASSIC)
def test_each_classic_op_has_a_builder_taking_the_ir_keywords(method):
    spec = registry.all_specs()[method]
    assert spec.backend_method == method
    assert builder_keywords(SCHEMAS[method]) == ir_keywords(spec)
    assert SCHEMAS[method]["outputs"] == list(spec.output_names)


def test_no_lowerable_ir_op_lacks_a_builder():
    missing = [name for name, spec in registry.all_specs().items()
               if spec.backend_method and not spec.python_only
               and spec.backend_method not in SCHEMAS]
    assert missing == []


# -- one builder call per node --------------------------------------------------------------
def test_batchnorm_inference_is_one_call_with_three_internal_tensors():
    g = new_graph()
    x = g.tensor(dim=[4, 16, 2, 2], stride=[64, 1, 32, 16])
    stats = [g.tensor(dim=[1, 16, 1, 1], stride=[16, 1, 16, 16], data_type=DT.FLOAT, name=n)
             for n in ("mean", "inv_var", "scale", "bias")]
    y = g.batchnorm_inference(x, *stats)
    y.set_output(True)
    lowered = lowered_of(g)
    op, bt = only_op(lowered), lowered.tensors
    assert op["kind"] == "batchnorm_inference"
    assert op["inputs"] == {"input": bt[x], "mean": bt[stats[0]], "inv_variance": bt[stats[1]],
                            "scale": bt[stats[2]], "bias": bt[stats[3]]}
    internal = [t.get_uid() for t in op["internals"].values()]
    assert list(op["internals"]) == ["centered", "normalized", "scaled"]
    assert lowered.internal_uids == frozenset(internal)
    assert min(internal) > max(t.uid for t in g.all_tensors())
    assert bt[y].get_stride() == [64, 1, 32, 16]  # NHWC kept, copied back to the IR
    lowered.verify_uids()


def test_slice_and_transpose_keep_their_attributes():
    g = new_graph()
    x = g.tensor(dim=[6, 48, 96])
    y = g.slice(x, slices=[slice(1, 5), slice(None), slice(-88, None, 2)])
    z = g.transpose(x, permutation=[2, 0, 1])
    for t in (y, z):
        t.set_output(True)
    sliced, transposed = lowered_of(g).backend.ops()
    assert sliced["attrs"] == {"slices": [slice(1, 5), slice(None), slice(-88, None, 2)]}
    assert transposed["attrs"] == {"permutation": [2, 0, 1]}
    assert list(y.dim) == [4, 48, 44] and list(z.dim) == [96, 6, 48]


def test_slice_with_a_negative_step_is_a_decline():
    g = new_graph()
    g.slice(g.tensor(dim=[8, 8]), slices=[slice(None, None, -1)]).set_output(True)
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="positive strides only"):
        lowering.lower(g, EXT)


def test_rope_forward_and_block_scale_quantize_dequantize_attributes():
    g = new_graph()
    x, freqs = g.tensor(dim=[2, 4, 16, 64]), g.tensor(dim=[16, 1, 1, 64], data_type=DT.FLOAT)
    r = g.rope(x, freqs, output_scale=0.5, rope_dim=32)
    a = g.tensor(dim=[64, 256], data_type=DT.FLOAT)
    y, scale = g.block_scale_quantize(a, block_size=32)
    y.set_data_type(DT.FP8_E4M3)
    scale.set_data_type(DT.FP8_E8M0)
    back = g.block_scale_dequantize(y, scale, block_size=[1, 32])
    for t in (r, back):
        t.set_output(True)
    back.set_data_type(DT.FLOAT)
    rope, quantize, dequantize = lowered_of(g).backend.ops()
    assert rope["attrs"] == {"output_scale": 0.5, "rope_dim": 32}
    assert quantize["attrs"] == {"block_size": 32}
    assert quantize["outputs"]["scale"].get_dim() == [64, 8]
    assert dequantize["attrs"] == {"block_size": [1, 32]}


def test_moe_grouped_matmul_forward_and_weight_gradient():
    g = new_graph()
    token = g.tensor(dim=[1, 96, 64])
    weight = g.tensor(dim=[4, 64, 32], stride=[2048, 1, 64])  # column-major experts
    offsets = g.tensor(dim=[4, 1, 1], data_type=DT.INT32)
    out = g.moe_grouped_matmul(token, weight, offsets)
    dweight = g.moe_grouped_matmul_bwd(g.tensor(dim=[1, 96, 32]), token, offsets)
    for t in (out, dweight):
        t.set_output(True)
    lowered = lowered_of(g)
    fwd, bwd = lowered.backend.ops()
    assert fwd["attrs"] == {} and list(fwd["inputs"]) == ["token", "weight", "first_token_offset"]
    assert lowered.tensors[out].get_dim() == [1, 96, 32]
    assert bwd["outputs"]["dweight"].get_dim() == [4, 64, 32]  # pushed: the IR's dims


@pytest.mark.parametrize("mode, routing, attrs, rows", [
    ("GATHER", ["token_index"], {"mode": 2}, 74),
    ("SCATTER", ["token_index", "token_ks"], {"mode": 3, "top_k": 2}, 74),
])
def test_moe_routed_modes_pass_their_routing_tensors(mode, routing, attrs, rows):
    """GATHER reads 37 tokens through 74 routed rows (top-2); SCATTER writes 74 routed rows
    back to 37 x 2 token slots: the output has one row per routed row in both."""
    g = new_graph()
    token = g.tensor(dim=[1, 37 if mode == "GATHER" else 74, 64])
    weight = g.tensor(dim=[4, 64, 32], stride=[2048, 1, 64])
    offsets = g.tensor(dim=[4, 1, 1], data_type=DT.INT32)
    tensors = {name: g.tensor(dim=[1, 74, 1], data_type=DT.INT32) for name in routing}
    out = g.moe_grouped_matmul(token, weight, offsets, **tensors,
                               mode=getattr(cudnn.moe_grouped_matmul_mode, mode),
                               top_k=attrs.get("top_k", 0))
    out.set_output(True)
    lowered = lowered_of(g)
    op = only_op(lowered)
    assert list(op["inputs"]) == ["token", "weight", "first_token_offset"] + routing
    assert {k: op["attrs"][k] for k in attrs} == attrs
    assert lowered.tensors[out].get_dim() == [1, rows, 32]


def test_moe_combine_is_a_decline_naming_the_engine_that_serves_it():
    g = new_graph()
    token, scores = g.tensor(dim=[1, 96, 64]), g.tensor(dim=[1, 48, 2])
    offsets = g.tensor(dim=[4, 1, 1], data_type=DT.INT32)
    out = g.moe_grouped_matmul(token, g.tensor(dim=[4, 64, 32]), offsets,
                               mode=cudnn.moe_grouped_matmul_mode.COMBINE, top_k_scores=scores)
    out.set_output(True)
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="COMBINE.*FROST GEMM engine"):
        lowering.lower(g, EXT)


def fp8_attention(g, backward=False):
    b, h, s, d = 2, 4, 64, 128
    fp8 = [g.tensor(dim=[b, h, s, d], data_type=DT.FP8_E4M3, name=n)
           for n in (("q", "k", "v", "o", "dO") if backward else ("q", "k", "v"))]
    if backward:
        stats = g.tensor(dim=[b, h, s, 1], data_type=DT.FLOAT, name="stats")
        scales = [g.tensor(dim=[1, 1, 1, 1], data_type=DT.FLOAT) for _ in range(12)]
        outs = g.sdpa_fp8_backward(*fp8, stats, *scales, attn_scale=0.125)
    else:
        scales = [g.tensor(dim=[1, 1, 1, 1], data_type=DT.FLOAT) for _ in range(6)]
        outs = g.sdpa_fp8(*fp8, *scales, attn_scale=0.125, generate_stats=True)
    for t in outs:
        t.set_output(True).set_data_type(DT.FLOAT)
    for t in outs[:1 if not backward else 3]:
        t.set_data_type(DT.FP8_E4M3)
    return fp8, outs


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_fp8_sdpa_is_one_composite_call_with_its_internal_tensors(backward):
    g = new_graph()
    inputs, outs = fp8_attention(g, backward)
    lowered = lowered_of(g)
    op = only_op(lowered)
    assert op["method"] == ("sdpa_fp8_backward" if backward else "sdpa_fp8")
    assert [t.get_uid() for t in op["outputs"].values()] == [t.uid for t in outs]
    internals = op["internals"]
    assert ("P_fp8" in internals) and ("dS_fp8" in internals) == backward
    assert internals["P_fp8"].get_data_type() == DT.FP8_E4M3.value
    assert len(internals) == (30 if backward else 14)  # attn_scale given
    assert lowered.internal_uids >= {t.get_uid() for t in internals.values()}
    # K keeps its IR uid and dims; the descriptor sees it transposed (K^T), over its memory
    assert lowered.tensors[inputs[1]].get_dim() == [2, 4, 64, 128]
    lowered.verify_uids()


def test_fp8_sdpa_keeps_k_to_itself():
    g = new_graph()
    (q, k, _), outs = fp8_attention(g)
    g.identity(k).set_output(True)
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="k .*must not be read by any other op"):
        lowering.lower(g, EXT)


# -- declines name the GPU or the cuDNN version -------------------------------------------
def declined_on(g, ext, handle, match):
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=match):
        lowering.lower(g, ext, handle=handle)
    return ext


def mxfp8_forward(g):
    b, h, s, d = 1, 2, 128, 128
    q, k, v = (g.tensor(dim=[b, h, s, d], data_type=DT.FP8_E4M3) for _ in range(3))
    sq = g.tensor(dim=[b, h, s, d // 32], data_type=DT.FP8_E8M0)
    sv = g.tensor(dim=[b, h, s // 32, d], data_type=DT.FP8_E8M0)
    o, _, _ = g.sdpa_mxfp8(q, k, v, sq, sq, sv, generate_stats=False)
    o.set_output(True)


def test_mxfp8_sdpa_on_hopper_declines_naming_blackwell_before_recording():
    g = new_graph()
    mxfp8_forward(g)
    ext = declined_on(g, device(90), 0x1, r"No valid engine configs for SDPA_MXFP8: node "
                                          r"'sdpa_mxfp8.0': sdpa_mxfp8 needs sm_100\+ \(MXFP8 "
                                          r"attention runs on cuDNN's Blackwell.*this device is "
                                          r"sm_90")
    assert ext.graphs == []  # a static decline: nothing was recorded


def test_mxfp8_sdpa_on_blackwell_or_an_unknown_device_declines_in_the_extension():
    for ext, handle in ((device(100), 0x1), (FakeExtension(), None)):
        g = new_graph()
        mxfp8_forward(g)
        loaded = EXT.cudnn_version() if loader.is_available() else None
        why = "needs cuDNN >= 9.21.0" if loaded and loaded < 92100 else "no MXFP8 lowering"
        declined_on(g, ext, handle, why)


def test_fp8_sdpa_below_hopper_and_block_scale_below_blackwell_decline_naming_the_gpu():
    g = new_graph()
    fp8_attention(g)
    declined_on(g, device(89), 0x1, r"sdpa_fp8 needs sm_90\+ .*this device is sm_89")
    g = new_graph()
    y, _ = g.block_scale_quantize(g.tensor(dim=[64, 256], data_type=DT.FLOAT), block_size=32)
    y.set_output(True)
    declined_on(g, device(90), 0x1, r"block_scale_quantize needs sm_100\+ \(cuDNN runs "
                                    r"block-scale.*this device is sm_90")


def test_an_sm_gated_op_on_a_device_that_runs_it_lowers():
    g = new_graph()
    fp8_attention(g)
    g.validate()
    ext = device(90)
    lowering.lower(g, ext, handle=0x1)
    assert [op["method"] for op in ext.graphs[0].real.ops()] == ["sdpa_fp8"]


def test_a_descriptor_newer_than_the_headers_declines_naming_the_version():
    g = new_graph()
    x = g.tensor(dim=[1, 2, 4, 8])
    g.rope_backward(x, g.tensor(dim=[4, 1, 1, 8], data_type=DT.FLOAT)).set_output(True)
    headers = EXT.version()
    match = (r"built against cuDNN 9\.\d+\.\d+ headers, which lack "
             r"CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR \(9\.25\)" if headers < 92500
             else r"rope_backward needs cuDNN >= 9\.25\.0")
    declined_on(g, FakeExtension(), None, match)


def test_the_op_table_states_each_gate():
    rows = {m: SCHEMAS[m] for m in CLASSIC}
    assert {m for m, r in rows.items() if r["min_sm"]} == {
        "sdpa_fp8", "sdpa_fp8_backward", "sdpa_mxfp8", "sdpa_mxfp8_backward",
        "block_scale_quantize", "block_scale_dequantize"}
    assert rows["slice"]["min_version"] == rows["transpose"]["min_version"] == 92200
    assert rows["rope"]["min_version"] == 92400 and rows["rope_backward"]["min_version"] == 92500
    assert rows["moe_grouped_matmul"]["min_version"] == 91800
    assert rows["moe_grouped_matmul_bwd"]["min_version"] == 92200
    assert {m for m, r in rows.items() if r["composite"]} == {
        "batchnorm_inference", "sdpa_fp8", "sdpa_fp8_backward"}
    assert all(re.search("sm_|Blackwell|Hopper", r["min_sm_reason"] or "sm_")
               for r in rows.values())


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
