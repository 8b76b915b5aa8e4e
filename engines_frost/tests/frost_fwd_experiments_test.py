"""The test and bench tooling's forward configs (frost_fwd_experiments.py) against the product's.

Plain Python but for the class test (CuTe DSL, skipped without it): an experiment config
validates its kernel layer and knobs, keys the kernel store apart from every product
config, names its kernel in describe lines and maps to the class that reads the knobs;
tooling_config leaves the layer the product picks on the product config (wgmma for every
forward on sm_90a, training calls included; pipelined on other archs) and forces any other as an
experiment; use_kernel routes frost_fwd's compile lookup and puts it back (training
forwards only when asked, and only to a layer with training launchers).
"""
import dataclasses
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels import kernel_store  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402

import frost_fwd_experiments as fx  # noqa: E402

CFG = FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=2, HK=2, HV=2, K=64, V=64,
                     gate_per_channel=True, beta_per_channel=False, has_w=False, use_l2norm=False,
                     has_initial_state=True, has_final_state=True, gate_align16=True)
TOOLS = {"cutlass_dsl": "x", "dsl_cuda": "13.0", "tvm_ffi": "-", "machine": "x86_64", "sources": "s"}


def _key(cfg):
    return kernel_store.entry_key(cfg, "sm_90a", "cute", TOOLS, host="h")


def test_experiment_validates_its_version_and_knobs():
    for over, name in ((dict(algorithm="v9"), "algorithm"), (dict(skip_stages=("solve",)), "skip_stages"),
                       (dict(algorithm="oracle", skip_stages=("chain",)), "skip_stages"),
                       (dict(algorithm="oracle", ldmatrix=False), "ldmatrix")):
        with pytest.raises(ValueError, match=f"FrostFwdExperiment: {name} must be"):
            fx.experiment(CFG, **over)
    ckpt = dataclasses.replace(CFG, write_checkpoints=True)
    fx.experiment(ckpt, "pipelined")  # the kernels that write them
    fx.experiment(ckpt, "wgmma")
    fx.experiment(dataclasses.replace(ckpt, write_values=True), "wgmma")
    assert fx.experiment(ckpt).algorithm == "wgmma"  # the product's pick for a bf16 training call
    assert fx.experiment(dataclasses.replace(ckpt, io_dtype="float16")).algorithm == "wgmma"  # for an fp16 one
    for algorithm in ("oracle", "mma"):
        with pytest.raises(ValueError, match="write_checkpoints must be False unless algorithm is one of"):
            fx.experiment(ckpt, algorithm)
    with pytest.raises(ValueError, match="FrostFwdConfig: HK must be"):  # the product rules still hold
        fx.FrostFwdExperiment(**{**dataclasses.asdict(CFG), "HK": 3}, algorithm="wgmma")
    listed = fx.experiment(CFG, skip_stages=["chain"])  # as JSON gives it
    assert listed.skip_stages == ("chain",) and hash(listed) == hash(fx.experiment(CFG, skip_stages=("chain",)))


def test_four_role_skips_are_their_own():
    """The four-role kernel honours "gram", "inverse" and "chain" only (FourRoles.math, the
    chain's consume); "inverse" means nothing to the other kernels."""
    gdn = dataclasses.replace(CFG, gate_per_channel=False, gate_align16=False, K=128, V=128)
    for skip in (("inverse",), ("gram",), ("chain",), ("gram", "chain")):
        cfg = fx.experiment(gdn, "wgmma", skip_stages=skip, decay="wyc-ws4raw", gram="wgmma64")
        assert cfg.skip_stages == skip and "skip=" + "+".join(skip) in cfg.kernel_label
    for skip in (("rows",), ("bounds",)):
        with pytest.raises(ValueError, match="skip_stages must be"):
            fx.experiment(gdn, "wgmma", skip_stages=skip, decay="wyc-ws4raw", gram="wgmma64")
    with pytest.raises(ValueError, match="skip_stages must be"):
        fx.experiment(gdn, "wgmma", skip_stages=("inverse",))


def test_experiment_keys_apart_from_the_product():
    """A product config's store key covers exactly its product fields; an experiment's
    covers its version, knobs and the tooling's source hash as well, so no experiment
    kernel (not even plain pipelined as an experiment) is served for a product config."""
    fields = kernel_store.key_fields(CFG, "sm_90a", "cute", TOOLS, host="h")["config"]
    assert set(fields) == {f.name for f in dataclasses.fields(FrostFwdConfig)}
    exp = fx.experiment(CFG, "pipelined")
    assert set(kernel_store.key_fields(exp, "sm_90a", "cute", TOOLS, host="h")["config"]) - set(fields) == {
        "algorithm", "skip_stages", "ldmatrix", "gram", "decay", "ws_regs", "rows", "stores", "sources"}
    assert exp.sources == fx.sources_hash() and len(exp.sources) == 16
    keys = {_key(c) for c in (CFG, exp, fx.experiment(CFG, "wgmma"), fx.experiment(CFG, ldmatrix=False),
                              fx.experiment(CFG, skip_stages=("bounds",)),
                              dataclasses.replace(exp, sources="0" * 16))}
    assert len(keys) == 6
    assert exp != CFG and fx.experiment(CFG, "pipelined") == exp
    # the wgmma Gram (scalar gates): keyed apart from wgmma with the pipelined layer's Gram and from the product
    gdn = dataclasses.replace(CFG, gate_per_channel=False, gate_align16=False)
    gram = fx.tooling_config(gdn, "wgmma", gram="wgmma")
    folded = fx.experiment(gdn, "wgmma", decay="folded")
    assert gram.gram == "wgmma" and gram.decay == "folded"  # the Gram's experiments ran on the folded chain
    assert len({_key(gdn), _key(folded), _key(gram)}) == 3
    assert kernel_store.describe(gram).startswith("wgmma gram-wgmma gdn")
    # the decays: scaled is the product's chain for scalar gates (so the product config and
    # the default), folded the experiment; dropped where the choice does not exist (vector
    # gates), and scaled refused together with a wgmma Gram
    assert fx.tooling_config(gdn, "wgmma", decay="scaled") is gdn and fx.tooling_config(gdn, "wgmma") is gdn
    assert fx.experiment(gdn, "wgmma").decay == "scaled" and folded.decay == "folded"
    assert fx.tooling_config(gdn, "wgmma", decay="folded") == folded
    lead = fx.tooling_config(gdn, "wgmma", decay="scaled-lead")
    assert len({_key(gdn), _key(folded), _key(gram), _key(lead), _key(fx.experiment(gdn, "wgmma"))}) == 5
    assert kernel_store.describe(folded).startswith("wgmma gdn")
    assert kernel_store.describe(lead).startswith("wgmma decay-scaled-lead gdn")
    assert fx.tooling_config(CFG, "wgmma", decay="scaled") == fx.tooling_config(CFG, "wgmma")
    assert fx.tooling_config(CFG, "wgmma", decay="folded") is CFG
    with pytest.raises(ValueError, match="decay must be 'folded' or 'scaled-ws' with a wgmma gram"):
        fx.experiment(gdn, "wgmma", gram="wgmma", decay="scaled")
    with pytest.raises(ValueError, match="decay must be one of"):
        fx.experiment(gdn, "pipelined", decay="scaled")


def test_ws_register_split_is_a_keyed_knob_of_the_warp_specialised_kernel_only(monkeypatch):
    """ws_regs (FROST_FWD_WS_REGS): only beside decay 'scaled-ws', a pair the register file
    holds; keyed apart from the kernel's own split; dropped by tooling_config where the
    warp-specialised kernel does not run; read by use_kernel on entry."""
    gdn = dataclasses.replace(CFG, gate_per_channel=False, gate_align16=False, K=128, V=128)
    ws = fx.tooling_config(gdn, "wgmma", decay="scaled-ws")
    split = fx.tooling_config(gdn, "wgmma", decay="scaled-ws", ws_regs=(184, 72))
    assert ws.ws_regs == () and split.ws_regs == (184, 72) and split.decay == "scaled-ws"
    assert len({_key(ws), _key(split), _key(fx.tooling_config(gdn, "wgmma", decay="scaled-ws", ws_regs=[200, 56]))}) == 3
    assert kernel_store.describe(split).startswith("wgmma decay-scaled-ws regs=184/72 gdn")
    assert fx.tooling_config(gdn, "wgmma", decay="scaled", ws_regs=(184, 72)) is gdn  # no ws kernel: dropped
    for regs in ((184, 80), (180, 72), (184,), (256, 16)):  # over the file, not multiples of 8, not a pair, < 24
        with pytest.raises(ValueError, match="FrostFwdExperiment: ws_regs must be"):
            fx.experiment(gdn, "wgmma", decay="scaled-ws", ws_regs=regs)
    with pytest.raises(ValueError, match="FrostFwdExperiment: ws_regs must be"):
        fx.experiment(gdn, "wgmma", decay="scaled", ws_regs=(184, 72))
    monkeypatch.delenv(fx.WS_REGS_ENV, raising=False)
    assert fx.ws_regs_requested() == ()
    monkeypatch.setenv(fx.WS_REGS_ENV, " 184,72 ")
    assert fx.ws_regs_requested() == (184, 72)
    from cudnn.linear_attention.frost.kernels import fwd

    product, seen = fwd._compiled, []
    fwd._compiled = lambda cfg, arch, ffi=None, device=None: seen.append(cfg)
    try:
        with fx.use_kernel(fx.PRODUCT, decay="scaled-ws"):
            fwd._compiled(gdn, "sm_90a")
    finally:
        fwd._compiled = product
    assert seen == [split]
    for text in ("184", "184,x", "184,80"):
        monkeypatch.setenv(fx.WS_REGS_ENV, text)
        with pytest.raises(ValueError, match="FROST_FWD_WS_REGS must be"):
            fx.ws_regs_requested()


def test_describe_names_the_kernel():
    assert kernel_store.describe(CFG).startswith("fwd kda H2/HK2/HV2 K64 V64 bfloat16")
    assert kernel_store.describe(fx.experiment(CFG, "wgmma")).startswith("wgmma kda")
    line = kernel_store.describe(fx.experiment(CFG, "mma", ldmatrix=False, skip_stages=("rows", "gram")))
    assert line.startswith("mma no-ldmatrix skip=rows+gram kda")


def test_tooling_config_keeps_the_product_pick_on_the_product_config():
    # plain bf16 on sm_90a: the product compiles wgmma, so wgmma is the product config and pipelined is forced
    assert fx.product_algorithm(CFG) == "wgmma"
    assert fx.tooling_config(CFG) is CFG and fx.tooling_config(CFG, "wgmma") is CFG
    assert fx.tooling_config(CFG, "pipelined") == fx.experiment(CFG, "pipelined") and fx.experiment(CFG, "pipelined") != CFG
    assert fx.tooling_config(CFG, skip_stages=["chain"]) == fx.experiment(CFG, "wgmma", skip_stages=("chain",))
    fp16 = dataclasses.replace(CFG, io_dtype="float16")  # fp16 on wgmma as well (folded decays)
    assert fx.product_algorithm(fp16) == "wgmma" and fx.tooling_config(fp16, "wgmma") is fp16
    assert fx.tooling_config(fp16, "pipelined") == fx.experiment(fp16, "pipelined")
    # bf16 training forwards on sm_90a: wgmma as well (its training launchers), so a forced pipelined
    # is the experiment there, the A/B against the training forward the product ran before
    ckpt = dataclasses.replace(CFG, write_checkpoints=True)
    assert fx.product_algorithm(ckpt) == "wgmma"
    assert fx.engine_config(ckpt, "pipelined") is ckpt  # training forwards stay on the product's kernel...
    # ...unless the caller routes them too: the pipelined layer's training launchers forced, wgmma as the product
    assert fx.engine_config(ckpt, "pipelined", training=True) == fx.experiment(ckpt, "pipelined")
    assert fx.engine_config(ckpt, "pipelined", training=True) != ckpt
    assert fx.engine_config(ckpt, "wgmma", training=True) is ckpt
    assert fx.engine_config(ckpt, fx.PRODUCT, training=True) is ckpt
    assert fx.engine_config(CFG, "wgmma", training=True) is CFG  # plain forwards as without the flag
    assert fx.engine_config(CFG, "pipelined") == fx.experiment(CFG, "pipelined")
    assert fx.engine_config(CFG, "pipelined", training=True) == fx.experiment(CFG, "pipelined")
    # fp16 training forwards on wgmma too: there the pipelined layer's training launchers are the experiment
    ckpt16 = dataclasses.replace(fp16, write_checkpoints=True)
    assert fx.product_algorithm(ckpt16) == "wgmma"
    assert fx.engine_config(ckpt16, "pipelined") is ckpt16
    assert fx.engine_config(ckpt16, "pipelined", training=True) == fx.experiment(ckpt16, "pipelined")
    assert fx.engine_config(ckpt16, "wgmma", training=True) is ckpt16
    with pytest.raises(ValueError, match="FrostFwdExperiment: algorithm must be"):
        fx.tooling_config(CFG, "v9")
    # an experiment config in: its product fields decide, never its own version
    assert fx.tooling_config(fx.experiment(CFG, "pipelined"), "wgmma") is not CFG
    assert fx.tooling_config(fx.experiment(CFG, "pipelined"), "wgmma") == CFG
    assert type(fx.tooling_config(fx.experiment(CFG, "pipelined"), "wgmma")) is FrostFwdConfig


def test_use_kernel_routes_the_compile_lookup_and_restores_it():
    from cudnn.linear_attention.frost.kernels import fwd

    product = fwd._compiled
    seen = []
    fwd._compiled = lambda cfg, arch, ffi=None, device=None: seen.append(cfg)
    try:
        with fx.use_kernel("pipelined"):
            fwd._compiled(CFG, "sm_90a")
            fwd._compiled(dataclasses.replace(CFG, write_checkpoints=True), "sm_90a")
        with fx.use_kernel(fx.PRODUCT):
            fwd._compiled(CFG, "sm_90a")
        fwd._compiled(CFG, "sm_90a")
    finally:
        fwd._compiled = product
    assert [getattr(c, "algorithm", "product") for c in seen] == ["pipelined", "product", "product", "product"]
    with pytest.raises(ValueError, match="use_kernel: algorithm must be one of"):
        with fx.use_kernel("v9"):
            pass
    # training=True: the training forwards too (the pipelined layer's launchers forced: the product runs the wgmma layer's
    # for bf16 on sm_90a), plain ones as before; wgmma, the product's pick for both, routes none
    seen.clear()
    values = dataclasses.replace(CFG, write_checkpoints=True, write_values=True)
    fwd._compiled = lambda cfg, arch, ffi=None, device=None: seen.append(cfg)
    try:
        with fx.use_kernel("pipelined", training=True):
            fwd._compiled(values, "sm_90a")
            fwd._compiled(CFG, "sm_90a")
        with fx.use_kernel("wgmma", training=True):
            fwd._compiled(values, "sm_90a")
            fwd._compiled(CFG, "sm_90a")
        fwd._compiled(values, "sm_90a")
    finally:
        fwd._compiled = product
    assert seen[0] == fx.experiment(values, "pipelined") and seen[0].algorithm == "pipelined"
    assert seen[1] == fx.experiment(CFG, "pipelined")
    assert seen[2] is values and seen[3] is CFG and seen[4] is values
    for algorithm in ("oracle", "mma"):  # no training launcher: refused by name, before any routing
        with pytest.raises(ValueError, match="use_kernel: training forwards run one of"):
            with fx.use_kernel(algorithm, training=True):
                pass
    assert fwd._compiled is product


def test_kernel_classes_carry_the_knobs():
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_mma import FrostFwdMma
    from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined, FrostFwdPipelinedCheckpoints, FrostFwdPipelinedValues
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma, FrostFwdWgmmaCheckpoints, FrostFwdWgmmaValues
    from frost_fwd_oracle import FrostFwdOracle

    # the product: wgmma on sm_90a (bf16 and fp16), plain and training calls; pipelined on other archs
    ckpt = dataclasses.replace(CFG, write_checkpoints=True)
    values = dataclasses.replace(ckpt, write_values=True)
    assert kernel_class(CFG, "sm_90a") is FrostFwdWgmma
    assert kernel_class(CFG, "sm_100a") is FrostFwdPipelined
    assert kernel_class(dataclasses.replace(CFG, io_dtype="float16"), "sm_90a") is FrostFwdWgmma
    assert kernel_class(ckpt, "sm_90a") is FrostFwdWgmmaCheckpoints
    assert kernel_class(values, "sm_90a") is FrostFwdWgmmaValues
    assert kernel_class(ckpt, "sm_100a") is FrostFwdPipelinedCheckpoints
    assert kernel_class(dataclasses.replace(values, io_dtype="float16"), "sm_90a") is FrostFwdWgmmaValues
    assert kernel_class(dataclasses.replace(values, io_dtype="float16"), "sm_100a") is FrostFwdPipelinedValues
    # the tooling's versions, whatever the arch
    assert kernel_class(fx.experiment(CFG, "pipelined"), "sm_90a") is FrostFwdPipelined
    assert kernel_class(fx.experiment(ckpt), "sm_90a") is FrostFwdWgmmaCheckpoints  # the product's pick
    assert kernel_class(fx.experiment(CFG, "oracle"), "sm_90a") is FrostFwdOracle
    assert kernel_class(fx.experiment(CFG, "mma"), "sm_90a") is FrostFwdMma
    assert kernel_class(fx.experiment(CFG, "wgmma"), "sm_90a") is FrostFwdWgmma
    assert kernel_class(fx.experiment(ckpt, "wgmma"), "sm_90a") is FrostFwdWgmmaCheckpoints
    assert kernel_class(fx.experiment(values, "wgmma"), "sm_90a") is FrostFwdWgmmaValues
    assert kernel_class(fx.experiment(ckpt, "pipelined"), "sm_90a") is FrostFwdPipelinedCheckpoints  # pipelined forced (A/B)
    assert kernel_class(fx.experiment(values, "pipelined"), "sm_90a") is FrostFwdPipelinedValues
    cls = kernel_class(fx.experiment(CFG, "wgmma", skip_stages=("chain",), ldmatrix=False), "sm_90a")
    assert issubclass(cls, FrostFwdWgmma) and cls.skip_stages == ("chain",) and not cls.ldmatrix
    assert cls is kernel_class(fx.experiment(CFG, "wgmma", skip_stages=("chain",), ldmatrix=False), "sm_90a")
    assert FrostFwdPipelined.skip_stages == () and FrostFwdPipelined.ldmatrix  # the product's knobs
    # the warp-specialised kernel's register split: its own, or the knob's as a class attribute
    from cudnn.linear_attention.frost.kernels import fwd_ws

    gdn = dataclasses.replace(CFG, gate_per_channel=False, gate_align16=False, K=128, V=128)
    own = kernel_class(fx.experiment(gdn, "wgmma", decay="scaled-ws"), "sm_90a")
    split = kernel_class(fx.experiment(gdn, "wgmma", decay="scaled-ws", ws_regs=(184, 72)), "sm_90a")
    assert issubclass(split, fwd_ws.WarpSpecialisedChain) and issubclass(own, fwd_ws.WarpSpecialisedChain)
    assert own.register_split is None and split.register_split == (184, 72) and split is not own


@pytest.mark.parametrize("knob", ["rows", "stores", "gram"])
def test_knob_environment_variables(knob, monkeypatch):
    """Each knob's variable: its first choice when unset or empty, any of its choices as
    given, anything else a ValueError naming the variable."""
    env, choices, requested = {"rows": (fx.ROWS_ENV, fx.ROWS, fx.rows_requested),
                               "stores": (fx.STORES_ENV, fx.STORES, fx.stores_requested),
                               "gram": (fx.GRAM_ENV, fx.GRAMS, fx.gram_requested)}[knob]
    monkeypatch.delenv(env, raising=False)
    assert requested() == choices[0]
    monkeypatch.setenv(env, " ")
    assert requested() == choices[0]
    for choice in choices:
        monkeypatch.setenv(env, choice)
        assert requested() == choice
    monkeypatch.setenv(env, "tma")
    with pytest.raises(ValueError, match=f"{env} must be one of"):
        requested()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
