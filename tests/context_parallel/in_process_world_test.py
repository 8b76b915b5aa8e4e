"""Context parallelism with all ranks in one process (in_process_world.py) on CPUs: the
cases of cp_cases at world sizes 2, 4 and 8 (and the GPU cases at 4), float64, the
test-only reference engines, equal to the single-process result within float64 rounding;
and the harness's own check (a rank run before its left neighbour finds no message)."""
from __future__ import annotations

import pytest
import torch

from tests.context_parallel.cp_cases import (CASES, GPU_CASES, CpCase, rank_forward,
                                             single_process)
from tests.context_parallel.in_process_world import check_world, in_process_world
from tests.torch_ops.reference_summary_engine import cp_reference_engines_installed

EXACT = 1e-11  # as cp_gloo_test: the same math in another order


@pytest.fixture(scope="module", autouse=True)
def engines():
    with cp_reference_engines_installed():
        yield


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_in_process_world_equals_single_process(case, world):
    check_world(case, world, "cpu", torch.float64, EXACT)


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.name)
def test_gpu_cases_on_cpu(case):
    # the GPU checks' shapes and cuts (world 4: pass-through ranks), in float64 here, so a
    # GPU run meets only the engines' rounding
    check_world(case, 4, "cpu", torch.float64, EXACT)


def test_eight_ranks_with_a_chain_of_pass_through_ranks():
    # lengths 3, 38, 3: ranks 1..5 lie inside the long sequence (5 summaries in a row)
    case = CpCase("kda_eight_ranks", dict(CASES[1].config),
                  {8: [0, 4, 10, 16, 17, 23, 39, 41, 44]})
    errors = check_world(case, 8, "cpu", torch.float64, EXACT)
    assert len(errors) == 8


def test_a_rank_run_before_its_left_neighbour_finds_no_message():
    ref = single_process(CASES[0], "cpu", torch.float64)
    with pytest.raises(AssertionError, match="rank 1 receives from rank 0, which has sent "
                                             "nothing yet"):
        with in_process_world(2) as ranks:
            rank_forward(ref, 2, 1, ranks[1], "cpu")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
