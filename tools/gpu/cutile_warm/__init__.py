"""Filling cuTile's on-disk kernel cache on a GPU-less host (tools/gpu/cutile_prewarm.py).

Modules: driver_stub (a CUDA driver stand-in), fake_device_array (DLPack views of host
tensors as CUDA memory), recorder (specializations from cuTile's launch path),
suite_cases (the GPU suites' launches), source_paths (GPU-side source paths),
kernel_table (kernels, cache keys, compiles), cache_db (the cache's sqlite file),
session (one process set up like the GPU), warm (parallel compiles), launch_check
(replays launches against a cache and counts those that would JIT).
"""
