"""One MoE grouped matmul case on the GPU through the backend plan path, in its own process:
an illegal memory access poisons the CUDA context of the process that hit it, so
test_moe_modes_backend.py runs every case as a separate `python3 moe_modes_probe.py CASE`.

The case's graph is built with cudnn.pygraph from a random top-k routing
(moe_reference.random_routing), planned by the router, executed on the backend
(native_runner.run_on_backend asserts the plan path) and compared with the float64
reference (moe_reference.moe_grouped_matmul). The last stdout line is the verdict, one JSON
object after RESULT_TAG: status "pass" / "fail" (numerics over the bound) / "declined"
(the backend or cuDNN refused the graph, with the reason) / "error" (anything else raised;
a crash leaves no line at all).

  PYTHONPATH=$(python3 tools/pythonpath.py) python3 tests/backend/moe_modes_probe.py --list
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import dataclass

if __package__ in (None, ""):  # run as a script: the checkout root holds the tests package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                    os.pardir))

import numpy as np  # noqa: E402

from tests.backend import moe_reference  # noqa: E402

RESULT_TAG = "MOE_PROBE_RESULT "
#: relative to the largest reference value: fp16 storage after fp32 math (as for mode NONE)
BOUND = 5e-3


@dataclass(frozen=True)
class Case:
    mode: str
    tokens: int
    experts: int
    top_k: int
    k: int = 64
    n: int = 48
    idle: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        idle = f", expert {'/'.join(map(str, self.idle))} idle" if self.idle else ""
        return (f"moe {self.mode} S={self.tokens} E={self.experts} top-{self.top_k}{idle}")


# K and N stay multiples of 8 (16-byte rows of fp16, as cuDNN's matmul engines want); the
# token counts are odd and one expert gets no rows, the routing's awkward parts.
CASES = {
    "none_E4_top2": Case("NONE", 37, 4, 2, idle=(2,)),
    "gather_E4_top2": Case("GATHER", 37, 4, 2, idle=(2,)),
    "gather_E3_top1": Case("GATHER", 64, 3, 1),   # R == S: separates "more rows than tokens"
    "scatter_E4_top2": Case("SCATTER", 37, 4, 2, idle=(2,)),
    "scatter_E3_top1": Case("SCATTER", 64, 3, 1),
}


def inputs(case: Case, device: str):
    """(routing, {port: torch tensor}) for `case`: random fp16 tokens and expert weights and
    the routing's index tensors, laid out as the graph takes them."""
    import torch

    seed = sum(map(ord, case.label))
    torch.manual_seed(seed)
    routing = moe_reference.random_routing(np.random.default_rng(seed), case.tokens,
                                           case.experts, case.top_k, case.idle)
    rows = routing.tokens if case.mode == "GATHER" else routing.rows
    as_column = (1, -1, 1)
    tensors = {
        "token": (torch.randn(1, rows, case.k, device=device) * 0.5).half(),
        # [E, K, N] column-major per expert (K packed): the only weight layout cuDNN 9.19's
        # sm_90 MoE engine takes (measured with mode NONE)
        "weight": (torch.randn(case.experts, case.n, case.k, device=device) * 0.5).half()
        .transpose(1, 2),
        "first_token_offset": torch.from_numpy(routing.first_token_offset).to(device)
        .reshape(-1, 1, 1),
        "token_index": torch.from_numpy(routing.token_index).to(device).reshape(as_column),
        "token_ks": torch.from_numpy(routing.token_ks).to(device).reshape(as_column),
    }
    return routing, tensors


def graph_of(g, case: Case, tensors: dict):
    """Adds the case's moe_grouped_matmul to pygraph `g`; returns (output, feeds)."""
    import cudnn
    from tests.backend.native_runner import ir_input

    ports = ["token", "weight", "first_token_offset"]
    ports += {"NONE": [], "GATHER": ["token_index"],
              "SCATTER": ["token_index", "token_ks"]}[case.mode]
    feeds = {name: ir_input(g, tensors[name], name) for name in ports}
    kwargs = {"top_k": case.top_k} if case.mode == "SCATTER" else {}
    y = g.moe_grouped_matmul(**feeds, mode=getattr(cudnn.moe_grouped_matmul_mode, case.mode),
                             **kwargs)
    y.set_output(True)
    return y, {t: tensors[name] for name, t in feeds.items()}


def reference(case: Case, routing, tensors: dict) -> np.ndarray:
    return moe_reference.moe_grouped_matmul(
        tensors["token"].cpu().numpy(), tensors["weight"].cpu().numpy(),
        routing.first_token_offset, case.mode, routing.token_index, routing.token_ks,
        case.top_k)


def run(name: str) -> dict:
    import torch

    import cudnn
    from cudnn.backend import handles
    from tests.backend import op_gates
    from tests.backend.native_runner import rel_err, run_on_backend

    case = CASES[name]
    verdict = {"case": name, "label": case.label}
    major, minor = torch.cuda.get_device_capability()
    if op_gates.expected_decline("moe_grouped_matmul", major * 10 + minor) is not None:
        return {**verdict, "status": "declined",
                "reason": op_gates.gate_text("moe_grouped_matmul", major * 10 + minor)}
    routing, tensors = inputs(case, "cuda")
    DT = cudnn.data_type
    with handles.create_handle(torch.cuda.current_stream().cuda_stream) as handle:
        g = cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                          compute_data_type=DT.FLOAT, handle=handle)
        y, feeds = graph_of(g, case, tensors)
        try:
            (got,), plan = run_on_backend(g, feeds, [y])
        except cudnn.cudnnGraphNotSupportedError as err:
            return {**verdict, "status": "declined", "reason": str(err).splitlines()[0]}
    want = reference(case, routing, tensors)
    err = rel_err(got, torch.from_numpy(want))
    return {**verdict, "status": "pass" if err <= BOUND else "fail", "rel_err": err,
            "bound": BOUND, "plan": plan, "shape": "x".join(map(str, want.shape))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", nargs="?", choices=sorted(CASES))
    parser.add_argument("--list", action="store_true", help="print the case names")
    args = parser.parse_args(argv)
    if args.list or args.case is None:
        print("\n".join(sorted(CASES)))
        return 0
    try:
        verdict = run(args.case)
    except Exception as err:  # noqa: BLE001 - the verdict carries it to the parent
        traceback.print_exc()
        verdict = {"case": args.case, "status": "error",
                   "reason": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
    print(RESULT_TAG + json.dumps(verdict), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
