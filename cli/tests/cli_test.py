"""`python -m cudnn ...` as a user runs it: each command in a fresh interpreter on this
test's sys.path (no GPU here: the GPU commands must say so and point at the alternative)."""

import os
import subprocess
import sys

import pytest

import cudnn


def run(*args: str, frost_cache: str = "0") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               FROST_KERNEL_CACHE=frost_cache)
    return subprocess.run([sys.executable, "-m", "cudnn", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_without_a_command_it_lists_the_commands():
    result = run()
    assert result.returncode == 2
    for command in ("explain", "precompile", "bench", "env"):
        assert command in result.stdout
    assert run("--help").returncode == 0


def test_an_unknown_command_is_refused():
    result = run("frobnicate")
    assert result.returncode == 2 and "unknown command 'frobnicate'" in result.stderr


def test_explain_plans_each_op_at_the_given_shape():
    result = run("explain", "gdn", "kda_bwd", "matmul", "--seqs", "3", "--seq_len", "64",
                 "--heads", "4", "--head_dim", "64")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "== gdn ==" in out and "== kda_bwd ==" in out and "== matmul ==" in out
    assert "graph 'gdn_3x64'" in out and "gdn_frost" in out and "kda_cutile" in out
    assert out.count("plan list") == 3


def test_explain_refuses_an_unknown_op():
    result = run("explain", "conv9d")
    assert result.returncode == 1 and "unknown op(s) ['conv9d']" in result.stderr


def test_env_reports_versions_engines_and_caches():
    result = run("env")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"cudnn-pygraph {cudnn.__version__} from ")
    assert "engines (manifest):" in out and "gdn_frost" in out and "gdn_cutile" in out
    assert "cuDNN backend: " in out
    assert "FROST: off (FROST_KERNEL_CACHE='0')" in out and "cuTile: compiler " in out


@pytest.mark.parametrize("command", ["precompile", "bench"])
def test_gpu_commands_without_a_gpu_say_so(command):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    result = run(command, "gdn")
    assert result.returncode == 1 and "no CUDA device is visible" in result.stderr
    if command == "precompile":
        assert "--arch" in result.stderr


def test_precompile_derives_the_frost_kernels_of_each_call():
    pytest.importorskip("torch")
    from cudnn.cli import precompile, shapes
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig

    shape = shapes.Shape(seqs=2, seq_len=64, H=4, HV=4, K=64, V=64)
    fwd_only = precompile.frost_configs(["gdn"], shape, backward=False)
    assert len(fwd_only) == 1 and type(fwd_only[0]).__name__ == "FrostFwdConfig" and fwd_only[0].has_final_state
    both = precompile.frost_configs(["gdn", "kda"], shape, backward=True)
    stages = sorted({c.stage for c in both if isinstance(c, FrostBwdConfig)})
    # bf16 training: checkpoints too; the recompute path's states run on the forward kernel
    # (the product's: kernels/bwd.py recompute_configs), compiled without its output
    assert stages == ["chain", "grads", "values"]
    assert any(not isinstance(c, FrostBwdConfig) and c.write_checkpoints and c.write_output for c in both)
    assert any(not isinstance(c, FrostBwdConfig) and c.write_checkpoints and not c.write_output
               for c in both)
    # KDA's vector gates: the aligned and the unaligned forward config
    assert {c.gate_align16 for c in both if not isinstance(c, FrostBwdConfig)
            and c.gate_per_channel} == {True, False}


def test_precompile_refuses_an_arch_frost_has_no_kernels_for():
    pytest.importorskip("torch")
    result = run("precompile", "gdn", "--arch", "sm_80")
    assert result.returncode == 1
    assert "--arch: expected one of ['sm_90a']" in result.stderr and "got 'sm_80'" in result.stderr


def test_precompile_into_an_off_cache_is_refused():
    pytest.importorskip("torch")
    result = run("precompile", "gdn", "--arch", "sm_90a")
    assert result.returncode == 1 and "the FROST kernel cache is off" in result.stderr


def test_precompile_skips_what_the_cache_holds(monkeypatch, tmp_path):
    # Every kernel the call needs is already in the cache (its sidecar written here), so
    # the command compiles nothing and says so; the store is the one FROST_KERNEL_CACHE names.
    pytest.importorskip("torch")
    from cudnn.cli import precompile, shapes
    from cudnn.linear_attention.frost.kernels import kernel_store

    monkeypatch.setenv(kernel_store.STORE_ENV, str(tmp_path))
    store = kernel_store.active_store()
    shape = shapes.Shape(seqs=2, seq_len=64, H=4, HV=4, K=64, V=64)
    configs = precompile.frost_configs(["gdn"], shape, backward=False)
    decode = precompile.decode_configs(["gdn"], shape)
    for cfg in configs + decode:
        key = kernel_store.entry_key(cfg, "sm_90a", "cute", host=kernel_store.GENERIC_X86_64)
        store.sidecar(key).parent.mkdir(parents=True, exist_ok=True)
        store.sidecar(key).write_text("{}")
    shape_flags = ("--seqs", "2", "--seq_len", "64", "--heads", "4", "--head_dim", "64")
    result = run("precompile", "gdn", "--arch", "sm_90a", *shape_flags, frost_cache=str(tmp_path))
    assert result.returncode == 0, result.stderr
    total = len(configs) + len(decode)
    assert (f"FROST: {total} kernel configs, {total} already in {tmp_path}; "
            "compiling 0 for sm_90a") in result.stdout
    assert "done in " in result.stdout
    result = run("precompile", "gdn", "--arch", "sm_90a", *shape_flags, "--nodecode",
                 frost_cache=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"FROST: {len(configs)} kernel configs, {len(configs)} already in" in result.stdout


def test_precompile_covers_the_decode_kernels_of_serving_calls():
    """8 recurrent-kernel configs per op (K = V in {64, 128}, fp32 / bf16 pools, both V
    tiles), the shape's heads and l2norm; the shape's own K, V when it is not one of them."""
    pytest.importorskip("torch")
    from cudnn.cli import precompile, shapes

    shape = shapes.Shape(H=4, HV=8, K=128, V=128, l2norm=True)
    configs = precompile.decode_configs(["gdn", "kda", "gdn2"], shape)
    assert len(configs) == 24
    assert {(c.family, c.K, c.V, c.state_dtype, c.block_v) for c in configs} == {
        (f, d, d, s, b) for f in ("gdn", "kda", "gdn2") for d in (64, 128)
        for s in ("float32", "bfloat16") for b in (16, 32)}
    assert all(c.has_pool and c.has_initial_state and c.has_final_state and c.use_l2norm
               and (c.H, c.HV) == (4, 8) and c.io_dtype == "bfloat16" for c in configs)
    mixed = precompile.decode_configs(["kda"], shapes.Shape(K=128, V=64))
    assert {(c.K, c.V) for c in mixed} == {(64, 64), (128, 128), (128, 64)}


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
