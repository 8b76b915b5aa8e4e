"""The TMA probes build for sm_90a on a machine without a GPU (their runs on the H200 are
frost_tma_rows_probe_gpu_test.py and frost_tma_stream_probe_gpu_test.py):
- the rows probe (frost_tma_rows_probe.py): one UTMALDG per 64-channel box (D / 64 per
  CTA: the SW128 tile takes 64-column boxes), an mbarrier armed with the transaction bytes,
  no cp.async;
- the chunk stream (frost_tma_stream_probe.py): per chunk one UTMALDG per operand and box
  (3 D / 64), the ring's full and empty mbarrier per stage initialised;
- both: no divergent-warp path to the TMA issue (a TMA issued from a one-thread branch
  compiles to BRA.DIV and a WARPSYNC.COLLECTIVE full-warp elect that deadlocks on the GPU:
  the rows probe's first H200 run), no local memory."""
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


def built_sass(compile_probe, *args):
    """compile_probe(*args, options=...) for sm_90a: asserts no local memory or stack and
    no divergent-warp path to a TMA issue; returns (opcodes, instructions), None without
    nvdisasm."""
    with tempfile.TemporaryDirectory() as tmp:
        compile_probe(*args, options=f"--gpu-arch sm_90a --keep-cubin --dump-dir {tmp}")
        (cubin,) = glob.glob(os.path.join(tmp, "*.cubin"))
        usage = report.resource_usage(cubin)
        assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
        if report.tool("NVDISASM", "nvdisasm") is None:
            return None
        sass = report.sass_instructions(cubin)
    ops = [i.split()[1] if i.startswith("@") else i.split()[0] for i in sass]
    assert not any(op.startswith("BRA.DIV") for op in ops), "TMA issue reached by a divergent warp"
    return ops, sass


@pytest.mark.parametrize("D", [64, 128])
def test_rows_probe_builds_one_tma_box_per_64_channels(D):
    import frost_tma_rows_probe as probe

    built = built_sass(probe.compile_probe, 3, D)
    if built is None:
        return
    ops, _ = built
    assert sum(op.startswith("UTMALDG") for op in ops) == D // 64, [op for op in ops if "UTMA" in op]
    assert any(op.startswith("SYNCS.ARRIVE.TRANS64") for op in ops), "no mbarrier arrive with a byte count"
    assert not any(op.startswith("LDGSTS") for op in ops), "cp.async in a TMA probe"


@pytest.mark.parametrize("D, stages", [(64, 2), (128, 3)])
def test_stream_probe_build(D, stages):
    import frost_tma_stream_probe as probe

    built = built_sass(probe.compile_probe, 4, D, stages)
    if built is None:
        return
    ops, sass = built
    assert sum(op.startswith("UTMALDG") for op in ops) == probe.OPERANDS * D // 64, [op for op in ops if "UTMA" in op]
    inits = [i for i in sass if "SYNCS.EXCH.64" in i]  # mbarrier.init: full and empty per stage
    assert len(inits) == 2 * stages, inits


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
