"""GPU: a stored FROST kernel launches and computes the right answer without a compile.

A small GDN config (pipelined, bf16, fp32 states, l2norm) is cross-compiled with the generic
x86-64 host shim, exactly as tools/gpu/frost_precompile.py builds it on the build machine,
and stored in a temporary store. A fresh process then runs frost_fwd on seeded inputs
with the store strict (a miss is an error), fwd.compile_fwd and cute.compile made to
raise, and compares out and final_state with the float64 token recurrence (relative L2
error <= 1e-2). This is what the CPU tests cannot reach: loading the cubin into a CUDA
context and launching it. Skips without a CUDA GPU, torch or nvidia-cutlass-dsl.

  python3 -m pytest -q engines_frost/tests/frost_kernel_store_gpu_test.py
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from cudnn.linear_attention.frost.kernels import fwd, kernel_store  # noqa: E402
from cudnn.linear_attention.frost.kernels.compile_kernel import FFI_ENV  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CFG = FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=2, HK=2, HV=2, K=64, V=64,
                     gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=True,
                     has_initial_state=True, has_final_state=True)

RUN_FROM_STORE = r"""
import json, math, sys
import torch
import cutlass.cute as cute
from cudnn.linear_attention.frost.kernels import fwd
from tests.reference.compare import rel_err
from tests.reference.gdn import naive_recurrent_gdn
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family

def no_compiler(*a, **k):
    raise AssertionError("the compiler was called")
fwd.compile_fwd = no_compiler
cute.compile = no_compiler

x = make_inputs(InputConfig(family=Family.GDN, seq_lens=(1, 63, 64, 65, 130), H=2, K=64, V=64,
                            dtype=torch.bfloat16, device="cuda", use_qk_l2norm=True,
                            with_initial_state=True), seed=3)
T, N = x.q.shape[0], x.cu_seqlens.numel() - 1
out = torch.full((T, 2, 64), float("nan"), dtype=torch.bfloat16, device="cuda")
ht = torch.full((N, 2, 64, 64), float("nan"), dtype=torch.float32, device="cuda")
scale = 1 / math.sqrt(64)
fwd.frost_fwd(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=None, cu_seqlens=x.cu_seqlens, out=out,
              initial_state=x.initial_state, final_state=ht, scale=scale, use_l2norm=True,
              gate_per_channel=False, beta_per_channel=False, stream=None)
torch.cuda.synchronize()
d = lambda t: t.double()
ro, rht = naive_recurrent_gdn(d(x.q), d(x.k), d(x.v), d(x.g), d(x.beta), x.cu_seqlens.long(), scale=scale,
                              initial_state=d(x.initial_state), output_final_state=True, use_qk_l2norm=True)
(kernel,) = fwd._cache.values()  # the one kernel this process used
print(json.dumps({"o": rel_err(out, ro), "final_state": rel_err(ht, rht), "ffi": kernel.ffi,
                  "loaded": type(kernel.fn).__name__ == "Function" if kernel.ffi == "tvm"
                  else kernel.fn.load_from_binary}))
"""


@pytest.mark.parametrize("ffi", ["cute", "tvm"])
def test_a_stored_kernel_runs_without_compiling(tmp_path, ffi):
    """cute: cross-compiled with the generic host shim (what a build machine stores);
    tvm: compiled here in the TVM-FFI convention (tools/gpu/frost_precompile.py --native)."""
    arch = fwd.device_arch(torch.device("cuda"))
    if arch != "sm_90a":
        pytest.skip(f"the FROST kernels are built for sm_90a; this GPU is {arch}")
    if ffi == "tvm" and importlib.util.find_spec("tvm_ffi") is None:
        pytest.skip("apache-tvm-ffi is not installed")
    kernel = fwd.compile_fwd(CFG, arch, ffi=ffi,
                             host_target=kernel_store.GENERIC_X86_64 if ffi == "cute" else None)
    kernel_store.KernelStore(tmp_path).save(CFG, arch, kernel)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), kernel_store.STORE_ENV: str(tmp_path),
           kernel_store.STRICT_ENV: "1", kernel_store.WRITE_ENV: "0", FFI_ENV: ffi}
    out = subprocess.run([sys.executable, "-c", RUN_FROM_STORE], env=env, capture_output=True, text=True,
                         check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"from the store: {got}")
    assert got["loaded"] is True and got["ffi"] == ffi
    assert got["o"] <= 1e-2 and got["final_state"] <= 1e-2, got


def test_the_suite_store_holds_this_session_kernels():
    """With FROST_KERNEL_CACHE set (gpu_suite.sh frostcache), its entries load here: the
    carried store matches this machine's CuTe DSL, CUDA flavour and kernel sources."""
    store = kernel_store.active_store()
    if store is None:
        pytest.skip(f"{kernel_store.STORE_ENV} is not set")
    entries = store.entries()
    assert entries, f"{store.root} holds no entries"
    here = kernel_store.toolchain()
    keyed = [part for part in here if part != "tvm_ffi"]  # TVM-FFI's release keys tvm kernels only
    stale = sorted({part for e in entries for part in keyed if e.get(part) != here[part]})
    assert not stale, f"{store.root} was built with another {', '.join(stale)}: rebuild it (frost_precompile.py)"
    first = entries[0]
    sample = FrostFwdConfig(**first["config"])
    host_target = None if first["host"].startswith("native-") else first["host"]
    assert store.load(sample, first["arch"], first["ffi"], host_target) is not None


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
