"""bench/frost_chain_prep_times.py's stage skipping compiles what it says, on the CPU: the
product's GDN chain (asynchronous wgmma update) with its Gram stage compiled out loses the
Gram's mma.sync (4 K / 16 HMMA of the tile body per chunk, fewer in all) and keeps every
HGMMA of the chain; with the operand stage out as well, fewer instructions again; no local
memory either way. The timing itself needs the H200 (gpu_suite.sh chainprep)."""
import importlib.util
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("NVDISASM", "nvdisasm") is None or
                                report.tool("CUOBJDUMP", "cuobjdump") is None,
                                reason="cuobjdump / nvdisasm not found")


def _bench_tool():
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.join(here, "..", ".."), os.environ.get("TEST_SRCDIR", ""), os.getcwd()):
        for path in (os.path.join(root, "bench", "frost_chain_prep_times.py"),
                     os.path.join(root, "_main", "bench", "frost_chain_prep_times.py")):
            if os.path.isfile(path):
                spec = importlib.util.spec_from_file_location("frost_chain_prep_times", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
    pytest.skip("bench/frost_chain_prep_times.py not found")


def _sass(cfg, skip):
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.bwd_abi import bwd_fake_args
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    cls = bwd_kernel_for(cfg)
    if skip:
        cls = _bench_tool().skipping(cls, skip)
    with tempfile.TemporaryDirectory() as tmp:
        cute.compile(cls(cfg), *bwd_fake_args(cfg), options=f"--gpu-arch sm_90a --keep-cubin --dump-dir {tmp}")
        (cubin,) = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".cubin")]
        usage = report.resource_usage(cubin)
        ops = [i.split()[1] if i.startswith("@") else i.split()[0] for i in report.sass_instructions(cubin)]
    assert usage["LOCAL"] == 0, (skip, usage)
    return ops


def test_skipped_prep_stages_leave_the_kernel():
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    K = 128
    f = FrostFwdConfig("bfloat16", None, 4, 4, 4, K, K, False, False, False, True, False, False)
    cfg = FrostBwdConfig(f, "chain", None, None, forward_values=True, chain_wgmma=True, chain_async=True)
    full, no_gram, no_prep = (_sass(cfg, skip) for skip in ((), ("gram",), ("gram", "operands")))

    def count(ops, prefix):
        return sum(op.startswith(prefix) for op in ops)

    for ops in (no_gram, no_prep):
        assert count(ops, "HGMMA") == count(full, "HGMMA")  # the chain itself is untouched
    assert count(full, "HMMA") - count(no_gram, "HMMA") >= 4 * K // 16, (count(full, "HMMA"), count(no_gram, "HMMA"))
    assert len(no_prep) < len(no_gram) < len(full), (len(full), len(no_gram), len(no_prep))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
