"""Context parallelism on CPUs: world sizes 2 and 4, gloo, one process per rank
(torch.multiprocessing), the test-only reference engines (float64).

Every rank checks (cp_cases.check_rank) that its outputs, the final states it owns and
every gradient equal the single-process result of the same ops within float64 rounding,
for ragged sequences cut at arbitrary token offsets (inside sequences and chunks, ranks
covered by one sequence, ranks without tokens), and that only states of sequences that
cross a cut travel (one message per direction per cut). World 4 also runs a case on a
two-rank subgroup (global ranks 1 and 3), whose group ranks are not the global ones.
"""
from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

EXACT = 1e-11  # float64: the same math in another order (states through a summary)
TIMEOUT = datetime.timedelta(seconds=60)  # a hung exchange fails instead of blocking CI


def _rank_main(rank: int, world: int, init_file: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=TIMEOUT)
    from tests.context_parallel.spawned_rank import leave_gloo_world
    try:
        from tests.context_parallel.cp_cases import CASES, check_rank
        from tests.torch_ops.reference_summary_engine import cp_reference_engines_installed
        # a subgroup whose group ranks differ from the global ones (ranks 1 and 3 of 4)
        pair = dist.new_group([1, 3]) if world == 4 else None
        with cp_reference_engines_installed():
            for case in CASES:
                check_rank(case, world, rank, None, "cpu", torch.float64, EXACT)
            if pair is not None and rank in (1, 3):
                check_rank(CASES[0], 2, dist.get_rank(pair), pair, "cpu", torch.float64, EXACT)
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    leave_gloo_world(init_file, rank, world, TIMEOUT)  # spawned_rank.py: why not a plain exit


@pytest.mark.parametrize("world", [2, 4], ids=lambda world: f"world{world}")
def test_context_parallel_equals_single_process(world, tmp_path):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # inherited by the ranks
    mp.spawn(_rank_main, args=(world, str(tmp_path / "init")), nprocs=world, join=True)


if __name__ == "__main__":
    import sys
    raise SystemExit(pytest.main([__file__, "-q", *sys.argv[1:]]))  # Bazel passes -k worldN
