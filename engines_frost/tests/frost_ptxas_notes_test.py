"""ptxas's Hopper performance notes on the FROST kernels' sm_90a builds (no GPU needed).

ptxas prints "Potential Performance Loss" notes (C75xx) where it changes what the kernel
asked for: a setmaxnreg it ignores (C7507: the warp-specialised split would collapse),
wgmma it serialises for want of registers (C7511, C7512), a wgmma wait or arrive it
injects because code touches registers of a wgmma group in flight (C7517, C7519: the
overlap the kernel was written for is lost there). None of them shows in the SASS counts
the other compile tests read. Each case compiles one kernel with the DSL's own ptxas run
verbose (frost_cubin_report.ptxas_notes) and compares its notes with what is known:
KNOWN below. A new note, or a known one gone, fails here.

The product's kernels at the bench's K = V = 128 have their notes read in every run, from
builds that other tests' cores make anyway and inspect (frost_cubin_report.build_cubin:
notes and cubin from one compile; reading the notes adds ~3 s to it, a second compile
~6-14 s): the plain forwards (GDN's scaled chain, KDA's folded one) in
frost_resource_test::test_wgmma_state_update_retires_after_the_next_rows_stage, KDA's
vector-gate chain and both grads kernels (GDN's wgmma one with its L2 prefetch on the
checkpoint rows, KDA's vector-gate one) in frost_resource_bwd_test
(test_vector_wgmma_chain_no_spills, test_scalar_gate_grads_prefetch,
test_vector_gate_grads_no_spills), GDN's four-role chain in
frost_compile_bwd_chain_wy_test. So the matrix's core here (compile_tiers; ~10 s on one
core, ~53 s before those cases moved to the full matrix, the full matrix ~140 s) keeps
GDN's training forward (checkpoints and U), which no other core test reads the notes of.
The rest waits for FROST_FULL_MATRIX=1: the cases above at 16 heads, the GDN chains the
product does not run at these dims (wgmma_async, wgmma_scaled), the forward experiments
(folded, scaled-lead, warp-specialised), GDN-2's forward and chain, GDN's output-free
recompute and the check that the reader finds a note at all
(frost_compile_ws4_test.test_in_chain_register_trade pins the product's four-role C7512
in every run, through the same build_cubin).
"""
import dataclasses
import os
import sys

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from frost_cubin_report import bwd_config_for as _cfg  # noqa: E402
import frost_fwd_experiments as fx  # noqa: E402
from compile_tiers import FULL_ENV, full_matrix, tiered  # noqa: E402

ASYNC = dict(chain_wgmma=True, chain_async=True)
FORWARDS = {  # name: (family, tooling decay (None: the product's; GDN's scaled), build)
    "gdn": ("gdn", None, "plain"), "kda": ("kda", None, "plain"), "gdn2": ("gdn2", None, "plain"),
    "gdn-values": ("gdn", None, "values"), "gdn-recompute": ("gdn", None, "recompute"),
    "gdn-folded": ("gdn", "folded", "plain"), "gdn-scaled-lead": ("gdn", "scaled-lead", "plain"),
    "gdn-ws": ("gdn", "scaled-ws", "plain"), "gdn-ws-recompute": ("gdn", "scaled-ws", "recompute"),
}
BACKWARDS = {  # name: (family, stage, config fields)
    "gdn-chain": ("gdn", "chain", ASYNC), "kda-chain": ("kda", "chain", dict(chain_wgmma=True)),
    "gdn2-chain": ("gdn2", "chain", dict(chain_wgmma=True)),
    "gdn-chain-scaled": ("gdn", "chain", dict(ASYNC, chain_scaled=True)),
    "gdn-chain-ws": ("gdn", "chain", dict(ASYNC, chain_scaled=True, chain_ws=True)),
    "gdn-grads": ("gdn", "grads", dict(grads_wgmma=True, grads_prefetch=True)),
    "kda-grads": ("kda", "grads", dict(vec_wide_loads=True, vec_fast_decay=True)),
}
# the product's four-role GDN forward (pipelined configs) has its C7512 pinned in
# frost_compile_ws4_test.test_in_chain_register_trade; the tests that check the notes of
# these kernels in their own builds (the docstring) expect none either: a known note
# added here goes there too
KNOWN = {}


FORWARDS_CORE = ("gdn-values",)
BACKWARDS_CORE = ()


@pytest.mark.parametrize("name", tiered(list(FORWARDS), [list(FORWARDS).index(n) for n in FORWARDS_CORE],
                                        ids=str))
def test_forward_notes(name):
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    family, decay, build = FORWARDS[name]
    cfg = report.config_for(family, "product", 128, 128, True, build=build)
    if decay is not None:
        cfg = fx.tooling_config(cfg, "wgmma", decay=decay)
        assert cfg.decay == decay
    assert report.ptxas_notes(kernel_class(cfg, "sm_90a")(cfg), fake_args(cfg)) == KNOWN.get(name, set())


@pytest.mark.parametrize("name", tiered(list(BACKWARDS), [list(BACKWARDS).index(n) for n in BACKWARDS_CORE],
                                        ids=str))
def test_backward_notes(name):
    from cudnn.linear_attention.frost.kernels.bwd_abi import bwd_fake_args
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    family, stage, fields = BACKWARDS[name]
    cfg = dataclasses.replace(_cfg(family, stage, H=16, HV=16, h0=False), **fields)
    assert report.ptxas_notes(bwd_kernel_for(cfg)(cfg), bwd_fake_args(cfg)) == KNOWN.get(name, set())


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_the_notes_are_read():
    """The reader finds a note where ptxas prints one: the warp-specialised forward with
    its producer at fewer registers than its wgmma Gram needs (C7507, setmaxnreg ignored)."""
    from cudnn.linear_attention.frost.kernels import fwd_ws
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    cfg = fx.tooling_config(report.config_for("gdn", "product", 128, 128, True), "wgmma", decay="scaled-ws",
                            gram="wgmma")
    cls = kernel_class(cfg, "sm_90a")
    kernel = cls(cfg)
    kernel.consumer_regs, kernel.producer_regs = fwd_ws.CONSUMER_REGS, fwd_ws.PRODUCER_REGS  # 216 / 40
    assert "C7507" in report.ptxas_notes(kernel, fake_args(cfg))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
