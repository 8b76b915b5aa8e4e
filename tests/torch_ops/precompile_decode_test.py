"""`python -m cudnn precompile` and the decode kernels of serving calls: every recurrent
kernel config a serving call launches (through the public op and the FROST decode engine,
decode_on_cpu.py) is one that precompile lists; and a kernel precompiled without a GPU
(the DSL's convention, host code for any x86-64 CPU) is what the decode launcher then
loads instead of compiling. One kernel is cross-compiled here (about a second)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.torch_ops.decode_on_cpu import decode_engine_on_cpu, serve, serving_step


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_serving_calls_launch_only_precompiled_configs(family):
    from cudnn.cli import precompile, shapes

    heads = 2
    listed = set(precompile.decode_configs([family], shapes.Shape(H=heads, HV=heads, l2norm=True)))
    with torch.no_grad(), decode_engine_on_cpu() as counts:
        for dim in (64, 128):
            for state in (torch.float32, torch.bfloat16):
                for n in (1, 70):  # 16 and 32 value rows per CTA (decode.choose_block_v)
                    pool = torch.zeros(n + 2, heads, dim, dim, dtype=state)
                    slots = torch.arange(n, dtype=torch.int32)
                    serve(family, serving_step(family, 0, n=n, heads=heads, dim=dim), pool, slots)
    launched = set(counts.configs)
    assert len(launched) == 8 and {c.block_v for c in launched} == {16, 32}
    assert launched <= listed, launched - listed


def test_a_precompiled_decode_kernel_is_loaded_not_compiled(tmp_path, monkeypatch):
    pytest.importorskip("cutlass")
    from cudnn.cli import precompile, shapes
    from cudnn.linear_attention.frost.kernels import decode, frost_configs, kernel_store

    monkeypatch.setenv(kernel_store.STORE_ENV, str(tmp_path))
    cfg = precompile.decode_configs(["gdn"], shapes.Shape(H=2, HV=2, K=64, V=64))[0]
    frost_configs.compile_into_cache(cfg, "sm_90a")  # as `precompile --arch sm_90a` does

    def no_compile(*args, **kw):
        raise AssertionError("the decode launcher compiled a precompiled kernel")
    monkeypatch.setattr(decode, "compile_decode", no_compile)
    monkeypatch.setenv(kernel_store.STRICT_ENV, "1")
    kernel = decode._load_or_compile(cfg, "sm_90a", "tvm")
    assert kernel.ffi == "cute" and kernel.cfg == cfg
    with pytest.raises(kernel_store.KernelStoreMiss):  # another config is not in the cache
        decode._load_or_compile(dataclasses.replace(cfg, block_v=32), "sm_90a", "tvm")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
