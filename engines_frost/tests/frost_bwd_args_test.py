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
from frost_bwd_operands import checked_config as _check  # noqa: E402




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


# The product's kernel picks, stated per gate kind apart from kernels/bwd.py
# (product_choice): every kernel-choice field not named is False (chain_ws_regs: ()).
#: GDN with bf16 io at K = V = 128: the wy chain in four roles on raw rows, the inverse
#: applied in the chain (NOTES_bwd.md "The wy chain in four roles, measured")
GDN_FOUR_ROLES = dict(chain_wgmma=True, chain_async=True, chain_scaled=True, chain_ws=True, chain_wy=True,
                      chain_ws4=True, chain_a_in_chain=True, chain_raw_rows=True, grads_wgmma=True,
                      grads_prefetch=True)
#: GDN with bf16 io at other shapes: the wgmma chain with the decays as factors
GDN_SCALED = dict(chain_wgmma=True, chain_async=True, chain_scaled=True, grads_wgmma=True, grads_prefetch=True)
#: GDN with fp16 io: the asynchronous wgmma chain on decay-folded operands
GDN_FOLDED = dict(chain_wgmma=True, chain_async=True, grads_wgmma=True, grads_prefetch=True)
#: KDA: the synchronous wgmma chain with bulk row copies, the mma.sync grads with wide
#: loads, the fused decay and tf32 adjoints; dO staged in shared memory where K >= V
KDA = dict(chain_wgmma=True, chain_bulk_rows=True, vec_wide_loads=True, vec_fast_decay=True,
           vec_tf32_adjoints=True)
#: GDN-2: KDA's, with the grads' load phase by bulk copies
GDN2 = dict(KDA, vec_bulk_copies=True)
#: what FrostBwdConfig holds besides the kernel choice
NOT_CHOICE = ("fwd", "stage", "dht_dtype", "dh0_dtype", "checkpoints", "forward_values", "grads_ctas")


def _picks(family, io, K, V) -> dict:
    if family == "gdn":
        picks = GDN_FOLDED if io == "float16" else GDN_FOUR_ROLES if K == V == 128 else GDN_SCALED
    else:
        picks = dict(KDA if family == "kda" else GDN2, chain_staged_do=K >= V)
    choice = {f.name: False for f in dataclasses.fields(FrostBwdConfig) if f.name not in NOT_CHOICE}
    return {**choice, "chain_ws_regs": (), **picks}


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("io", ["bfloat16", "float16"])
@pytest.mark.parametrize("K, V", [(64, 64), (64, 128), (128, 64), (128, 128)])
def test_the_product_picks_its_kernels(family, io, K, V):
    """The checked config's kernel choice is the product's (the tables above) for every
    family, io dtype and head dims, on every path, and the recompute path's states stage
    runs on the forward kernel."""
    from cudnn.linear_attention.frost.kernels.bwd import recompute_configs

    cfg, _, _ = _check(_operands(family=family, K=K, V=V, io=io), family)
    assert cfg.fwd.io_dtype == io and (cfg.fwd.K, cfg.fwd.V) == (K, V)
    got = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in NOT_CHOICE}
    assert got == _picks(family, io, K, V)
    plan = recompute_configs(cfg)
    assert plan is not None and set(plan) == {"states", "chain", "grads"}


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
