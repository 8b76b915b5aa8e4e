"""`import cudnn` works with every optional dependency made unimportable.

Runs a fresh interpreter on this test's own sys.path, with a meta-path hook that makes
torch, the DSLs (cuda.tile, cutlass), triton and the NVIDIA wheels raise ImportError, then
imports the product modules that must stay importable without them: the package, the
router and what the linear-attention engines share (they import torch only when a plan
runs).
"""

import os
import subprocess
import sys

import pytest

BLOCKED = ("torch", "cuda", "cutlass", "triton", "nvidia", "cupy")

PROBE = """
import importlib.abc, sys
BLOCKED = {blocked!r}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked by optional_deps_test")
        return None

sys.meta_path.insert(0, Block())
import cudnn
import cudnn.engines.graph_api, cudnn.engines.manifest
import cudnn.linear_attention.common.facts, cudnn.linear_attention.common.feature_gates
import cudnn.linear_attention.common.port_dtypes, cudnn.linear_attention.common.torch_buffers
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
assert not loaded, loaded
print("ok", len(cudnn.__path__))
"""


def _run_probe(blocked):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", PROBE.format(blocked=blocked)],
                          env=env, capture_output=True, text=True, timeout=120)


def test_import_cudnn_without_optional_dependencies():
    result = _run_probe(BLOCKED)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok ")


def test_the_blocker_really_blocks():
    # Same probe, but it imports a blocked name itself: it must fail, or the test above
    # would prove nothing.
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(blocked=BLOCKED) + "import torch\n"],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "torch is blocked by optional_deps_test" in result.stderr


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
