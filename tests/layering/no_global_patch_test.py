"""Importing the package changes nothing in torch or in any other library.

A fresh interpreter on this test's sys.path imports torch, the DSLs and absl first and
records, for each of their loaded modules (and the classes defined there), which object
every attribute name is bound to. It then imports every product module that loads code
at import time (the package, the torch ops, which register their custom ops, the
engines, the backend's Python side, the CLI) and compares: an attribute that was added,
removed or rebound in a module we do not own is a patch. Registering custom ops adds
`torch.ops.cudnn`, which lives in torch's op registry, not in a module's attributes.
"""

import os
import subprocess
import sys

PROBE = r"""
import importlib, sys, types

FOREIGN = ("torch", "cutlass", "cuda", "tvm_ffi", "absl", "numpy")
for name in FOREIGN:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
import torch._library.utils, torch._library.autograd, torch.library, torch.autograd

def snapshot():
    seen = {}
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or name.split(".")[0] not in FOREIGN:
            continue
        try:
            attrs = dict(vars(module))
        except TypeError:
            continue
        seen[name] = {k: id(v) for k, v in attrs.items() if not k.startswith("__")}
        for k, v in attrs.items():
            if isinstance(v, type) and getattr(v, "__module__", None) == name:
                seen[f"{name}.{k}"] = {a: id(b) for a, b in vars(v).items()
                                        if not a.startswith("__")}
    return seen

before = snapshot()
keep = [m for m in sys.modules.values()]  # keep every object alive: ids stay unique
import cudnn
for name in ("cudnn.linear_attention.ops", "cudnn.engines.graph_api", "cudnn.engines.manifest",
             "cudnn.linear_attention.frost.gdn_engine", "cudnn.linear_attention.cutile.gdn_engine",
             "cudnn.backend.adapter", "cudnn.linear_attention.fla", "cudnn.cli.main"):
    importlib.import_module(name)
{extra}
after = snapshot()
changed = []
for name, attrs in before.items():
    if name == "torch.ops":  # the op registry: custom ops register here
        continue
    now = after.get(name, {})
    for k in sorted(set(attrs) | set(now)):
        if attrs.get(k) != now.get(k):
            changed.append(f"{name}.{k}")
print("\n".join(changed) if changed else "unchanged")
"""


def test_importing_the_package_patches_nothing():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", PROBE.replace("{extra}", "")], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "unchanged", result.stdout


def test_the_probe_sees_a_patch():
    # The same probe with a patch of the kind the package once made: it must be seen.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    patch = "torch._library.utils.fill_defaults = lambda *a: a"
    result = subprocess.run([sys.executable, "-c", PROBE.replace("{extra}", patch)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["torch._library.utils.fill_defaults"], result.stdout


if __name__ == "__main__":
    import pytest

    raise SystemExit(pytest.main([__file__, "-q"]))
