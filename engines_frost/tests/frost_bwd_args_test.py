"""frost_bwd's host side on the CPU: operand checks, the workspace layout, the config.

Every check raises ValueError naming the argument, what was expected and what was given;
the workspace size is exactly the sum of its aligned regions and grows with the grouped
heads' fp32 gradients; the config derived from real tensors matches the operands.
"""
import dataclasses

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention.frost.kernels.bwd import (  # noqa: E402
    check_bwd_operands,
    frost_bwd_workspace_size,
    workspace_layout,
)
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig, checkpoint_rows  # noqa: E402
from frost_bwd_operands import bwd_operands as _operands  # noqa: E402


def _check(x, family="gdn", l2=False):
    return check_bwd_operands(**x, use_l2norm=l2, gate_per_channel=family != "gdn",
                              beta_per_channel=family == "gdn2")


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_config_follows_the_operands(family):
    cfg, T, N = _check(_operands(family=family, h0=True, dht=True, H=2, HV=4), family, l2=True)
    assert isinstance(cfg, FrostBwdConfig) and cfg.stage == "states"
    assert (T, N) == (130, 3)
    assert cfg.fwd.family == family and cfg.fwd.use_l2norm and cfg.fwd.has_initial_state
    assert (cfg.dht_dtype, cfg.dh0_dtype) == ("float32", "float32")
    assert cfg.q_grouped and not cfg.v_grouped and not cfg.k_grouped  # HK = HV = HO


@pytest.mark.parametrize("mutate, needle", [
    (lambda x: x.update(dq=x["dq"][:, :, :32]), "frost_bwd: dq must be of shape [130, 4, 64], got [130, 4, 32]"),
    (lambda x: x.update(dg=x["dg"].double()), "frost_bwd: dg must be of dtype float32, got torch.float64"),
    (lambda x: x.update(dbeta=None), "frost_bwd: dbeta must be a [130, 4] tensor, got None"),
    (lambda x: x.update(d_initial_state=torch.empty(3, 4, 64, 64)),
     "frost_bwd: d_initial_state must be given exactly when initial_state is"),
    (lambda x: x.update(d_final_state=torch.empty(3, 4, 64, 32)),
     "frost_bwd: d_final_state must be of shape [3, 4, 64, 64], got [3, 4, 64, 32]"),
    (lambda x: x.update(dO=x["dO"].float()), "frost_bwd: dO must be of dtype bfloat16"),
    (lambda x: x.update(dw=torch.empty(130, 4, 64, dtype=torch.bfloat16)),
     "frost_bwd: dw must be None unless beta_per_channel (GDN-2)"),
])
def test_bad_operands_are_named(mutate, needle):
    x = _operands()
    mutate(x)
    with pytest.raises(ValueError) as e:
        _check(x)
    assert str(e.value).startswith(needle), str(e.value)


@pytest.mark.parametrize("heads, grouped", [((4, 4, 4), ()), ((2, 2, 4), ("dq", "dk")), ((4, 4, 2), ("dv",)),
                                            ((2, 4, 4), ("dq",))])
def test_workspace_is_exactly_its_regions(heads, grouped):
    H, HK, HV = heads
    T, N, K, V = 1000, 5, 128, 64
    regions, size = workspace_layout(total_tokens=T, num_seqs=N, heads_q=H, heads_k=HK, heads_v=HV,
                                     head_dim_k=K, head_dim_v=V)
    names = [r.name for r in regions]
    assert names == ["ckpt", "dckpt", "u", "dr", *grouped]
    HO = max(H, HV)
    R = checkpoint_rows(T, N)
    assert regions[0].shape == (R, HO, V, K) and regions[2].shape == (T, HO, V)
    end = 0
    for r in regions:
        assert r.offset % 256 == 0 and r.offset >= end
        count = 1
        for extent in r.shape:
            count *= extent
        end = r.offset + count * (2 if r.dtype == "bfloat16" else 4)
    assert end <= size < end + 256
    assert frost_bwd_workspace_size(total_tokens=T, num_seqs=N, heads_q=H, heads_k=HK, heads_v=HV,
                                    head_dim_k=K, head_dim_v=V) == size


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_forward_checkpoints_select_the_values_path(family):
    x = _operands(family=family, h0=True)
    T, N = x["q"].shape[0], x["cu_seqlens"].numel() - 1
    x["state_checkpoints"] = torch.zeros(checkpoint_rows(T, N), 4, 64, 64, dtype=torch.bfloat16)
    cfg, _, _ = check_bwd_operands(**x, use_l2norm=False, gate_per_channel=family != "gdn",
                                   beta_per_channel=family == "gdn2")
    assert cfg.checkpoints and cfg.stage == "values" and cfg.stages == ("values", "chain", "grads")
    values, chain, grads = (cfg.with_stage(s) for s in cfg.stages)
    assert not values.fwd.has_initial_state and values.dh0_dtype is None   # S comes from the rows
    assert not chain.checkpoints and chain.fwd.has_initial_state           # shared with the old path
    assert grads.checkpoints
    plain, _, _ = _check(_operands(family=family, h0=True), family)
    assert plain.stages == ("states", "chain", "grads") and chain == plain.with_stage("chain")


@pytest.mark.parametrize("mutate, needle", [
    (lambda c: c[:-1], "frost_bwd: state_checkpoints must be of shape [5, 4, 64, 64], got [4, 4, 64, 64]"),
    (lambda c: c.float(), "frost_bwd: state_checkpoints must be of dtype bfloat16, got torch.float32"),
    (lambda c: c.transpose(2, 3), "frost_bwd: state_checkpoints must be contiguous"),
])
def test_bad_checkpoints_are_named(mutate, needle):
    x = _operands()
    x["state_checkpoints"] = mutate(torch.zeros(checkpoint_rows(130, 3), 4, 64, 64, dtype=torch.bfloat16))
    with pytest.raises(ValueError) as e:
        _check(x)
    assert str(e.value).startswith(needle), str(e.value)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_forward_values_skip_states_and_values(family):
    """The forward's U next to its checkpoints: only chain and grads launch; chain is its
    own kernel (it zeroes the uncovered gradient rows), grads the checkpoint path's."""
    x = _operands(family=family, h0=True)
    T, N = x["q"].shape[0], x["cu_seqlens"].numel() - 1
    x["state_checkpoints"] = torch.zeros(checkpoint_rows(T, N), 4, 64, 64, dtype=torch.bfloat16)
    flags = dict(use_l2norm=False, gate_per_channel=family != "gdn", beta_per_channel=family == "gdn2")
    ckpt_only, _, _ = check_bwd_operands(**x, **flags)
    x["values"] = torch.zeros(T, 4, 64, dtype=torch.bfloat16)
    cfg, _, _ = check_bwd_operands(**x, **flags)
    assert cfg.forward_values and cfg.checkpoints and cfg.stages == ("chain", "grads")
    chain, grads = (cfg.with_stage(s) for s in cfg.stages)
    assert chain.forward_values and not chain.checkpoints
    assert chain != ckpt_only.with_stage("chain")                          # compiled with the zeroing
    assert grads == ckpt_only.with_stage("grads") and not grads.forward_values  # the same grads kernel


@pytest.mark.parametrize("mutate, needle", [
    (lambda x: x.pop("state_checkpoints"), "frost_bwd: values must be None unless state_checkpoints is given"),
    (lambda x: x.update(values=x["values"][:-1]), "frost_bwd: values must be of shape [130, 4, 64], got [129, 4, 64]"),
    (lambda x: x.update(values=x["values"].float()), "frost_bwd: values must be of dtype bfloat16, got torch.float32"),
])
def test_bad_values_are_named(mutate, needle):
    x = _operands()
    x["state_checkpoints"] = torch.zeros(checkpoint_rows(130, 3), 4, 64, 64, dtype=torch.bfloat16)
    x["values"] = torch.zeros(130, 4, 64, dtype=torch.bfloat16)
    mutate(x)
    with pytest.raises(ValueError) as e:
        _check(x)
    assert str(e.value).startswith(needle), str(e.value)


def test_forward_values_config_rules():
    cfg, _, _ = _check(_operands())
    for stage in ("states", "values", "grads"):
        with pytest.raises(ValueError, match="forward_values must be False for the " + stage):
            FrostBwdConfig(cfg.fwd, stage, None, None, checkpoints=stage != "states", forward_values=True)


def test_workspace_with_values_drops_exactly_the_u_region():
    """The forward's U replaces the U region on top of the checkpoints' state region."""
    kw = dict(total_tokens=1000, num_seqs=5, heads_q=2, heads_k=2, heads_v=4, head_dim_k=128, head_dim_v=64)
    lean, lean_size = workspace_layout(**kw, checkpoints=True)
    leaner, leaner_size = workspace_layout(**kw, checkpoints=True, values=True)
    assert [r.name for r in leaner] == [r.name for r in lean if r.name != "u"]
    u = next(r for r in lean if r.name == "u")
    assert u.shape == (1000, 4, 64)
    assert leaner_size == lean_size - -(-1000 * 4 * 64 * 2 // 256) * 256
    assert frost_bwd_workspace_size(**kw, checkpoints=True, values=True) == leaner_size
    with pytest.raises(ValueError, match="values must be False unless checkpoints"):
        workspace_layout(**kw, values=True)


def test_stage_and_checkpoints_must_agree():
    cfg, _, _ = _check(_operands())
    with pytest.raises(ValueError, match="checkpoints must be True for the values stage"):
        FrostBwdConfig(cfg.fwd, "values", None, None)
    with pytest.raises(ValueError, match="checkpoints must be False for the states stage"):
        FrostBwdConfig(cfg.fwd, "states", None, None, checkpoints=True)


def test_workspace_with_checkpoints_drops_exactly_the_state_region():
    """The forward's checkpoints replace the states region; nothing else changes size."""
    kw = dict(total_tokens=1000, num_seqs=5, heads_q=2, heads_k=2, heads_v=4, head_dim_k=128, head_dim_v=64)
    full, size = workspace_layout(**kw)
    lean, lean_size = workspace_layout(**kw, checkpoints=True)
    assert [r.name for r in lean] == [r.name for r in full][1:]
    assert full[0].name == "ckpt"
    ckpt_bytes = full[1].offset - full[0].offset
    assert lean_size == size - ckpt_bytes
    assert [r.shape for r in lean] == [r.shape for r in full[1:]]
    assert frost_bwd_workspace_size(**kw, checkpoints=True) == lean_size


def test_forward_checkpoint_rows_are_packed():
    """The spec's layout: sequences' rows one after another, ceil(L / 64) each, all below
    T // 64 + N; the backward's workspace rows are another (gapped) numbering."""
    import random

    from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_index, chunk_count, packed_row0

    rng = random.Random(5)
    assert chunk_count(0) == 0 and chunk_count(1) == 1 and chunk_count(64) == 1 and chunk_count(65) == 2
    assert chunk_count(-3) == 0
    for _ in range(200):
        lens = [rng.choice([0, 1, 5, 63, 64, 65, 127, 128, 129, 300]) for _ in range(rng.randint(1, 12))]
        cu = [0]
        for n in lens:
            cu.append(cu[-1] + n)
        index = checkpoint_index(cu)
        assert len(index) == sum(-(-L // 64) for L in lens) <= checkpoint_rows(cu[-1], len(lens))
        for row, (n, j) in enumerate(index):
            assert row == packed_row0(cu, n) + j and 64 * j < lens[n]


def test_checkpoint_rows_never_collide():
    """Chunk j of sequence n at row cu[n] // 64 + n + j: distinct rows below T // 64 + N."""
    import random

    rng = random.Random(3)
    for _ in range(200):
        lens = [rng.choice([0, 1, 5, 63, 64, 65, 127, 128, 129, 300]) for _ in range(rng.randint(1, 12))]
        cu = [0]
        for n in lens:
            cu.append(cu[-1] + n)
        rows = [cu[n] // 64 + n + j for n, L in enumerate(lens) for j in range(-(-L // 64))]
        assert len(rows) == len(set(rows))
        assert all(0 <= r < checkpoint_rows(cu[-1], len(lens)) for r in rows)



@pytest.mark.parametrize("family", ["gdn", "kda"])
def test_the_persistent_grid_is_the_devices_sm_count(family, monkeypatch):
    """grads_ctas comes from the operands' device (its SM count; the ahead-of-time default
    for CPU tensors) and specialises the scalar-gate grads kernel alone: every other
    kernel's config is the same whatever the device."""
    from cudnn.linear_attention.frost.kernels import bwd as bwd_mod
    from cudnn.linear_attention.frost.kernels.bwd_config import DEFAULT_GRADS_CTAS

    cfg, _, _ = _check(_operands(family=family), family)
    assert cfg.grads_ctas == DEFAULT_GRADS_CTAS
    monkeypatch.setattr(bwd_mod, "_sm_count", lambda device: 114)  # an H100 PCIe
    small, _, _ = _check(_operands(family=family), family)
    assert small.grads_ctas == 114
    for stage in ("states", "chain"):
        assert small.with_stage(stage) == cfg.with_stage(stage)
    persistent = family == "gdn"
    assert (small.with_stage("grads").grads_ctas == 114) == persistent
    assert (small.with_stage("grads") != cfg.with_stage("grads")) == persistent
    with pytest.raises(ValueError, match="grads_ctas must be a positive int"):
        FrostBwdConfig(fwd=cfg.fwd, stage="grads", dht_dtype=None, dh0_dtype=None, grads_ctas=0)


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

    from cudnn.linear_attention.frost.kernels.bwd import CHAIN_ENV, CHAIN_VEC_ENV

    monkeypatch.setenv(CHAIN_VEC_ENV, "serial")
    monkeypatch.setenv(CHAIN_ENV, "serial")
    serial, _, _ = _check(_operands(family=family), family)
    assert not serial.chain_wgmma and not serial.chain_pipeline
    monkeypatch.delenv(CHAIN_ENV, raising=False)
    monkeypatch.delenv(CHAIN_VEC_ENV, raising=False)
    unset, _, _ = _check(_operands(family=family), family)
    assert unset.chain_wgmma and unset.chain_async == (family == "gdn")
    assert unset == dataclasses.replace(serial, chain_wgmma=True, chain_async=family == "gdn",
                                        chain_scaled=family == "gdn")
    monkeypatch.setenv(CHAIN_VEC_ENV, "serial")  # below: FROST_BWD_CHAIN alone
    monkeypatch.setenv(CHAIN_ENV, "pipelined")
    cfg, _, _ = _check(_operands(family=family), family)
    assert cfg.chain_pipeline == (family == "gdn") and not serial.chain_pipeline
    for stage in ("states", "grads"):
        assert cfg.with_stage(stage) == serial.with_stage(stage)
    assert (cfg.with_stage("chain") != serial.with_stage("chain")) == (family == "gdn")
    monkeypatch.setenv(CHAIN_ENV, "wgmma")
    wg, _, _ = _check(_operands(family=family), family)
    assert wg.chain_wgmma == (family == "gdn") and not wg.chain_pipeline and not serial.chain_wgmma
    for stage in ("states", "grads"):
        assert wg.with_stage(stage) == serial.with_stage(stage)
    assert (wg.with_stage("chain") != serial.with_stage("chain")) == (family == "gdn")
    assert not wg.chain_async
    monkeypatch.setenv(CHAIN_ENV, "wgmma_async")  # the wgmma chain, its update retired late
    wa, _, _ = _check(_operands(family=family), family)
    assert wa == (dataclasses.replace(wg, chain_async=True) if family == "gdn" else serial)
    if family == "gdn":  # unset: wgmma_async with the decays as factors
        assert unset == dataclasses.replace(wa, chain_scaled=True)
    for stage in ("states", "grads"):
        assert wa.with_stage(stage) == serial.with_stage(stage)
    monkeypatch.setenv(CHAIN_ENV, "fast")
    with pytest.raises(ValueError, match="FROST_BWD_CHAIN must be one of"):
        _check(_operands(family=family), family)
    monkeypatch.delenv(CHAIN_ENV, raising=False)
    for value in ("wgmma", "wgmma_async", "serial", "fast"):  # the vector-gate switch: vector gates only
        monkeypatch.setenv(CHAIN_VEC_ENV, value)
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
    monkeypatch.delenv(CHAIN_VEC_ENV, raising=False)
    if family != "gdn":
        with pytest.raises(ValueError, match="chain_pipeline must be False for vector gates"):
            FrostBwdConfig(fwd=serial.fwd, stage="chain", dht_dtype=None, dh0_dtype=None, chain_pipeline=True)



@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("variable, field", [("FROST_BWD_VEC_DECAY", "vec_fast_decay"),
                                             ("FROST_BWD_VEC_WIDE", "vec_wide_loads"),
                                             ("FROST_BWD_VEC_BULK", "vec_bulk_copies")])
def test_vector_grads_switches(family, variable, field, monkeypatch):
    """FROST_BWD_VEC_DECAY, FROST_BWD_VEC_WIDE and FROST_BWD_VEC_BULK (on unless 0, the
    bulk copies for GDN-2 only unless 1; read on every checked call)
    set their config field for vector gates only, and with_stage keeps it for the grads
    kernel alone; a value other than 0 or 1 is a ValueError naming the variable."""
    from cudnn.linear_attention.frost.kernels import bwd

    assert variable in (bwd.VEC_DECAY_ENV, bwd.VEC_WIDE_ENV, bwd.VEC_BULK_ENV)
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
    monkeypatch.setenv(variable, "on")
    with pytest.raises(ValueError, match=variable):
        _check(_operands(family=family), family)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_tf32_adjoints_switch(family, monkeypatch):
    """FROST_BWD_VEC_TF32 (on unless 0) sets vec_tf32_adjoints for vector gates, only with
    the wide loads and fused decay on and the mma.sync grads class; with_stage keeps it
    for the grads kernel alone; the config refuses it without its prerequisites."""
    from cudnn.linear_attention.frost.kernels import bwd

    for name in (bwd.VEC_TF32_ENV, bwd.VEC_WIDE_ENV, bwd.VEC_DECAY_ENV, "FROST_BWD_GRADS_VEC"):
        monkeypatch.delenv(name, raising=False)
    on, _, _ = _check(_operands(family=family), family)
    monkeypatch.setenv(bwd.VEC_TF32_ENV, "0")
    off, _, _ = _check(_operands(family=family), family)
    assert not off.vec_tf32_adjoints
    assert dataclasses.replace(off, vec_tf32_adjoints=on.vec_tf32_adjoints) == on
    monkeypatch.setenv(bwd.VEC_TF32_ENV, "1")
    assert _check(_operands(family=family), family)[0] == on
    assert on.vec_tf32_adjoints == (family != "gdn")
    for stage in on.stages:
        assert on.with_stage(stage).vec_tf32_adjoints == (stage == "grads" and family != "gdn")
    for other in ((bwd.VEC_WIDE_ENV, "0"), (bwd.VEC_DECAY_ENV, "0"), ("FROST_BWD_GRADS_VEC", "wgmma")):
        monkeypatch.setenv(*other)
        got, _, _ = _check(_operands(family=family), family)
        assert not got.vec_tf32_adjoints, other
        monkeypatch.delenv(other[0])
    if family != "gdn":
        with pytest.raises(ValueError, match="vec_tf32_adjoints must be False unless vec_wide_loads"):
            dataclasses.replace(on, vec_wide_loads=False)
    monkeypatch.setenv(bwd.VEC_TF32_ENV, "yes")
    with pytest.raises(ValueError, match=bwd.VEC_TF32_ENV):
        _check(_operands(family=family), family)


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("env,field", [("CHAIN_DO_ENV", "chain_staged_do"), ("CHAIN_BULK_ENV", "chain_bulk_rows")])
def test_vector_chain_copy_switches(family, env, field, monkeypatch):
    """FROST_BWD_CHAIN_DO and FROST_BWD_CHAIN_BULK (on unless 0) set their chain flag for
    vector gates only (the staged dO: with K >= V), on the chain kernel alone; other values
    are a ValueError naming the variable."""
    from cudnn.linear_attention.frost.kernels import bwd

    variable = getattr(bwd, env)
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
    monkeypatch.setenv(variable, "on")
    with pytest.raises(ValueError, match=variable):
        _check(_operands(family=family), family)


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
    """FROST_BWD_GRADS_PREFETCH (read on every checked call; unset or 1: on, 0: off) sets
    grads_prefetch for GDN's scalar gates and never for vector gates (whose config refuses
    it), with_stage keeps it for the grads kernel alone, and a value other than 0 or 1
    names the variable."""

    from cudnn.linear_attention.frost.kernels import bwd

    vector = family in ("kda", "gdn2")
    unset, off, on = (_config_under(monkeypatch, family, {bwd.GRADS_PREFETCH_ENV: v}) for v in (None, "0", "1"))
    assert not off.grads_prefetch and on.grads_prefetch != vector and unset == on
    for stage in on.stages:  # only the grads kernel's config (and so its store key) differs
        assert on.with_stage(stage).grads_prefetch == (stage == "grads" and not vector)
        assert (on.with_stage(stage) != off.with_stage(stage)) == (stage == "grads" and not vector)
    with pytest.raises(ValueError, match="grads_prefetch must be a bool"):
        FrostBwdConfig(fwd=on.fwd, stage="grads", dht_dtype=None, dh0_dtype=None, grads_prefetch=1)
    if vector:
        with pytest.raises(ValueError, match="grads_prefetch must be False for vector gates"):
            dataclasses.replace(on, grads_prefetch=True)
    monkeypatch.setenv(bwd.GRADS_PREFETCH_ENV, "yes")
    with pytest.raises(ValueError, match=bwd.GRADS_PREFETCH_ENV):
        _check(_operands(family=family), family)


def test_region_operands_are_the_carved_addresses():
    """BoundBwd.launch hands the kernels each workspace region as its address alone, the
    address the carved view has; the names the host reads back (grouped heads' partials)
    stay torch views of the right shape and dtype."""
    from cudnn.linear_attention.frost.kernels import bwd
    from cudnn.linear_attention.frost.kernels.workspace_regions import carve

    regions, size = bwd.workspace_layout(total_tokens=130, num_seqs=3, heads_q=2, heads_k=2,
                                         heads_v=4, head_dim_k=64, head_dim_v=64)
    assert {r.name for r in regions} >= {"ckpt", "dckpt", "u", "dr", "dq", "dk"}
    workspace = torch.empty(size + 512, dtype=torch.uint8)[512:]  # a base off the allocation's
    carved = carve(workspace, regions)
    got = bwd._region_operands(workspace, regions, ("dq", "dk", "dv"))
    assert set(got) == set(carved)
    for name, view in carved.items():
        assert got[name].data_ptr() == view.data_ptr(), name
    for name in ("dq", "dk"):  # dv has no partial region here (heads_v is the output's)
        assert isinstance(got[name], torch.Tensor)
        assert (got[name].shape, got[name].dtype) == (carved[name].shape, carved[name].dtype)
    assert not isinstance(got["ckpt"], torch.Tensor)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_grads_variant_comes_from_the_environment(family, monkeypatch):
    """FROST_BWD_GRADS=wgmma selects the grads kernel with its state products on warpgroup
    MMA for scalar gates (vector gates ignore it), changing the grads kernel's config
    alone; "mma" is the per-warp mma.sync kernel; unset is wgmma; anything else is refused
    by name. FROST_BWD_GRADS_VEC=wgmma selects it for vector gates (scalar gates ignore
    it; unset or "mma": off), again the grads config alone."""

    from cudnn.linear_attention.frost.kernels.bwd import GRADS_ENV, GRADS_VEC_ENV

    monkeypatch.delenv(GRADS_VEC_ENV, raising=False)
    monkeypatch.setenv(GRADS_ENV, "mma")
    plain, _, _ = _check(_operands(family=family), family)
    assert not plain.grads_wgmma
    monkeypatch.delenv(GRADS_ENV, raising=False)
    assert _check(_operands(family=family), family)[0].grads_wgmma == (family == "gdn")
    monkeypatch.setenv(GRADS_ENV, "wgmma")
    wg, _, _ = _check(_operands(family=family), family)
    assert wg.grads_wgmma == (family == "gdn")
    for stage in ("states", "chain"):
        assert wg.with_stage(stage) == plain.with_stage(stage)
        assert not wg.with_stage(stage).grads_wgmma
    assert wg.with_stage("grads").grads_wgmma == (family == "gdn")
    assert (wg.with_stage("grads") != plain.with_stage("grads")) == (family == "gdn")
    monkeypatch.setenv(GRADS_ENV, "fast")
    with pytest.raises(ValueError, match="FROST_BWD_GRADS must be one of"):
        _check(_operands(family=family), family)
    monkeypatch.delenv(GRADS_ENV, raising=False)
    unset, _, _ = _check(_operands(family=family), family)
    for value in ("wgmma", "mma", "fast"):  # the vector-gate switch: vector gates only
        monkeypatch.setenv(GRADS_VEC_ENV, value)
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

    from cudnn.linear_attention.frost.kernels.bwd import CHAIN_ENV

    monkeypatch.delenv(CHAIN_ENV, raising=False)
    bf16, _, _ = _check(_operands())
    half = {k: v.half() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 else v
            for k, v in _operands().items()}
    fp16, _, _ = _check(half)
    assert bf16.chain_scaled and not fp16.chain_scaled and fp16.chain_async and fp16.chain_wgmma
    assert fp16 == dataclasses.replace(bf16, fwd=fp16.fwd, chain_scaled=False)
    monkeypatch.setenv(CHAIN_ENV, "wgmma_ws")
    ws, _, _ = _check(half)
    assert not ws.chain_scaled and not ws.chain_ws and ws.chain_async


def test_ws_register_split_comes_from_the_environment(monkeypatch):
    """FROST_BWD_WS_REGS sets the warp-specialised chain's setmaxnreg split (chain_ws_regs,
    keyed in the chain config only) and nothing without FROST_BWD_CHAIN=wgmma_ws; a split
    the register file cannot hold is refused by name, by the launcher and by the config."""

    from cudnn.linear_attention.frost.kernels.bwd import CHAIN_ENV, WS_REGS_ENV

    monkeypatch.setenv(CHAIN_ENV, "wgmma_ws")
    monkeypatch.delenv(WS_REGS_ENV, raising=False)
    own, _, _ = _check(_operands(K=128, V=128))
    assert own.chain_ws and own.chain_ws_regs == ()
    monkeypatch.setenv(WS_REGS_ENV, "184,72")
    split, _, _ = _check(_operands(K=128, V=128))
    assert split == dataclasses.replace(own, chain_ws_regs=(184, 72))
    assert split.with_stage("chain") != own.with_stage("chain")
    for stage in ("states", "grads"):
        assert split.with_stage(stage) == own.with_stage(stage) and split.with_stage(stage).chain_ws_regs == ()
    small, _, _ = _check(_operands())  # K = 64: no warp-specialised chain, so no split
    assert not small.chain_ws and small.chain_ws_regs == ()
    monkeypatch.setenv(CHAIN_ENV, "wgmma_scaled")
    scaled, _, _ = _check(_operands(K=128, V=128))
    assert not scaled.chain_ws and scaled.chain_ws_regs == ()
    monkeypatch.setenv(CHAIN_ENV, "wgmma_ws")
    for text in ("184,80", "184", "a,b", "180,72"):
        monkeypatch.setenv(WS_REGS_ENV, text)
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
    from cudnn.linear_attention.frost.kernels.bwd import CHAIN_ENV, WS_REGS_ENV

    monkeypatch.delenv(WS_REGS_ENV, raising=False)
    monkeypatch.setenv(CHAIN_ENV, "wgmma_ws")
    ws, _, _ = _check(_operands(K=128, V=128))
    monkeypatch.setenv(CHAIN_ENV, "wgmma_wy")
    wy, _, _ = _check(_operands(K=128, V=128))
    assert wy.chain_ws and wy.chain_wy and wy.chain_scaled and not ws.chain_wy
    assert wy.with_stage("chain") != ws.with_stage("chain")
    for stage in ("states", "grads"):
        assert wy.with_stage(stage) == ws.with_stage(stage)
    small, _, _ = _check(_operands())
    assert not small.chain_ws and not small.chain_wy and small.chain_scaled
    monkeypatch.setenv(WS_REGS_ENV, "200,56")
    split, _, _ = _check(_operands(K=128, V=128))
    assert split.chain_wy and split.chain_ws_regs == (200, 56)


def test_four_role_chain_comes_from_the_environment(monkeypatch):
    """FROST_BWD_CHAIN=wgmma_ws4: the wy chain in four roles (chain_ws, chain_wy and
    chain_ws4, keyed in the chain config only); the scaled chain where the wy chain does
    not apply; FROST_BWD_WS_REGS does not reach it (its three roles' split is its own),
    and a config that asks for both is refused."""
    from cudnn.linear_attention.frost.kernels.bwd import CHAIN_ENV, WS_REGS_ENV

    monkeypatch.delenv(WS_REGS_ENV, raising=False)
    monkeypatch.setenv(CHAIN_ENV, "wgmma_wy")
    wy, _, _ = _check(_operands(K=128, V=128))
    monkeypatch.setenv(CHAIN_ENV, "wgmma_ws4")
    ws4, _, _ = _check(_operands(K=128, V=128))
    assert ws4.chain_ws and ws4.chain_wy and ws4.chain_ws4 and not wy.chain_ws4
    assert ws4.with_stage("chain") != wy.with_stage("chain")
    for stage in ("states", "grads"):
        assert ws4.with_stage(stage) == wy.with_stage(stage) and not ws4.with_stage(stage).chain_ws4
    small, _, _ = _check(_operands())
    assert not small.chain_ws4 and not small.chain_wy and small.chain_scaled
    monkeypatch.setenv(WS_REGS_ENV, "200,56")
    split, _, _ = _check(_operands(K=128, V=128))
    assert split.chain_ws4 and split.chain_ws_regs == ()
    with pytest.raises(ValueError, match="chain_ws4"):
        dataclasses.replace(ws4, chain_ws_regs=(200, 56))
    with pytest.raises(ValueError, match="chain_ws4"):
        dataclasses.replace(wy, chain_wy=False, chain_ws4=True)
    monkeypatch.setenv(CHAIN_ENV, "wgmma_ws4c")
    ws4c, _, _ = _check(_operands(K=128, V=128))
    assert ws4c.chain_ws4 and ws4c.chain_a_in_chain and not ws4.chain_a_in_chain
    assert ws4c.with_stage("chain") != ws4.with_stage("chain") and ws4c.with_stage("grads") == ws4.with_stage("grads")
    small, _, _ = _check(_operands())
    assert not small.chain_ws4 and not small.chain_a_in_chain and small.chain_scaled
    for name, in_chain in (("wgmma_ws4raw", False), ("wgmma_ws4rawc", True)):
        monkeypatch.setenv(CHAIN_ENV, name)
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
    from cudnn.linear_attention.frost.kernels.bwd import CHAIN_ENV

    half = {k: v.half() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 else v
            for k, v in _operands(K=128, V=128).items()}
    monkeypatch.setenv(CHAIN_ENV, "wgmma_ws4rawc")
    asked = [_check(ops)[0] for ops in (_operands(K=128, V=128), _operands(), half)]
    monkeypatch.setenv(CHAIN_ENV, "wgmma_scaled")
    scaled = _check(_operands(K=128, V=128))[0]
    monkeypatch.delenv(CHAIN_ENV, raising=False)
    unset = [_check(ops)[0] for ops in (_operands(K=128, V=128), _operands(), half)]
    assert unset == asked
    big, small, fp16 = unset
    assert big.chain_ws4 and big.chain_raw_rows and big.chain_a_in_chain
    assert not small.chain_ws and small.chain_scaled
    assert not fp16.chain_ws and not fp16.chain_scaled and fp16.chain_async
    for stage in ("states", "grads"):
        assert big.with_stage(stage) == scaled.with_stage(stage)

