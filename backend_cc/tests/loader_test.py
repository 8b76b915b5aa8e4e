"""Tests of cudnn.backend.loader: lazy import, clear reasons, never breaking `import cudnn`."""

import os
import subprocess
import sys
import textwrap
import types

import pytest

from cudnn.backend import loader


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (the extension's loader state is per process)."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_importing_the_loader_loads_nothing():
    out = run_python("""
        import sys
        import cudnn
        from cudnn.backend import loader
        print('cudnn._pybind_module' in sys.modules)
    """)
    assert out.strip() == "False"


def test_missing_extension_gives_a_reason_and_keeps_cudnn_importable():
    probe = loader.BackendLoader(module_name="cudnn._no_such_extension")
    assert probe.extension() is None
    assert not probe.is_available()
    reason = probe.unavailable_reason()
    assert "cudnn._no_such_extension cannot be imported" in reason
    with pytest.raises(loader.BackendUnavailableError, match="cannot be imported"):
        probe.load()
    assert probe.cudnn_version() is None
    import cudnn  # noqa: F401  (still importable)


def test_stale_extension_is_refused(monkeypatch):
    fake = types.ModuleType("fake_stale_extension")
    fake.BINDING_API_VERSION = loader.EXPECTED_BINDING_API_VERSION + 41
    monkeypatch.setitem(sys.modules, "fake_stale_extension", fake)
    probe = loader.BackendLoader(module_name="fake_stale_extension")
    assert probe.extension() is None
    assert f"BINDING_API_VERSION={fake.BINDING_API_VERSION}" in probe.unavailable_reason()
    assert "rebuild" in probe.unavailable_reason()


def test_candidates_put_the_explicit_path_first_and_the_soname_last(monkeypatch):
    monkeypatch.setenv("CUDNN_LIBRARY_PATH", "/opt/custom/libcudnn.so.9")
    candidates = loader.library_candidates()
    assert candidates[0] == "/opt/custom/libcudnn.so.9"
    assert candidates[-1] == "libcudnn.so.9"
    for path in candidates[1:-1]:
        assert os.path.isfile(path) and path.endswith("lib/libcudnn.so.9")


def require_extension():
    if loader.extension() is None:
        pytest.fail("needs the built extension: " + loader.unavailable_reason())


def test_no_reachable_libcudnn_reports_every_candidate():
    require_extension()
    out = run_python("""
        from cudnn.backend import loader
        probe = loader.BackendLoader(candidates=lambda: ['/nonexistent/dir/libcudnn.so.9'])
        print(probe.is_available())
        print(probe.unavailable_reason())
        print(probe.cudnn_version())
    """)
    available, reason, version = out.strip().splitlines()
    assert available == "False"
    assert "no usable cuDNN 9 library found" in reason and "/nonexistent/dir/libcudnn.so.9" in reason
    assert version == "None"


def test_a_library_without_cudnn_symbols_is_rejected_by_name():
    require_extension()
    not_cudnn = loader.extension().__file__  # a shared object, but not cuDNN
    out = run_python(f"""
        from cudnn.backend import loader
        probe = loader.BackendLoader(candidates=lambda: [{not_cudnn!r}])
        print(probe.unavailable_reason())
    """)
    assert "missing symbol cudnnGetVersion" in out


def test_without_cudnn_the_graph_records_but_cannot_build():
    require_extension()
    out = run_python("""
        from cudnn.backend import loader
        probe = loader.BackendLoader(candidates=lambda: ['/nonexistent/libcudnn.so.9'])
        ext = probe.extension()
        if probe.is_available() or ext.is_available():
            print('SKIP a libcudnn is reachable through the system loader')
        else:
            g = ext.backend_graph(io_data_type=3)
            a = g.tensor(uid=1, dim=[1, 4, 4])
            g.matmul(a, a).set_uid(2)
            g.validate()
            try:
                g.build_operation_graph()
            except ext.CudnnUnavailableError as err:
                print('RuntimeError' if isinstance(err, RuntimeError) else 'other', err)
    """)
    if out.startswith("SKIP"):
        pytest.skip(out[5:].strip())
    assert out.startswith("RuntimeError cuDNN is not available:")


def test_available_library_reports_its_version():
    if not loader.is_available():
        pytest.skip("no libcudnn here: " + loader.unavailable_reason())
    assert loader.unavailable_reason() == ""
    version = loader.cudnn_version()
    assert 90000 <= version < 100000
    assert loader.load().library_path()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
