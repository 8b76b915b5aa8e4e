"""Importing the package changes nothing in torch or in any other library.

A fresh interpreter on this test's sys.path imports torch, the DSLs and absl first and
records, for each of their loaded modules (and the classes defined there), which object
every attribute name is bound to. It then imports every product module that loads code
at import time (the package, the torch ops, which register their custom ops, the
engines, the backend's Python side, the FLA drop-in, the CLI) and compares: an attribute
that was added, removed or rebound in a module we do not own is a patch, and so is a
change of the import system's finders or path hooks. Registering custom ops adds
`torch.ops.cudnn`, which lives in torch's op registry, not in a module's attributes.
"""

import os
import subprocess
import sys

PROBE = r"""
import importlib, sys, types

FOREIGN = ("torch", "cutlass", "cuda", "tvm_ffi", "absl", "numpy", "transformers")
for name in FOREIGN + {preload}:
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

def import_system():  # FLA's install() adds an import hook; importing must not
    return {"sys.meta_path": [id(f) for f in sys.meta_path],
            "sys.path_hooks": [id(h) for h in sys.path_hooks]}

before = snapshot()
hooks_before = import_system()
keep = [m for m in sys.modules.values()]  # keep every object alive: ids stay unique
import cudnn
for name in ("cudnn.linear_attention.ops", "cudnn.engines.graph_api", "cudnn.engines.manifest",
             "cudnn.linear_attention.frost.gdn_engine", "cudnn.linear_attention.cutile.gdn_engine",
             "cudnn.backend.adapter", "cudnn.linear_attention.fla", "cudnn.cli.main",
             "cudnn.linear_attention.context_parallel",
             "cudnn.linear_attention.frost.gdn_summary_engine"):
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
changed += [name for name, ids in import_system().items() if ids != hooks_before[name]]
print("\n".join(changed) if changed else "unchanged")
"""


def probe(extra: str = "", preload: tuple[str, ...] = ()) -> str:
    return PROBE.replace("{extra}", extra).replace("{preload}", repr(tuple(preload)))


def test_importing_the_package_patches_nothing():
    # transformers' Qwen3-Next module holds the torch functions the FLA drop-in replaces,
    # but only when install() is called; context parallelism runs on torch.distributed
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code = probe(preload=("transformers.models.qwen3_next.modeling_qwen3_next",
                          "torch.distributed"))
    result = subprocess.run([sys.executable, "-c", code], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "unchanged", result.stdout


def test_the_probe_sees_a_patch():
    # The same probe with a patch of the kind the package once made: it must be seen.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    patch = "torch._library.utils.fill_defaults = lambda *a: a"
    result = subprocess.run([sys.executable, "-c", probe(patch)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["torch._library.utils.fill_defaults"], result.stdout


def test_the_probe_sees_an_import_hook():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    hook = "import cudnn.linear_attention.fla as f; f.install(); f.uninstall(); f.install()"
    result = subprocess.run([sys.executable, "-c", probe(hook)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "sys.meta_path" in result.stdout.split(), result.stdout


if __name__ == "__main__":
    import pytest

    raise SystemExit(pytest.main([__file__, "-q"]))
