"""Run by .ci/run in a fresh venv holding only the built wheel: `import cudnn` must work
with no optional dependency installed, and must come from that venv. With `--extension`
(the wheel of `pip install .`, which compiles it), the C++ extension must load from there
too and match the Python code's binding version."""

import importlib.util
import os
import sys

OPTIONAL = ("torch", "cuda.tile", "cutlass", "triton", "nvidia")


def main() -> int:
    present = [name for name in OPTIONAL if importlib.util.find_spec(name.split(".")[0])]
    if present:
        print(f"venv is not clean, found: {present}", file=sys.stderr)
        return 1
    import cudnn

    where = os.path.realpath(cudnn.__file__)
    if not where.startswith(os.path.realpath(sys.prefix)):
        print(f"cudnn imported from {where}, not from the venv {sys.prefix}", file=sys.stderr)
        return 1
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in {n.split(".")[0] for n in OPTIONAL})
    if loaded:
        print(f"import cudnn loaded optional modules: {loaded}", file=sys.stderr)
        return 1
    print(f"import cudnn ok from {os.path.dirname(where)} ({len(cudnn.__path__)} path entries)")
    if "--extension" in sys.argv[1:]:
        return check_extension()
    return 0


def check_extension() -> int:
    from cudnn import _pybind_module
    from cudnn.backend.loader import EXPECTED_BINDING_API_VERSION

    where = os.path.realpath(_pybind_module.__file__)
    if not where.startswith(os.path.realpath(sys.prefix)):
        print(f"the extension loaded from {where}, not from the venv", file=sys.stderr)
        return 1
    version = getattr(_pybind_module, "BINDING_API_VERSION", None)
    if version != EXPECTED_BINDING_API_VERSION:
        print(f"the extension reports BINDING_API_VERSION={version!r}, the Python code "
              f"expects {EXPECTED_BINDING_API_VERSION}", file=sys.stderr)
        return 1
    print(f"cudnn._pybind_module ok from {os.path.dirname(where)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
