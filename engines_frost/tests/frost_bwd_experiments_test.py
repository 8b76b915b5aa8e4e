"""The FROST backward's experiment switches (frost_bwd_experiments.py) on the CPU.

The product reads none of them (kernels/bwd.py product_choice: an environment full of
switches builds the configs an empty one does); inside use_bwd_variants each one changes
the checked config as its docstring says, on the kernel it concerns alone, and a bad value
is a ValueError naming the variable. With nothing set the tooling's derivation is the
product's (config_fields(f, BwdVariants()) == product_choice(f)).
"""
import dataclasses
import itertools

import pytest

torch = pytest.importorskip("torch")

import frost_bwd_experiments as fbx  # noqa: E402
from cudnn.linear_attention.frost.kernels import bwd as kernels_bwd  # noqa: E402
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig  # noqa: E402
from frost_bwd_operands import bwd_operands as _operands  # noqa: E402
# the product's checked config for operands x (no tooling block)
from frost_bwd_operands import checked_config as _product  # noqa: E402

#: a value other than the product's for every switch
OFF_PRODUCT = {fbx.CHAIN_ENV: "serial", fbx.CHAIN_VEC_ENV: "serial", fbx.GRADS_ENV: "mma",
               fbx.GRADS_VEC_ENV: "wgmma", fbx.GRADS_PREFETCH_ENV: "0", fbx.VEC_WIDE_ENV: "0",
               fbx.VEC_DECAY_ENV: "0", fbx.VEC_TF32_ENV: "0", fbx.VEC_BULK_ENV: "1", fbx.CHAIN_DO_ENV: "0",
               fbx.CHAIN_BULK_ENV: "0", fbx.RECOMPUTE_FORWARD_ENV: "0"}
SHAPES = list(itertools.product(("gdn", "kda", "gdn2"), ("bfloat16", "float16"), (64, 128), (64, 128)))


def _check(x, family="gdn", l2=False):
    """The checked config inside a use_bwd_variants block: what the environment asks for."""
    with fbx.use_bwd_variants():
        return _product(x, family, l2)


def _clear(monkeypatch):
    for name in (*OFF_PRODUCT, fbx.WS_REGS_ENV):
        monkeypatch.delenv(name, raising=False)


def test_the_product_reads_no_switch(monkeypatch):
    """Every FROST_BWD_* variable set to a value other than the product's: the product's
    configs and recompute plans (outside a tooling block) are those of an empty
    environment, for every family, io dtype and shape."""
    _clear(monkeypatch)

    def configs():
        return {(f, io, K, V): _product(_operands(family=f, io=io, K=K, V=V), f)[0] for f, io, K, V in SHAPES}

    plain = configs()
    for env in (OFF_PRODUCT, {fbx.CHAIN_ENV: "wgmma_ws", fbx.WS_REGS_ENV: "184,72"}):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for shape, got in configs().items():
            cfg = plain[shape]
            assert got == cfg, (env, shape)
            assert kernels_bwd.recompute_configs(got) == kernels_bwd.recompute_configs(cfg) is not None


def test_the_tooling_changes_what_the_variables_say(monkeypatch):
    """Inside the block the variables change the config (and the recompute plan) as they
    say, outside it they do not, and the block leaves the product's seams as it found
    them; nested blocks hold their own variants."""
    _clear(monkeypatch)
    seams = kernels_bwd.product_choice, kernels_bwd.recompute_on_forward
    product = _product(_operands())[0]
    monkeypatch.setenv(fbx.CHAIN_ENV, "serial")
    monkeypatch.setenv(fbx.RECOMPUTE_FORWARD_ENV, "0")
    with fbx.use_bwd_variants():
        serial = _product(_operands())[0]
        assert kernels_bwd.recompute_configs(serial) is None
        monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma")
        with fbx.use_bwd_variants():
            assert _product(_operands())[0] == dataclasses.replace(serial, chain_wgmma=True)
        assert _product(_operands())[0] == serial
        with fbx.use_bwd_variants(fbx.BwdVariants()):  # the product's inside another block
            assert _product(_operands())[0] == product
    assert (kernels_bwd.product_choice, kernels_bwd.recompute_on_forward) == seams
    assert not serial.chain_wgmma and not serial.chain_async and product.chain_wgmma
    assert serial == dataclasses.replace(product, chain_wgmma=False, chain_async=False, chain_scaled=False)
    assert _product(_operands())[0] == product and kernels_bwd.recompute_configs(product) is not None


@pytest.mark.parametrize("family, io, K, V", SHAPES)
def test_no_switch_is_the_product(family, io, K, V, monkeypatch):
    """With nothing set the tooling derives the product's fields, and its block wraps nothing."""
    _clear(monkeypatch)
    f = _product(_operands(family=family, K=K, V=V, io=io), family)[0].fwd
    assert fbx.config_fields(f, fbx.requested()) == kernels_bwd.product_choice(f)
    with fbx.use_bwd_variants():
        assert not hasattr(kernels_bwd.product_choice, "variants")


def test_bad_values_are_named_on_entry(monkeypatch):
    """A bad value is refused when the block is entered, naming its variable."""
    _clear(monkeypatch)
    for name, value in ((fbx.CHAIN_ENV, "fast"), (fbx.GRADS_VEC_ENV, "fast"), (fbx.VEC_BULK_ENV, "on"),
                        (fbx.RECOMPUTE_FORWARD_ENV, "yes"), (fbx.WS_REGS_ENV, "184"),
                        (fbx.CHAIN_DO_ENV, "on"), (fbx.CHAIN_BULK_ENV, "on"), (fbx.VEC_TF32_ENV, "yes"),
                        (fbx.GRADS_PREFETCH_ENV, "yes"), (fbx.VEC_DECAY_ENV, "on"), (fbx.VEC_WIDE_ENV, "on")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=name):
            with fbx.use_bwd_variants():
                pass
        monkeypatch.delenv(name)
    with pytest.raises(ValueError, match=fbx.CHAIN_ENV):
        fbx.BwdVariants(chain="fast")


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_chain_variant_comes_from_the_environment(family, monkeypatch):
    """FROST_BWD_CHAIN=pipelined selects the pipelined chain for scalar gates only (vector
    gates have no room for its second operand set), =wgmma the wgmma chain (scalar gates
    too), each changing the chain kernel's config alone; "serial" is the serial chain;
    unset is the wgmma chain for every family (scalar gates: its asynchronous schedule with the
    decays as factors, wgmma_scaled);
    anything else is refused by name.
    FROST_BWD_CHAIN_VEC picks the vector gates' chain the same way (scalar gates ignore
    it), changing their chain config alone."""


    monkeypatch.setenv(fbx.CHAIN_VEC_ENV, "serial")
    monkeypatch.setenv(fbx.CHAIN_ENV, "serial")
    serial, _, _ = _check(_operands(family=family), family)
    assert not serial.chain_wgmma and not serial.chain_pipeline
    monkeypatch.delenv(fbx.CHAIN_ENV, raising=False)
    monkeypatch.delenv(fbx.CHAIN_VEC_ENV, raising=False)
    unset, _, _ = _check(_operands(family=family), family)
    assert unset.chain_wgmma and unset.chain_async == (family == "gdn")
    assert unset == dataclasses.replace(serial, chain_wgmma=True, chain_async=family == "gdn",
                                        chain_scaled=family == "gdn")
    monkeypatch.setenv(fbx.CHAIN_VEC_ENV, "serial")  # below: FROST_BWD_CHAIN alone
    monkeypatch.setenv(fbx.CHAIN_ENV, "pipelined")
    cfg, _, _ = _check(_operands(family=family), family)
    assert cfg.chain_pipeline == (family == "gdn") and not serial.chain_pipeline
    for stage in ("states", "grads"):
        assert cfg.with_stage(stage) == serial.with_stage(stage)
    assert (cfg.with_stage("chain") != serial.with_stage("chain")) == (family == "gdn")
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma")
    wg, _, _ = _check(_operands(family=family), family)
    assert wg.chain_wgmma == (family == "gdn") and not wg.chain_pipeline and not serial.chain_wgmma
    for stage in ("states", "grads"):
        assert wg.with_stage(stage) == serial.with_stage(stage)
    assert (wg.with_stage("chain") != serial.with_stage("chain")) == (family == "gdn")
    assert not wg.chain_async
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_async")  # the wgmma chain, its update retired late
    wa, _, _ = _check(_operands(family=family), family)
    assert wa == (dataclasses.replace(wg, chain_async=True) if family == "gdn" else serial)
    if family == "gdn":  # unset: wgmma_async with the decays as factors
        assert unset == dataclasses.replace(wa, chain_scaled=True)
    for stage in ("states", "grads"):
        assert wa.with_stage(stage) == serial.with_stage(stage)
    monkeypatch.setenv(fbx.CHAIN_ENV, "fast")
    with pytest.raises(ValueError, match="FROST_BWD_CHAIN must be one of"):
        _check(_operands(family=family), family)
    monkeypatch.delenv(fbx.CHAIN_ENV, raising=False)
    for value in ("wgmma", "wgmma_async", "serial", "fast"):  # the vector-gate switch: vector gates only
        monkeypatch.setenv(fbx.CHAIN_VEC_ENV, value)
        if value == "fast":
            with pytest.raises(ValueError, match="FROST_BWD_CHAIN_VEC must be one of"):
                _check(_operands(family=family), family)
            continue
        got, _, _ = _check(_operands(family=family), family)
        if family == "gdn":
            assert got == unset
        else:
            assert got == dataclasses.replace(unset, chain_wgmma=value != "serial",
                                              chain_async=value == "wgmma_async")
        for stage in ("states", "grads"):
            assert got.with_stage(stage) == unset.with_stage(stage)
    monkeypatch.delenv(fbx.CHAIN_VEC_ENV, raising=False)
    if family != "gdn":
        with pytest.raises(ValueError, match="chain_pipeline must be False for vector gates"):
            FrostBwdConfig(fwd=serial.fwd, stage="chain", dht_dtype=None, dh0_dtype=None, chain_pipeline=True)



@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("variable, field", [("FROST_BWD_VEC_DECAY", "vec_fast_decay"),
                                             ("FROST_BWD_VEC_WIDE", "vec_wide_loads"),
                                             ("FROST_BWD_VEC_BULK", "vec_bulk_copies")])
def test_vector_grads_switches(family, variable, field, monkeypatch):
    """FROST_BWD_VEC_DECAY, FROST_BWD_VEC_WIDE and FROST_BWD_VEC_BULK (on unless 0, the
    bulk copies for GDN-2 only unless 1; read where the tooling block is entered)
    set their config field for vector gates only, and with_stage keeps it for the grads
    kernel alone (other values: test_bad_values_are_named_on_entry)."""
    assert variable in (fbx.VEC_DECAY_ENV, fbx.VEC_WIDE_ENV, fbx.VEC_BULK_ENV)
    monkeypatch.delenv(variable, raising=False)
    default, _, _ = _check(_operands(family=family), family)
    # the bulk copies are GDN-2's by default (slower for KDA: NOTES_bwd.md)
    assert getattr(default, field) == (family == "gdn2" if field == "vec_bulk_copies" else family != "gdn")
    monkeypatch.setenv(variable, "0")
    off, _, _ = _check(_operands(family=family), family)
    monkeypatch.setenv(variable, "1")
    on, _, _ = _check(_operands(family=family), family)
    assert getattr(on, field) == (family != "gdn") and not getattr(off, field)
    for stage in on.stages:
        changed = stage == "grads" and family != "gdn"
        assert getattr(on.with_stage(stage), field) == changed
        assert (on.with_stage(stage) != off.with_stage(stage)) == changed
    with pytest.raises(ValueError, match=f"{field} must be a bool"):
        FrostBwdConfig(fwd=on.fwd, stage="grads", dht_dtype=None, dh0_dtype=None, **{field: 1})


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_tf32_adjoints_switch(family, monkeypatch):
    """FROST_BWD_VEC_TF32 (on unless 0) sets vec_tf32_adjoints for vector gates, only with
    the wide loads and fused decay on and the mma.sync grads class; with_stage keeps it
    for the grads kernel alone; the config refuses it without its prerequisites."""
    for name in (fbx.VEC_TF32_ENV, fbx.VEC_WIDE_ENV, fbx.VEC_DECAY_ENV, "FROST_BWD_GRADS_VEC"):
        monkeypatch.delenv(name, raising=False)
    on, _, _ = _check(_operands(family=family), family)
    monkeypatch.setenv(fbx.VEC_TF32_ENV, "0")
    off, _, _ = _check(_operands(family=family), family)
    assert not off.vec_tf32_adjoints
    assert dataclasses.replace(off, vec_tf32_adjoints=on.vec_tf32_adjoints) == on
    monkeypatch.setenv(fbx.VEC_TF32_ENV, "1")
    assert _check(_operands(family=family), family)[0] == on
    assert on.vec_tf32_adjoints == (family != "gdn")
    for stage in on.stages:
        assert on.with_stage(stage).vec_tf32_adjoints == (stage == "grads" and family != "gdn")
    for other in ((fbx.VEC_WIDE_ENV, "0"), (fbx.VEC_DECAY_ENV, "0"), ("FROST_BWD_GRADS_VEC", "wgmma")):
        monkeypatch.setenv(*other)
        got, _, _ = _check(_operands(family=family), family)
        assert not got.vec_tf32_adjoints, other
        monkeypatch.delenv(other[0])
    if family != "gdn":
        with pytest.raises(ValueError, match="vec_tf32_adjoints must be False unless vec_wide_loads"):
            dataclasses.replace(on, vec_wide_loads=False)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("env,field", [("CHAIN_DO_ENV", "chain_staged_do"), ("CHAIN_BULK_ENV", "chain_bulk_rows")])
def test_vector_chain_copy_switches(family, env, field, monkeypatch):
    """FROST_BWD_CHAIN_DO and FROST_BWD_CHAIN_BULK (on unless 0) set their chain flag for
    vector gates only (the staged dO: with K >= V), on the chain kernel alone (other values:
    test_bad_values_are_named_on_entry)."""
    variable = getattr(fbx, env)
    monkeypatch.setenv(variable, "0")
    off, _, _ = _check(_operands(family=family), family)
    assert not getattr(off, field)
    monkeypatch.delenv(variable, raising=False)
    on, _, _ = _check(_operands(family=family), family)
    assert getattr(on, field) == (family != "gdn")
    assert dataclasses.replace(on, **{field: False}) == off
    for stage in on.stages:
        assert getattr(on.with_stage(stage), field) == (stage == "chain" and family != "gdn")
    narrow, _, _ = _check(_operands(family=family, K=64, V=128), family)
    # KE's rows hold K < V values: the staged dO stays in global memory there
    assert getattr(narrow, field) == (family != "gdn" and field == "chain_bulk_rows")


def _config_under(monkeypatch, family, env: dict):
    """The checked backward config of `family` after setting each variable of env (None:
    unset) on top of what the test set before."""
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    return _check(_operands(family=family), family)[0]


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_grads_prefetch_switch(family, monkeypatch):
    """FROST_BWD_GRADS_PREFETCH (unset or 1: on, 0: off) sets
    grads_prefetch for GDN's scalar gates and never for vector gates (whose config refuses
    it), and with_stage keeps it for the grads kernel alone (other values:
    test_bad_values_are_named_on_entry)."""

    vector = family in ("kda", "gdn2")
    unset, off, on = (_config_under(monkeypatch, family, {fbx.GRADS_PREFETCH_ENV: v}) for v in (None, "0", "1"))
    assert not off.grads_prefetch and on.grads_prefetch != vector and unset == on
    for stage in on.stages:  # only the grads kernel's config (and so its store key) differs
        assert on.with_stage(stage).grads_prefetch == (stage == "grads" and not vector)
        assert (on.with_stage(stage) != off.with_stage(stage)) == (stage == "grads" and not vector)
    with pytest.raises(ValueError, match="grads_prefetch must be a bool"):
        FrostBwdConfig(fwd=on.fwd, stage="grads", dht_dtype=None, dh0_dtype=None, grads_prefetch=1)
    if vector:
        with pytest.raises(ValueError, match="grads_prefetch must be False for vector gates"):
            dataclasses.replace(on, grads_prefetch=True)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_grads_variant_comes_from_the_environment(family, monkeypatch):
    """FROST_BWD_GRADS=wgmma selects the grads kernel with its state products on warpgroup
    MMA for scalar gates (vector gates ignore it), changing the grads kernel's config
    alone; "mma" is the per-warp mma.sync kernel; unset is wgmma; anything else is refused
    by name. FROST_BWD_GRADS_VEC=wgmma selects it for vector gates (scalar gates ignore
    it; unset or "mma": off), again the grads config alone."""


    monkeypatch.delenv(fbx.GRADS_VEC_ENV, raising=False)
    monkeypatch.setenv(fbx.GRADS_ENV, "mma")
    plain, _, _ = _check(_operands(family=family), family)
    assert not plain.grads_wgmma
    monkeypatch.delenv(fbx.GRADS_ENV, raising=False)
    assert _check(_operands(family=family), family)[0].grads_wgmma == (family == "gdn")
    monkeypatch.setenv(fbx.GRADS_ENV, "wgmma")
    wg, _, _ = _check(_operands(family=family), family)
    assert wg.grads_wgmma == (family == "gdn")
    for stage in ("states", "chain"):
        assert wg.with_stage(stage) == plain.with_stage(stage)
        assert not wg.with_stage(stage).grads_wgmma
    assert wg.with_stage("grads").grads_wgmma == (family == "gdn")
    assert (wg.with_stage("grads") != plain.with_stage("grads")) == (family == "gdn")
    monkeypatch.setenv(fbx.GRADS_ENV, "fast")
    with pytest.raises(ValueError, match="FROST_BWD_GRADS must be one of"):
        _check(_operands(family=family), family)
    monkeypatch.delenv(fbx.GRADS_ENV, raising=False)
    unset, _, _ = _check(_operands(family=family), family)
    for value in ("wgmma", "mma", "fast"):  # the vector-gate switch: vector gates only
        monkeypatch.setenv(fbx.GRADS_VEC_ENV, value)
        if value == "fast":
            with pytest.raises(ValueError, match="FROST_BWD_GRADS_VEC must be one of"):
                _check(_operands(family=family), family)
            continue
        got, _, _ = _check(_operands(family=family), family)
        on = family != "gdn" and value == "wgmma"
        # the wgmma class has no tf32 adjoints (the default's), so it drops them
        assert got == (dataclasses.replace(unset, grads_wgmma=True, vec_tf32_adjoints=False) if on else unset)
        for stage in ("states", "chain"):
            assert got.with_stage(stage) == unset.with_stage(stage)
        assert got.with_stage("grads").grads_wgmma == (on or family == "gdn")


def test_fp16_scalar_gates_keep_the_folded_chain(monkeypatch):
    """The default chain's decays as factors (wgmma_scaled) are a bf16 kernel: fp16 io
    runs the same wgmma chain with them folded (wgmma_async), whatever FROST_BWD_CHAIN asks."""


    monkeypatch.delenv(fbx.CHAIN_ENV, raising=False)
    bf16, _, _ = _check(_operands())
    half = {k: v.half() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 else v
            for k, v in _operands().items()}
    fp16, _, _ = _check(half)
    assert bf16.chain_scaled and not fp16.chain_scaled and fp16.chain_async and fp16.chain_wgmma
    assert fp16 == dataclasses.replace(bf16, fwd=fp16.fwd, chain_scaled=False)
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_ws")
    ws, _, _ = _check(half)
    assert not ws.chain_scaled and not ws.chain_ws and ws.chain_async


def test_ws_register_split_comes_from_the_environment(monkeypatch):
    """FROST_BWD_WS_REGS sets the warp-specialised chain's setmaxnreg split (chain_ws_regs,
    keyed in the chain config only) and nothing without FROST_BWD_CHAIN=wgmma_ws; a split
    the register file cannot hold is refused by name, by the launcher and by the config."""


    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_ws")
    monkeypatch.delenv(fbx.WS_REGS_ENV, raising=False)
    own, _, _ = _check(_operands(K=128, V=128))
    assert own.chain_ws and own.chain_ws_regs == ()
    monkeypatch.setenv(fbx.WS_REGS_ENV, "184,72")
    split, _, _ = _check(_operands(K=128, V=128))
    assert split == dataclasses.replace(own, chain_ws_regs=(184, 72))
    assert split.with_stage("chain") != own.with_stage("chain")
    for stage in ("states", "grads"):
        assert split.with_stage(stage) == own.with_stage(stage) and split.with_stage(stage).chain_ws_regs == ()
    small, _, _ = _check(_operands())  # K = 64: no warp-specialised chain, so no split
    assert not small.chain_ws and small.chain_ws_regs == ()
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_scaled")
    scaled, _, _ = _check(_operands(K=128, V=128))
    assert not scaled.chain_ws and scaled.chain_ws_regs == ()
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_ws")
    for text in ("184,80", "184", "a,b", "180,72"):
        monkeypatch.setenv(fbx.WS_REGS_ENV, text)
        with pytest.raises(ValueError, match="FROST_BWD_WS_REGS must be 'consumer,producer'"):
            _check(_operands(K=128, V=128))
    with pytest.raises(ValueError, match="FrostBwdConfig: chain_ws_regs must be"):
        dataclasses.replace(scaled, chain_ws_regs=(184, 72))
    with pytest.raises(ValueError, match="FrostBwdConfig: chain_ws_regs must be"):
        dataclasses.replace(own, chain_ws_regs=(256, 16))
    assert dataclasses.replace(own, chain_ws_regs=[184, 72]) == split  # as a JSON sidecar gives it


def test_wy_chain_comes_from_the_environment(monkeypatch):
    """FROST_BWD_CHAIN=wgmma_wy: the warp-specialised chain without its back substitution
    (chain_ws and chain_wy, keyed in the chain config only); at K = 64 or fp16 io the
    scaled / folded chain as for wgmma_ws; FROST_BWD_WS_REGS reaches it too."""

    monkeypatch.delenv(fbx.WS_REGS_ENV, raising=False)
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_ws")
    ws, _, _ = _check(_operands(K=128, V=128))
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_wy")
    wy, _, _ = _check(_operands(K=128, V=128))
    assert wy.chain_ws and wy.chain_wy and wy.chain_scaled and not ws.chain_wy
    assert wy.with_stage("chain") != ws.with_stage("chain")
    for stage in ("states", "grads"):
        assert wy.with_stage(stage) == ws.with_stage(stage)
    small, _, _ = _check(_operands())
    assert not small.chain_ws and not small.chain_wy and small.chain_scaled
    monkeypatch.setenv(fbx.WS_REGS_ENV, "200,56")
    split, _, _ = _check(_operands(K=128, V=128))
    assert split.chain_wy and split.chain_ws_regs == (200, 56)


def test_four_role_chain_comes_from_the_environment(monkeypatch):
    """FROST_BWD_CHAIN=wgmma_ws4: the wy chain in four roles (chain_ws, chain_wy and
    chain_ws4, keyed in the chain config only); the scaled chain where the wy chain does
    not apply; FROST_BWD_WS_REGS does not reach it (its three roles' split is its own),
    and a config that asks for both is refused."""

    monkeypatch.delenv(fbx.WS_REGS_ENV, raising=False)
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_wy")
    wy, _, _ = _check(_operands(K=128, V=128))
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_ws4")
    ws4, _, _ = _check(_operands(K=128, V=128))
    assert ws4.chain_ws and ws4.chain_wy and ws4.chain_ws4 and not wy.chain_ws4
    assert ws4.with_stage("chain") != wy.with_stage("chain")
    for stage in ("states", "grads"):
        assert ws4.with_stage(stage) == wy.with_stage(stage) and not ws4.with_stage(stage).chain_ws4
    small, _, _ = _check(_operands())
    assert not small.chain_ws4 and not small.chain_wy and small.chain_scaled
    monkeypatch.setenv(fbx.WS_REGS_ENV, "200,56")
    split, _, _ = _check(_operands(K=128, V=128))
    assert split.chain_ws4 and split.chain_ws_regs == ()
    with pytest.raises(ValueError, match="chain_ws4"):
        dataclasses.replace(ws4, chain_ws_regs=(200, 56))
    with pytest.raises(ValueError, match="chain_ws4"):
        dataclasses.replace(wy, chain_wy=False, chain_ws4=True)
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_ws4c")
    ws4c, _, _ = _check(_operands(K=128, V=128))
    assert ws4c.chain_ws4 and ws4c.chain_a_in_chain and not ws4.chain_a_in_chain
    assert ws4c.with_stage("chain") != ws4.with_stage("chain") and ws4c.with_stage("grads") == ws4.with_stage("grads")
    small, _, _ = _check(_operands())
    assert not small.chain_ws4 and not small.chain_a_in_chain and small.chain_scaled
    for name, in_chain in (("wgmma_ws4raw", False), ("wgmma_ws4rawc", True)):
        monkeypatch.setenv(fbx.CHAIN_ENV, name)
        raw, _, _ = _check(_operands(K=128, V=128))
        assert raw.chain_ws4 and raw.chain_raw_rows and raw.chain_a_in_chain == in_chain
        assert raw.with_stage("grads") == ws4.with_stage("grads") and not raw.with_stage("grads").chain_raw_rows
        small, _, _ = _check(_operands())
        assert not small.chain_raw_rows and small.chain_scaled


def test_default_chain_is_the_four_role_raw_chain_at_its_shapes(monkeypatch):
    """FROST_BWD_CHAIN unset: at K = V = 128 with bf16 io the chain config is exactly
    wgmma_ws4rawc's (four roles, raw rows, the inverse applied in the chain); at K = 64 the
    scaled chain, with fp16 io the folded one (the knob's own fallbacks); the other stages'
    configs are the scaled chain's."""

    half = {k: v.half() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 else v
            for k, v in _operands(K=128, V=128).items()}
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_ws4rawc")
    asked = [_check(ops)[0] for ops in (_operands(K=128, V=128), _operands(), half)]
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_scaled")
    scaled = _check(_operands(K=128, V=128))[0]
    monkeypatch.delenv(fbx.CHAIN_ENV, raising=False)
    unset = [_check(ops)[0] for ops in (_operands(K=128, V=128), _operands(), half)]
    assert unset == asked
    big, small, fp16 = unset
    assert big.chain_ws4 and big.chain_raw_rows and big.chain_a_in_chain
    assert not small.chain_ws and small.chain_scaled
    assert not fp16.chain_ws and not fp16.chain_scaled and fp16.chain_async
    for stage in ("states", "grads"):
        assert big.with_stage(stage) == scaled.with_stage(stage)
