"""The cuTile engines find their compiler inside the Python environment, report cuda.tile's
kernel cache, and log a slow first run (engines_cutile/.../kernel_cache.py).

The compiler lookups run in a fresh interpreter whose sys.path starts with a temporary
"site" holding fake toolchain wheels (dist-info folders and an executable
nvidia/cu13/bin/tileiras), with PATH and CUDA_HOME chosen per case, so what the machine
has installed cannot answer for the code under test.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import types

import pytest

from cudnn.linear_attention.cutile import kernel_cache

TOOLCHAIN = kernel_cache.TOOLCHAIN_WHEELS


def _fake_wheels(site, versions: dict[str, str]) -> str:
    """Installs fake toolchain wheels into `site`; returns the path of their tileiras."""
    for dist, version in versions.items():
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return _executable(site / "nvidia" / "cu13" / "bin")


def _executable(folder) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "tileiras"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    return str(tool)


def _lookup(site, path: str, cuda_home: str | None = None) -> str:
    """tileiras_path() in a fresh interpreter with `site` first on sys.path."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(site)] + [p for p in sys.path if p])
    env["PATH"] = path
    if cuda_home:
        env["CUDA_HOME"] = cuda_home
    probe = ("from cudnn.linear_attention.cutile.kernel_cache import tileiras_path; "
             "print(tileiras_path())")
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def _standard_toolkit_has_tileiras() -> bool:
    return any(os.access(os.path.join(f, "bin", "tileiras"), os.X_OK)
               for f in kernel_cache._toolkit_folders())


@pytest.fixture
def nothing_on_the_machine():
    if _standard_toolkit_has_tileiras():
        pytest.skip("a CUDA toolkit under /usr/local has tileiras: the fallback would answer")
    if kernel_cache._wheel_tileiras() is not None:
        pytest.skip("this environment has the toolchain wheels: they would complete the fakes")


def test_the_compiler_from_the_toolchain_wheels_is_found_without_path(tmp_path):
    site = tmp_path / "site"
    tool = _fake_wheels(site, {d: "13.4.92" for d in TOOLCHAIN})
    assert _lookup(site, path=str(tmp_path / "empty")) == tool


def test_the_wheels_win_over_path(tmp_path):
    site = tmp_path / "site"
    tool = _fake_wheels(site, {d: "13.4.92" for d in TOOLCHAIN})
    on_path = _executable(tmp_path / "toolkit" / "bin")
    assert _lookup(site, path=os.path.dirname(on_path)) == tool


def test_wheels_of_two_releases_are_passed_over_for_path(tmp_path):
    # cuda.tile uses the wheels only when all three are of one CUDA release
    site = tmp_path / "site"
    _fake_wheels(site, dict(zip(TOOLCHAIN, ("13.4.92", "13.4.80", "13.3.1"))))
    on_path = _executable(tmp_path / "toolkit" / "bin")
    assert _lookup(site, path=os.path.dirname(on_path)) == on_path


def test_a_missing_toolchain_wheel_falls_back_to_cuda_home(tmp_path, nothing_on_the_machine):
    site = tmp_path / "site"
    _fake_wheels(site, {d: "13.4.92" for d in TOOLCHAIN[:2]})
    home_tool = _executable(tmp_path / "cuda" / "bin")
    found = _lookup(site, path=str(tmp_path / "empty"), cuda_home=str(tmp_path / "cuda"))
    assert found == home_tool


def test_no_compiler_anywhere_is_none(tmp_path, nothing_on_the_machine):
    assert _lookup(tmp_path / "site", path=str(tmp_path / "empty")) == "None"


def test_standard_toolkit_folders_newest_release_first(tmp_path):
    for name in ("cuda-12.8", "cuda-13.1", "cuda-13", "cuda-13.10", "cuda-x", "other"):
        (tmp_path / name).mkdir()
    folders = [os.path.basename(f) for f in kernel_cache._toolkit_folders(str(tmp_path))]
    assert folders == ["cuda", "cuda-13.10", "cuda-13.1", "cuda-13", "cuda-12.8"]


@pytest.mark.skipif(importlib.util.find_spec("cuda") is None
                    or importlib.util.find_spec("cuda.tile") is None,
                    reason="cuda-tile is not installed")
def test_cuda_tile_finds_the_same_compiler(tmp_path):
    # The gate must agree with the compiler cuda.tile itself will run. Its lookup is
    # private; where this release has no such function, there is nothing to compare.
    site = tmp_path / "site"
    tool = _fake_wheels(site, {d: "13.4.92" for d in TOOLCHAIN})
    env = dict(os.environ, PATH=str(tmp_path / "empty"),
               PYTHONPATH=os.pathsep.join([str(site)] + [p for p in sys.path if p]))
    probe = ("import cuda.tile._compile as c; f = getattr(c, '_find_pip_tileiras', None); "
             "print(f() if f else 'absent')")
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                            text=True, timeout=120)
    if result.returncode != 0 or result.stdout.strip() == "absent":
        pytest.skip(f"cuda.tile's compiler lookup is not reachable here: {result.stderr[-300:]}")
    assert result.stdout.strip() == tool


def test_cache_dir_follows_cuda_tile_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_TILE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_dir() == str(tmp_path / "xdg" / "cutile-python")
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", str(tmp_path / "tiles"))
    assert kernel_cache.cache_dir() == str(tmp_path / "tiles")
    for off in ("0", "off", "None", ""):
        monkeypatch.setenv("CUDA_TILE_CACHE_DIR", off)
        assert kernel_cache.cache_dir() is None, off


def test_describe_cache_counts_what_cuda_tile_stored(monkeypatch, tmp_path):
    store = pytest.importorskip("cutile_cache._cache").cache_store
    folder = tmp_path / "tiles"
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", str(folder))
    assert describe_tail() == f"kernel cache {folder} (empty)"
    store(str(folder), "k1", b"\0" * 3 * 2**20)
    store(str(folder), "k2", b"\0" * 2**19)
    assert describe_tail() == f"kernel cache {folder} (2 kernels, 3.5 MiB)"
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", "0")
    assert describe_tail() == "kernel cache off (CUDA_TILE_CACHE_DIR)"


def test_describe_cache_reports_a_database_it_cannot_read(monkeypatch, tmp_path):
    folder = tmp_path / "tiles"
    folder.mkdir()
    (folder / "cache.db").write_bytes(b"not a database" * 100)
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", str(folder))
    assert "unreadable (" in describe_tail()


def describe_tail() -> str:
    line = kernel_cache.describe_cache()
    assert line.startswith("compiler "), line
    return line.split("; ", 1)[1]


class _Plan:
    pass


def test_a_slow_first_run_logs_one_line(monkeypatch, caplog):
    clock = iter([10.0, 12.5, 20.0, 30.0])
    monkeypatch.setattr(kernel_cache, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", "0")
    plan = _Plan()
    with caplog.at_level(logging.INFO, logger="cudnn.linear_attention.cutile"):
        with kernel_cache.first_run(plan, "gdn forward (T=64)", "cuda:0"):
            pass
        with kernel_cache.first_run(plan, "gdn forward (T=64)", "cuda:0"):  # not timed again
            pass
    (record,) = caplog.records
    assert record.getMessage() == ("cuTile: first run of gdn forward (T=64) on cuda:0 took "
                                   "2.5 s (kernels compiled, or loaded from nowhere: cache off)")


def test_a_quick_first_run_logs_nothing(monkeypatch, caplog):
    clock = iter([10.0, 10.5])
    monkeypatch.setattr(kernel_cache, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    with caplog.at_level(logging.INFO, logger="cudnn.linear_attention.cutile"):
        with kernel_cache.first_run(_Plan(), "kda backward", "cuda:0"):
            pass
    assert caplog.records == []


def test_a_failed_first_run_is_timed_again_next_time(monkeypatch, caplog):
    plan = _Plan()
    with pytest.raises(RuntimeError):
        with kernel_cache.first_run(plan, "kda forward", "cuda:0"):
            raise RuntimeError("launch failed")
    assert not getattr(plan, "_cutile_ran", False)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
