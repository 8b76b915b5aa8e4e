"""The TMA rows probe (frost_tma_rows_probe.py) builds for sm_90a on a machine without a GPU:
one UTMALDG per 64-channel box (D / 64 per CTA: the SW128 tile takes 64-column boxes),
an mbarrier armed with the transaction bytes, no divergent-warp path to the TMA issue
(it hangs the GPU) and no local memory. Its run on the H200
is frost_tma_rows_probe_gpu_test.py."""
import glob
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None,
                                reason="cuobjdump not found (set CUOBJDUMP)")


@pytest.mark.parametrize("D", [64, 128])
def test_probe_builds_one_tma_box_per_64_channels(D):
    import frost_tma_rows_probe as probe

    with tempfile.TemporaryDirectory() as tmp:
        probe.compile_probe(3, D, options=f"--gpu-arch sm_90a --keep-cubin --dump-dir {tmp}")
        (cubin,) = glob.glob(os.path.join(tmp, "*.cubin"))
        usage = report.resource_usage(cubin)
        assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
        if report.tool("NVDISASM", "nvdisasm") is None:
            return
        sass = report.sass_instructions(cubin)
    ops = [i.split()[1] if i.startswith("@") else i.split()[0] for i in sass]
    assert sum(op.startswith("UTMALDG") for op in ops) == D // 64, [op for op in ops if "UTMA" in op]
    assert any(op.startswith("SYNCS.ARRIVE.TRANS64") for op in ops), "no mbarrier arrive with a byte count"
    assert not any(op.startswith("LDGSTS") for op in ops), "cp.async in a TMA probe"
    # A TMA issued from a one-thread branch compiles to a divergent-warp path (BRA.DIV to a
    # WARPSYNC.COLLECTIVE full-warp elect) that deadlocks on the GPU; the whole warp issues.
    assert not any(op.startswith("BRA.DIV") for op in ops), "TMA issue reached by a divergent warp"
