"""The FROST forward variant matrix the compile tests (frost_compile_test, frost_compile_pipelined_test,
frost_compile_wgmma_test) cross-compile: family x head dims x io dtype x state presence/dtype,
l2norm alternating, plus head-grouping cases; product configs, turned into the tooling's
configs of other kernel layers by with_algorithm. Test-only; plain Python (imports the
kernels' config only).
"""
import dataclasses
import itertools

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

from frost_fwd_experiments import tooling_config

FAMILIES = {  # gate_per_channel, beta_per_channel/has_w
    "gdn": (False, False),
    "kda": (True, False),
    "gdn2": (True, True),
}
STATES = [  # (has_initial_state, has_final_state, state dtype)
    (False, False, None),
    (True, False, "float32"),
    (False, True, "bfloat16"),
    (True, True, "float32"),
]
HEAD_DIMS = [(64, 64), (128, 128), (64, 128), (128, 64)]


def _variants():
    for (fam, (gpc, bpc)), (K, V), io, (h0, ht, st) in itertools.product(
            FAMILIES.items(), HEAD_DIMS, ("bfloat16", "float16"), STATES):
        l2 = (K + V + h0 + ht) % 2 == (io == "float16")  # alternate l2norm across the matrix
        yield fam, FrostFwdConfig(io_dtype=io, state_dtype=st, H=2, HK=2, HV=2, K=K, V=V, gate_per_channel=gpc,
                                  beta_per_channel=bpc, has_w=bpc, use_l2norm=l2, has_initial_state=h0,
                                  has_final_state=ht)


VARIANTS = list(_variants())
MMA_VARIANTS = [
    i for i, (fam, c) in enumerate(VARIANTS)
    if (c.io_dtype, c.has_initial_state, c.has_final_state) == ("bfloat16", True, True)
    or (fam == "gdn" and c.K == c.V == 64 and c.io_dtype == "float16" and c.has_final_state)
]
GROUPED = [  # value grouping (HV = 2H, k at H or HV heads) and query grouping (H = 2HV)
    FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=2, HK=2, HV=4, K=128, V=128,
                   gate_per_channel=True, beta_per_channel=False, has_w=False, use_l2norm=True,
                   has_initial_state=True, has_final_state=True),
    FrostFwdConfig(io_dtype="bfloat16", state_dtype="bfloat16", H=2, HK=4, HV=4, K=64, V=128,
                   gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=False,
                   has_initial_state=False, has_final_state=True),
    FrostFwdConfig(io_dtype="float16", state_dtype=None, H=4, HK=4, HV=2, K=128, V=64,
                   gate_per_channel=True, beta_per_channel=True, has_w=True, use_l2norm=True,
                   has_initial_state=False, has_final_state=False),
]


def with_algorithm(cfg, algorithm, skip_stages=(), ldmatrix=True, **changes):
    """cfg with product fields changed, as the tooling builds kernel layer `algorithm` with
    those knobs (frost_fwd_experiments.tooling_config: the product's pick for the config
    without knobs is the product config)."""
    return tooling_config(dataclasses.replace(cfg, **changes), algorithm, skip_stages, ldmatrix)


def vid(i):
    f, c = VARIANTS[i]
    return (f"{f}-K{c.K}V{c.V}-{c.io_dtype}-h0{int(c.has_initial_state)}ht{int(c.has_final_state)}"
            f"-{c.state_dtype}-l2{int(c.use_l2norm)}")
