"""tools/gpu/cutile_warm with tileiras: host-made cache entries are the ones a GPU looks up.

- a specialization compiled by the prewarm workers is then found by cuTile's real
  `ct.launch` path (stub sm_90 driver), which never reaches tileiras (and the launch
  check reports it as a would-JIT launch before it is warmed);
- relocating a kernel's source paths gives the key of the same source at that path;
- the key of one entry the H200 compiled (kept below with the hash of its kernel source
  and the tileiras version) is reproduced here.
A cuda.tile or tileiras upgrade that changes how keys are made fails these tests, instead
of leaving a prewarmed cache that silently warms nothing.  Skips without tileiras (CI).
"""
import hashlib
import importlib.util
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fresh_process import foreign_driver, own_process_fixture, rerun  # noqa: E402

torch = pytest.importorskip("torch")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REMOTE_ROOT = "/work/main"

# One entry of the H200's cache (.kit/tilecache.tar.xz, made by the lead's GPU runs).
GPU_ENTRY = dict(
    source="engines_cutile/cudnn/linear_attention/cutile/kernels/chunk_table.py",
    source_sha256="5f5b63d40f0864307239d38702e45d192f40607c652ee2e72923d76c79a84180",
    compiler="Cuda compilation tools, release 13.4, V13.4.92",
    symbol="chunk_table_kernel_Kt2_A1i32_1t1_p16_A2i32_1l0_2t1_p16_A1i32_1s1t1_p16_A1i32_1t1"
           "_p16_Si32_Si32_I64_I4_I128",
    key="4dc55321f943161f1e792e26bda64ebf0d3076204420bec60e7b767763fb3b67",
)


def _missing() -> str | None:
    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.tile") is None:
        return "cuda.tile (cuda-tile) is not installed"
    from cutile_warm.session import missing_toolchain
    return missing_toolchain()


_MISSING = _missing()
_FOREIGN = _MISSING is None and foreign_driver()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))


_own_process = own_process_fixture(_FOREIGN)


@pytest.mark.skipif(not _FOREIGN, reason="this process hosts the stub driver")
def test_in_a_fresh_process():
    rerun(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    from cutile_warm.session import open_session
    cache_dir = str(tmp_path_factory.mktemp("tilecache"))
    return open_session(REPO, cache_dir, REMOTE_ROOT), cache_dir


def _chunk_table_launch():
    """Arguments of chunk_table_fwd for 2 sequences of 5 and 65 tokens (as host tensors)."""
    cu = torch.tensor([0, 5, 70], dtype=torch.int32)
    scratch = {"cu_safe": torch.empty(3, dtype=torch.int32),
               "table": torch.empty(4, 2, dtype=torch.int32),
               "count": torch.empty(1, dtype=torch.int32),
               "offsets": torch.empty(3, dtype=torch.int32)}
    return cu, scratch


def test_prewarmed_entry_is_found_by_the_launch_path(session, monkeypatch):
    import cuda.tile as ct
    import cuda.tile._compile as compile_module

    from cutile_warm.fake_device_array import DeviceView
    from cutile_warm.launch_check import LaunchPathCheck
    from cutile_warm.recorder import LaunchRecorder
    from cutile_warm.warm import warm
    from cudnn.linear_attention.cutile.kernels.chunk_table import chunk_table_fwd
    table, cache_dir = session
    cu, scratch = _chunk_table_launch()
    with LaunchRecorder() as rec:
        chunk_table_fwd(cu, scratch, 70, 64, 0)
    [spec] = rec.specializations
    with LaunchPathCheck() as before:   # not warmed yet: the GPU would JIT this launch
        chunk_table_fwd(cu, scratch, 70, 64, 0)
    assert (before.launches, before.hits, before.misses) == (
        1, set(), {spec.symbol: "chunk_table_kernel"})
    kw = dict(repo=REPO, cache_dir=cache_dir, remote_root=REMOTE_ROOT, jobs=1)
    [first] = warm([spec.symbol], **kw)
    assert (first.status, first.error) == ("compiled", "") and first.cubin_bytes > 0
    [again] = warm([spec.symbol], **kw)
    assert again.status == "cached" and again.key == first.key

    looked_up = []
    real_lookup = compile_module.cache_lookup

    def lookup(cache, key):
        looked_up.append(key)
        return real_lookup(cache, key)

    def no_tileiras(*args, **kwargs):
        raise AssertionError("cache miss: the launch path ran tileiras")
    monkeypatch.setattr(compile_module, "cache_lookup", lookup)
    monkeypatch.setattr(compile_module, "compile_cubin", no_tileiras)
    arrays = (cu, scratch["cu_safe"], scratch["table"], scratch["count"], scratch["offsets"],
              *[scratch["count"].view(1, 1, 1)] * 5)   # no outputs to zero: placeholders
    args = tuple(DeviceView.of(t) for t in arrays)
    ct.launch(0, (1, 1, 1), table["chunk_table_kernel"],
              (*args, 2, 70, 4, 64, 4, 128, 0, 64, 1, True))
    assert looked_up == [first.key]


_PROBE = '''import cuda.tile as ct


@ct.kernel
def warm_probe_kernel(x, y, B: ct.Constant[int]):
    t = ct.load(x, (ct.bid(0),), shape=(B,))
    ct.store(y, (ct.bid(0),), tile=t * 2)
'''


def _import_probe(folder, name):
    folder.mkdir(parents=True)
    (folder / "warm_probe.py").write_text(_PROBE)
    spec = importlib.util.spec_from_file_location(name, folder / "warm_probe.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_relocated_kernel_keys_like_its_source_at_the_remote_path(session, tmp_path):
    import cuda.tile as ct

    from cutile_warm.kernel_table import cache_key, signature_of
    from cutile_warm.recorder import LaunchRecorder
    from cutile_warm.source_paths import relocate
    here = _import_probe(tmp_path / "here" / "src", "warm_probe_here")
    there = _import_probe(tmp_path / "there" / "src", "warm_probe_there")
    try:
        with LaunchRecorder() as rec:
            ct.launch(0, (4, 1, 1), here.warm_probe_kernel,
                      (torch.empty(256), torch.empty(256), 64))
        _, signature = signature_of(rec.specializations[0].symbol)
        target = cache_key(there.warm_probe_kernel, signature)
        if cache_key(here.warm_probe_kernel, signature) == target:
            pytest.skip("cuTile's key no longer depends on the source path")
        relocate("warm_probe_here", str(tmp_path / "here"), str(tmp_path / "there"))
        assert cache_key(here.warm_probe_kernel, signature) == target
    finally:
        del sys.modules["warm_probe_here"], sys.modules["warm_probe_there"]


def _tileiras_version() -> str:
    from cudnn.linear_attention.cutile.kernel_cache import tileiras_path
    return subprocess.run([tileiras_path(), "--version"], capture_output=True,
                          text=True, check=True).stdout


def test_key_of_an_entry_the_gpu_compiled_is_reproduced(session):
    from cutile_warm.kernel_table import cache_key, signature_of
    table, _ = session
    with open(os.path.join(REPO, GPU_ENTRY["source"]), "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != GPU_ENTRY["source_sha256"]:
            pytest.skip(f"{GPU_ENTRY['source']} changed since the GPU entry was recorded: "
                        "refresh GPU_ENTRY from the next GPU cache")
    if GPU_ENTRY["compiler"] not in _tileiras_version():
        pytest.skip(f"tileiras here is not {GPU_ENTRY['compiler']}")
    name, signature = signature_of(GPU_ENTRY["symbol"])
    assert cache_key(table[name], signature) == GPU_ENTRY["key"]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
