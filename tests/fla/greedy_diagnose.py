"""Replays gpu_test.py's greedy generation and shows, step by step, where the drop-in and
transformers' torch path part ways (a diagnostic, not a test).

Run from the repository root (no Bazel), the package and transformers installed:
    python3 tests/fla/greedy_diagnose.py              # the mixture-of-experts LM, on CUDA
    python3 tests/fla/greedy_diagnose.py --dense      # the dense LM gpu_test.py now uses
    python3 tests/fla/greedy_diagnose.py --cpu        # CPU, test-only reference engines

One block per forward (step 0 is the prefill): the logits error, each decoder layer's
last-token output error, the routers' smallest top-2 logit margin and any ROUTER FLIP
(the two paths chose different experts), then per gated-delta-rule call: which cached
graph ran it and how (plan name; "lane" = the op's launch lane, "executor" = the graph's
checked path), the relative errors of o and of the final state against a float64
recurrence on that call's own captured inputs (drop-in: "mine", torch path: "torch"), o
between the two paths, the two paths' initial states, and input statistics. The last
lines name the worst step and what deviates there.

Reading it: a step whose logits error jumps while "o mine" / "state mine" stay at the
other steps' level and a ROUTER FLIP is listed is the MoE router's discontinuity, not a
kernel error; a kernel defect shows as "o mine" or "state mine" far above "o torch" /
"state torch" at that step (and an S0 mismatch at the steps after, if the state was hit).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

KERNEL_BOUND = 1e-2  # gpu_test.OUT_BOUND: bf16 results against float64
LOGITS_BOUND = 2e-2  # gpu_test.LOGITS_BOUND


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dense", action="store_true",
                        help="the dense-MLP LM (gpu_test.py's) instead of the 2-expert one")
    parser.add_argument("--cpu", action="store_true",
                        help="on the CPU with the test-only reference engines")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--seed", type=int, default=2, help="model seed (gpu_test: 2)")
    parser.add_argument("--prompt-seed", type=int, default=3, help="prompt seed (gpu_test: 3)")
    a = parser.parse_args()

    import transformers

    from tests.fla import generation_trace as trace
    from tests.fla import tiny_models as tiny

    device = "cpu" if a.cpu else "cuda"
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, python "
          f"{platform.python_version()}, FLA {'installed' if _has_fla() else 'absent'}, "
          f"device {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}")
    config, model = tiny.qwen3_next_lm(seed=a.seed, dense_mlp=a.dense)
    model = model.to(device).bfloat16().eval()
    gen = torch.Generator(device=device).manual_seed(a.prompt_seed)
    prompt = torch.randint(0, config.vocab_size, (1, 24), device=device, generator=gen)
    print(f"model: {'dense MLP' if a.dense else '2 experts, top 1'}, layers "
          f"{config.layer_types}, prompt {prompt[0].tolist()}")

    if a.cpu:
        from cudnn.linear_attention import ops
        from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed
        with reference_engines_installed():
            reference_engine("gdn").offers_direct_launch = True  # cached calls take the lane
            ops.clear_graph_caches()
            pairs = trace.replay(model, prompt, a.steps, lambda: tiny.new_cache(config))
    else:
        pairs = trace.replay(model, prompt, a.steps, lambda: tiny.new_cache(config))
    reports = [trace.compare(p) for p in pairs]
    for r in reports:
        print(r.line(), flush=True)

    worst = max(reports, key=lambda r: r.logits)
    kernel = max(reports, key=lambda r: r.worst_kernel_error())
    print(f"\nworst logits: step {worst.step} ({worst.logits:.3e}); worst drop-in kernel "
          f"error (o or state vs float64): step {kernel.step} "
          f"({kernel.worst_kernel_error():.3e})")
    flips = [(r.step, f) for r in reports for f in r.router_flips]
    print(f"router flips: {flips if flips else 'none'}")
    if worst.logits <= LOGITS_BOUND and kernel.worst_kernel_error() <= KERNEL_BOUND:
        print(f"verdict: every step within bounds (logits <= {LOGITS_BOUND}, o and state "
              f"<= {KERNEL_BOUND} of float64)")
    elif worst.router_flips and worst.worst_kernel_error() <= KERNEL_BOUND:
        print(f"verdict: step {worst.step} is a router flip (MoE discontinuity); the kernels' "
              f"o/state errors there are at the usual level")
    elif kernel.worst_kernel_error() > KERNEL_BOUND:
        print(f"verdict: the drop-in's kernel results deviate at step {kernel.step}: see its "
              f"'o mine' / 'state mine' and the plan/lane it ran")
    else:
        print("verdict: no router flip and no kernel deviation: look at the per-layer hidden "
              "errors of the worst step")
    return 0


def _has_fla() -> bool:
    import importlib.util
    return importlib.util.find_spec("fla") is not None


if __name__ == "__main__":
    raise SystemExit(main())
