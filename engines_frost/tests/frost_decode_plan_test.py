"""CPU tests of the recurrent (decode) plans: what reaches the launcher (kernels/decode.py)
from a graph's buffers and attributes, the overwrite_initial_state aliasing, and the direct
launch's address row. The launcher is replaced by a recorder; numerics are the emulation
test's (frost_decode_emulation_test.py) and the GPU's (tests/numerics/test_la_decode_gpu.py).
"""
import types

import pytest
from frost_graphs import op_graph

import cudnn
from cudnn.linear_attention.frost import decode_engine, runtime_probe
from cudnn.linear_attention.frost.kernels import decode as kernels_decode

torch = pytest.importorskip("torch")
D = cudnn.data_type
TORCH = {D.BFLOAT16: torch.bfloat16, D.HALF: torch.float16, D.FLOAT: torch.float32,
         D.INT32: torch.int32}
STREAM = object()


@pytest.fixture
def calls(monkeypatch):
    monkeypatch.setattr(runtime_probe, "runtime_reason", lambda engine, device=None: None)
    monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: 90)
    monkeypatch.setattr(decode_engine, "_build_device", lambda handle, engine: torch.device("cpu"))
    seen = []
    monkeypatch.setattr(kernels_decode, "frost_decode", lambda **kw: seen.append(kw))
    return seen


def run(op="gdn", skip=(), same_final=True, **kw):
    g, node = op_graph(op, handle=types.SimpleNamespace(device=torch.device("cuda", 0),
                                                        stream=STREAM), **kw)
    g.create_execution_plans()
    assert g.explain_plans().plans[0].name == f"{op}_frost_decode"
    g.build_plans()
    bufs = {}
    for port, t in {**node.inputs, **node.outputs}.items():
        if port in skip:
            continue
        dtype = TORCH[t.data_type] if t.data_type else torch.bfloat16
        bufs[port] = torch.zeros(t.dim, dtype=dtype)
    if "final_state" in bufs and "initial_state" in bufs:
        bufs["final_state"] = bufs["initial_state"] if same_final else bufs["initial_state"].clone()
    tensors = {**node.inputs, **node.outputs}
    g.execute({tensors[p]: b for p, b in bufs.items()}, None)
    return bufs


POOL = dict(T=6, N=6, with_h0=True, extra_inputs=("state_indices", "a_log", "dt_bias"),
            dims={"initial_state": [9, 4, 64, 64]}, output_final_state=True,
            overwrite_initial_state=True, safe_gate=True, use_beta_sigmoid=True,
            allow_neg_eigval=True, checkpoint_every_n_tokens=1, use_qk_l2norm=True)


def test_pool_call_reaches_the_launcher_with_every_flag(calls):
    bufs = run("kda", **POOL, gate_lower_bound=-2.0)
    (kw,) = calls
    assert kw["initial_state"] is bufs["initial_state"] and kw["final_state"] is bufs["initial_state"]
    assert kw["state_indices"] is bufs["state_indices"] and kw["checkpoints"] is bufs["state_checkpoints"]
    assert kw["a_log"] is bufs["a_log"] and kw["dt_bias"] is bufs["dt_bias"] and kw["out"] is bufs["O"]
    assert (kw["family"], kw["checkpoint_every"], kw["gate_lower_bound"]) == ("kda", 1, -2.0)
    assert kw["safe_gate"] and kw["beta_sigmoid"] and kw["neg_eigval"] and kw["use_l2norm"]
    assert not kw["linear_gate"] and kw["scale"] == pytest.approx(64 ** -0.5)


def test_overwrite_with_another_final_state_buffer_is_refused(calls):
    with pytest.raises(ValueError, match="overwrite_initial_state=True writes the final state "
                                         "into the initial_state buffer"):
        run("gdn", same_final=False, **POOL)


def test_gate_domain_and_plain_rows(calls):
    bufs = run("gdn2", T=3, N=3, with_h0=True, output_final_state=True, gate_domain="linear")
    (kw,) = calls
    assert kw["linear_gate"] and kw["state_indices"] is None and kw["checkpoints"] is None
    assert kw["final_state"] is bufs["final_state"] and kw["w"] is bufs["w"]


def test_direct_launch_row_aliases_the_pool_under_overwrite(calls, monkeypatch):
    launched = []

    class Bound:
        def with_scale(self, scale):
            return lambda row, stream: launched.append((list(row), scale, stream))

    monkeypatch.setattr(kernels_decode, "bind_decode", lambda **kw: Bound())
    g, node = op_graph("gdn", **POOL)
    from cudnn.linear_attention.common.facts import linear_attention_facts
    plan = decode_engine._DecodePlan("gdn_frost_decode", decode_engine.GDN,
                                     linear_attention_facts(g), torch.device("cpu"))
    data = {}
    for port, t in {**node.inputs, **node.outputs}.items():
        if port != "final_state":
            data[t.uid] = torch.zeros(t.dim, dtype=TORCH.get(t.data_type, torch.bfloat16))
    direct = plan.direct_launch(g, data)
    assert direct.takes_addresses
    addresses = list(range(1000, 1000 + len(direct.uids)))
    direct.launch(addresses, None, 77)
    row, _, stream = launched[0]
    names = kernels_decode.DECODE_OPERANDS
    assert stream == 77 and row[names.index("final_state")] == row[names.index("initial_state")] != 0
    by_uid = dict(zip(direct.uids, addresses))
    assert row[names.index("state_indices")] == by_uid[node.inputs["state_indices"].uid]
    assert row[names.index("w")] == 0  # absent operand


def test_the_dsl_convention_reuses_pointer_objects_while_addresses_repeat():
    """A DecodeLaunch of a kernel in the DSL's own calling convention ("cute") passes typed
    pointers; a cached call repeats most addresses, so their objects are kept, and an
    operand whose address changed gets a new one of its dtype."""
    pytest.importorskip("cutlass")
    from cudnn.linear_attention.frost.kernels.decode_config import FrostDecodeConfig

    cfg = FrostDecodeConfig(family="kda", io_dtype="bfloat16", state_dtype="float32", H=2,
                            HK=2, HV=2, K=64, V=64, use_l2norm=False, has_initial_state=True,
                            has_final_state=True, has_pool=True)
    calls = []
    launch = kernels_decode.DecodeLaunch(cfg, lambda *a: calls.append(a), "cute", (), 3, 3, 9)
    names = kernels_decode.DECODE_OPERANDS
    first = [4096 * (i + 1) for i in range(len(names))]
    second = list(first)
    second[names.index("q")] += 512
    run = launch.with_scale(0.125)
    run(first, 5)
    run(second, 5)
    a, b = calls
    assert len(a) == len(names) + 5
    for i, name in enumerate(names):
        assert (a[i] is b[i]) == (name != "q"), name
    assert str(a[names.index("g")].dtype) == "Float32" and str(b[0].dtype) == "BFloat16"



def _kda_operands(N=3, S=5, K=128, V=64, HO=2, state_offset=0, q_offset=0):
    """KDA pool operands on the CPU; state_offset / q_offset elements shift that buffer's
    start (a view into a larger allocation) to break vector alignment."""
    def buf(shape, dtype, offset=0):
        n = 1
        for d in shape:
            n *= d
        return torch.zeros(n + offset, dtype=dtype)[offset:].view(shape)
    pool = buf((S, HO, V, K), torch.float32, state_offset)
    return dict(q=buf((N, HO, K), torch.bfloat16, q_offset), k=buf((N, HO, K), torch.bfloat16),
                v=buf((N, HO, V), torch.bfloat16), g=buf((N, HO, K), torch.float32),
                beta=buf((N, HO), torch.float32), w=None,
                cu_seqlens=torch.arange(N + 1, dtype=torch.int32),
                out=buf((N, HO, V), torch.bfloat16), initial_state=pool, final_state=pool,
                state_indices=torch.arange(N, dtype=torch.int32), a_log=None, dt_bias=None,
                checkpoints=None, family="kda", use_l2norm=True)


@pytest.mark.parametrize("env, want", [(None, True), ("0", False), ("1", True)])
def test_contiguous_channels_follow_the_environment(monkeypatch, env, want):
    if env is None:
        monkeypatch.delenv(kernels_decode.CONTIGUOUS_ENV, raising=False)
    else:
        monkeypatch.setenv(kernels_decode.CONTIGUOUS_ENV, env)
    cfg = kernels_decode.check_decode_operands(**_kda_operands()).config
    assert cfg.contiguous_channels is want
    # an explicit argument wins over the environment
    assert kernels_decode.check_decode_operands(
        **_kda_operands(), contiguous_channels=not want).config.contiguous_channels is (not want)


@pytest.mark.parametrize("shift", ["state_offset", "q_offset"])
def test_contiguous_channels_fall_back_where_a_vector_would_be_misaligned(shift):
    """A pool or q starting off a vector boundary (element-aligned: still served) takes the
    element-wise map."""
    from cudnn.linear_attention.frost.kernels.decode_config import decode_operand_alignment

    aligned = kernels_decode.check_decode_operands(**_kda_operands(), contiguous_channels=True)
    assert aligned.config.contiguous_channels
    need = decode_operand_alignment(aligned.config)
    assert need["initial_state"] == 16 and need["q"] == 8 and need["v"] == 2
    shifted = kernels_decode.check_decode_operands(**_kda_operands(**{shift: 1}),
                                                   contiguous_channels=True)
    assert not shifted.config.contiguous_channels



def test_wide_tiles_only_under_the_environment_and_for_full_waves(monkeypatch):
    monkeypatch.delenv(kernels_decode.WIDE_TILE_ENV, raising=False)
    assert kernels_decode.choose_block_v(1024, 16, 128) == 32
    assert kernels_decode.serving_block_vs() == (16, 32)
    monkeypatch.setenv(kernels_decode.WIDE_TILE_ENV, "1")
    assert kernels_decode.serving_block_vs() == (16, 32, 64)
    # 64 rows where the grid still gives two waves of 3 CTAs on each of 132 SMs
    big = next(n for n in range(1, 4096) if n * 16 * 2 >= 2 * 3 * 132)
    assert kernels_decode.choose_block_v(big, 16, 128) == 64
    assert kernels_decode.choose_block_v(big - 1, 16, 128) == 32
    assert kernels_decode.choose_block_v(1, 16, 128) == 16


@pytest.mark.parametrize("variable, read", [
    (kernels_decode.CONTIGUOUS_ENV, lambda: kernels_decode.check_decode_operands(**_kda_operands())),
    (kernels_decode.WIDE_TILE_ENV, kernels_decode.serving_block_vs)])
def test_a_decode_switch_takes_0_or_1(variable, read, monkeypatch):
    """"yes" once read as on for one switch and as off for the other: now both name it."""
    monkeypatch.setenv(variable, "yes")
    with pytest.raises(ValueError, match=variable):
        read()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
