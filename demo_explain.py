"""`demo explain`: the library's job on sample graphs, on the machine it runs on.

    tools/bazel run //:demo -- explain [matmul|gdn|kda|gdn2 ...]

Each sample graph is built with the public IR only, planned and explained with
`graph.explain_plans()` (every candidate engine with its claim, decline or absence, the
backend's answer, the ranked plan list), and then run where an engine can: with torch on
a CUDA device, the first plan that builds executes on random inputs, and the line under
the explanation says which plan ran, on which GPU, how long it took and whether the
outputs are finite; elsewhere it says why nothing ran. What is claimed depends on what this
machine has installed (engine kernels, the cuDNN backend, a GPU).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import cudnn
from cudnn.cli import shapes

D = cudnn.data_type
LA_SHAPE = shapes.Shape(seqs=2, seq_len=256, H=16, HV=16, K=128, V=128, final_state=True)


def matmul_graph() -> cudnn.pygraph:
    g = cudnn.pygraph(name="matmul_sample", io_data_type=D.BFLOAT16,
                      compute_data_type=D.FLOAT)
    a = g.tensor([4, 256, 512], name="A")
    b = g.tensor([4, 512, 128], name="B")
    g.matmul(a, b, name="mm").set_output(True)
    return g


def _la_graph(op: str) -> Callable[[], cudnn.pygraph]:
    def build() -> cudnn.pygraph:
        graph = shapes.linear_attention_graph(op, LA_SHAPE)
        graph.name = f"{op}_sample"
        return graph
    build.__doc__ = f"{op} forward, {LA_SHAPE.describe()}"
    return build


gdn_graph = _la_graph("gdn")

SAMPLES: dict[str, Callable[[], cudnn.pygraph]] = {
    "matmul": matmul_graph, "gdn": gdn_graph, "kda": _la_graph("kda"), "gdn2": _la_graph("gdn2")}


def _torch_dtype(torch, data_type):
    return {D.FLOAT: torch.float32, D.HALF: torch.float16, D.BFLOAT16: torch.bfloat16,
            D.INT32: torch.int32, D.INT64: torch.int64}[data_type]


def _buffers(graph: cudnn.pygraph, name: str, device) -> dict:
    """Random inputs (linear attention: in the gates' working range) and empty outputs."""
    import torch

    node = graph.nodes[0]
    given = shapes.torch_inputs(name, LA_SHAPE, device) if name in shapes.LINEAR_ATTENTION else {}
    pack = {}
    for port, tensor in node.inputs.items():
        dtype = _torch_dtype(torch, tensor.data_type or graph_io(graph))
        pack[tensor] = given[port] if port in given else \
            torch.randn(list(tensor.dim), device=device).to(dtype)
    for tensor in node.outputs.values():
        if tensor is not None:
            dtype = _torch_dtype(torch, tensor.data_type or graph_io(graph))
            pack[tensor] = torch.empty(list(tensor.dim), device=device, dtype=dtype)
    return pack


def graph_io(graph: cudnn.pygraph):
    return getattr(graph, "io_data_type", None) or D.BFLOAT16


def run(graph: cudnn.pygraph, name: str) -> str:
    """One line: what ran (plan, GPU, time, finite outputs), or why nothing did."""
    try:
        import torch
    except ImportError:
        return "run: not here (torch is not installed)"
    if not torch.cuda.is_available():
        return "run: not here (no CUDA device is visible; the reasons above say what each engine needs)"
    if graph.get_execution_plan_count() == 0:
        return "run: not here (no engine offers a plan for this graph, see above)"
    device = torch.device("cuda", torch.cuda.current_device())
    try:
        graph.build_plans()
    except cudnn.cudnnGraphNotSupportedError as e:
        return f"run: no plan builds here ({e})"
    pack = _buffers(graph, name, device)
    workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device=device)
    try:
        graph.execute(pack, workspace)  # the first call compiles or loads the kernels
        torch.cuda.synchronize(device)
        reps, start = 10, time.perf_counter()
        for _ in range(reps):
            graph.execute(pack, workspace)
        torch.cuda.synchronize(device)
    except Exception as e:  # a demo reports what failed and goes on with the next sample
        return f"run: FAILED ({type(e).__name__}: {str(e)[:300]})"
    ms = (time.perf_counter() - start) / reps * 1e3
    finite = all(bool(t.float().isfinite().all()) for t in pack.values()
                 if t.is_floating_point())
    engine = graph.selected_engine
    return (f"run: {getattr(engine, 'name', engine)} on {torch.cuda.get_device_name(device)}: "
            f"{ms:.3f} ms per call (host-timed, 10 calls); outputs finite: {finite}")


def report(names: Iterable[str] = tuple(SAMPLES), execute: bool = False) -> str:
    sections = []
    for name in names:
        if name not in SAMPLES:
            raise ValueError(f"unknown sample graph '{name}' (known: {', '.join(SAMPLES)})")
        graph = SAMPLES[name]()
        text = f"== {name} ==\n{graph.explain_plans().render()}"
        if execute:
            text += "\n" + run(graph, name)
        sections.append(text)
    return "\n\n".join(sections)


if __name__ == "__main__":
    print(report(execute=True))
