"""The TMA chunk stream probe (frost_tma_stream_probe.py) builds for sm_90a on a machine
without a GPU: per chunk one UTMALDG per operand and 64-channel box (3 D / 64), issued by
whole-warp code (no divergent-warp path to it: that hangs the GPU, as the rows probe
showed), the ring's 2 x stages mbarriers initialised, no local memory. Its run on the H200 is
frost_tma_stream_probe_gpu_test.py."""
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


@pytest.mark.parametrize("D, stages", [(64, 2), (128, 3)])
def test_stream_probe_build(D, stages):
    import frost_tma_stream_probe as probe

    with tempfile.TemporaryDirectory() as tmp:
        probe.compile_probe(4, D, stages, options=f"--gpu-arch sm_90a --keep-cubin --dump-dir {tmp}")
        (cubin,) = glob.glob(os.path.join(tmp, "*.cubin"))
        usage = report.resource_usage(cubin)
        assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
        if report.tool("NVDISASM", "nvdisasm") is None:
            return
        sass = report.sass_instructions(cubin)
    ops = [i.split()[1] if i.startswith("@") else i.split()[0] for i in sass]
    assert sum(op.startswith("UTMALDG") for op in ops) == probe.OPERANDS * D // 64, [op for op in ops if "UTMA" in op]
    assert not any(op.startswith("BRA.DIV") for op in ops), "TMA issue reached by a divergent warp"
    inits = [i for i in sass if "SYNCS.EXCH.64" in i]  # mbarrier.init: full and empty per stage
    assert len(inits) == 2 * stages, inits
