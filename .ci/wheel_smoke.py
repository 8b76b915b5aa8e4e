"""Run by .ci/run in a fresh venv holding only the built wheel (and its one dependency,
absl-py): `import cudnn` must work with no optional dependency installed, and must come
from that venv. With `--extension`, the C++ extension must load from there too, match
the Python code's binding version, and the backend must answer `backend_plan_entries()`
for a sample graph: a list, empty with the reason printed where there is no GPU or no
cuDNN library."""

import importlib.metadata
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
    installed = importlib.metadata.version("cudnn-pygraph")
    if cudnn.__version__ != installed:
        print(f"cudnn.__version__ {cudnn.__version__} != installed {installed}", file=sys.stderr)
        return 1
    print(f"import cudnn {cudnn.__version__} ok from {os.path.dirname(where)} "
          f"({len(cudnn.__path__)} path entries)")
    if "--extension" in sys.argv[1:]:
        return check_extension()
    return 0


def check_extension() -> int:
    import cudnn
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
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, compute_data_type=cudnn.data_type.FLOAT)
    a, b = graph.tensor([1, 64, 32], name="A"), graph.tensor([1, 32, 16], name="B")
    graph.matmul(a, b, name="mm").set_output(True)
    entries = graph.backend_plan_entries()
    if not isinstance(entries, list):
        print(f"backend_plan_entries() gave {entries!r}, not a list", file=sys.stderr)
        return 1
    if entries:
        print(f"backend_plan_entries(): {len(entries)} plans for a matmul")
        return 0
    reason = graph.explain_plans().backend.declined
    if not reason or "cannot be imported" in reason:
        print(f"backend_plan_entries() is empty and the reason is {reason!r}", file=sys.stderr)
        return 1
    print(f"backend_plan_entries(): [] ({reason})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
