"""Context parallelism on ONE GPU with every rank in this process (in_process_world.py):
the installed engines (FROST), cp_cases.GPU_CASES at world sizes 2 and 4, bf16. World 4
has ranks covered by one sequence, whose state goes through the span summary engines, so
a one- or two-GPU machine checks that path too (NCCL needs one GPU per rank:
cp_nccl_gpu_test.py). Bound: cp_cases.GPU_BOUND (1e-2) against the single-GPU op.

  python3 -m pytest -q -s tests/context_parallel/cp_in_process_gpu_test.py   (repo root)
"""
from __future__ import annotations

import pytest
import torch

from tests.context_parallel.cp_cases import GPU_BOUND, GPU_CASES
from tests.context_parallel.in_process_world import check_world

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.name)
def test_context_parallel_in_one_process_on_a_gpu(case, world):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    errors = check_world(case, world, "cuda", torch.bfloat16, GPU_BOUND)
    for rank, errs in enumerate(errors):
        print(f"world {world} rank {rank} {case.name}: "
              + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()), flush=True)


if __name__ == "__main__":
    import sys
    raise SystemExit(pytest.main([__file__, "-q", "-s", *sys.argv[1:]]))
