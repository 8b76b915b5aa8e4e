"""Context parallelism on GPUs: one rank per GPU, NCCL, the installed engines (FROST).

Each rank runs cp_cases.GPU_CASES (bf16, cuts inside sequences and 64-token chunks) and
compares its outputs, owned final states and every gradient with the single-process result
of the same ops on its own GPU, and counts its messages (one per direction per cut its
sequences cross). World 2 needs two GPUs; world 4 (ranks covered by one sequence, whose
state goes through the span summary) needs four (cp_in_process_gpu_test.py runs it with
all ranks on one GPU).

  python3 -m pytest -q -s tests/context_parallel/cp_nccl_gpu_test.py   (repository root)
"""
from __future__ import annotations

import datetime

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.gpu
TIMEOUT = datetime.timedelta(seconds=120)


def _rank_main(rank: int, world: int, init_file: str) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=TIMEOUT,
                            device_id=torch.device("cuda", rank))
    try:
        from tests.context_parallel.cp_cases import GPU_BOUND, GPU_CASES, check_rank
        for case in GPU_CASES:
            errors = check_rank(case, world, rank, None, f"cuda:{rank}", torch.bfloat16,
                                GPU_BOUND)
            print(f"world {world} rank {rank} {case.name}: "
                  + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()), flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4], ids=lambda world: f"world{world}")
def test_context_parallel_over_nccl(world, tmp_path):
    if not torch.cuda.is_available() or torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} CUDA GPUs (found {torch.cuda.device_count()})")
    if not dist.is_nccl_available():
        pytest.skip("torch.distributed has no NCCL")
    mp.spawn(_rank_main, args=(world, str(tmp_path / "init")), nprocs=world, join=True)


if __name__ == "__main__":
    import sys
    raise SystemExit(pytest.main([__file__, "-q", "-s", *sys.argv[1:]]))
