"""tools/gpu/cutile_warm without tileiras: device views, the launch recorder, the suites'
cases, source relocation and the cache database (CI runs these; the key and compile
checks are in tile_cache_key_test.py).

The recorder derives specializations through cuTile's real `ct.launch` on a stub sm_90
driver, so these tests check that what it records is what a GPU launch would derive:
DLPack device views must specialize exactly like `__cuda_array_interface__` arrays of
the same layout, and replaying host code must record each distinct launch once without
compiling anything.
"""
import importlib.util
import inspect
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fresh_process import foreign_driver, own_process_fixture, rerun  # noqa: E402

torch = pytest.importorskip("torch")


def _missing() -> str | None:
    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.tile") is None:
        return "cuda.tile (cuda-tile) is not installed"
    from cutile_warm.driver_stub import missing_c_compiler
    return missing_c_compiler()


_MISSING = _missing()
_FOREIGN = _MISSING is None and foreign_driver()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))


_own_process = own_process_fixture(_FOREIGN)
if _MISSING is None and not _FOREIGN:
    from cutile_warm.driver_stub import load_stub_driver
    load_stub_driver()
    import cuda.tile as ct  # noqa: E402

    from cutile_warm.fake_device_array import DeviceView  # noqa: E402
    from cutile_warm.recorder import LaunchRecorder  # noqa: E402
    from cutile_warm.suite_cases import LaCase, drive  # noqa: E402

_TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.int32: "<i4"}


@pytest.mark.skipif(not _FOREIGN, reason="this process hosts the stub driver")
def test_in_a_fresh_process():
    rerun(os.path.abspath(__file__))


class _ArrayInterface:
    """The same tensor described through __cuda_array_interface__ (strides in bytes)."""

    def __init__(self, t):
        self.__cuda_array_interface__ = dict(
            shape=tuple(t.shape), typestr=_TYPESTR[t.dtype], data=(t.data_ptr(), False),
            strides=tuple(s * t.element_size() for s in t.stride()), version=3)


def _symbol(kernel, arrays, constants):
    with LaunchRecorder() as rec:
        ct.launch(0, (1, 1, 1), kernel, (*arrays, *constants))
    [spec] = rec.specializations
    return spec.symbol


def _layouts():
    base = torch.empty(64, 4, 128)
    flat = torch.empty(64 * 4 * 128 + 1)
    return {"contiguous": base, "odd_rows": base[:63], "strided": base[..., ::2],
            "unit_dim": base[:, :1], "misaligned": flat[1:].view(64, 4, 128),
            "odd_row_stride": torch.empty(64, 4, 129)[..., :128]}


def test_device_views_specialize_like_the_array_interface():
    from cudnn.linear_attention.cutile.kernels.head_group_sum import head_group_sum_kernel
    out = torch.empty(64, 2, 128)
    symbols = {}
    for name, t in _layouts().items():
        via_dlpack = _symbol(head_group_sum_kernel, (DeviceView.of(t), DeviceView.of(out)),
                             (2, 64, 128))
        via_cai = _symbol(head_group_sum_kernel, (_ArrayInterface(t), _ArrayInterface(out)),
                          (2, 64, 128))
        assert via_dlpack == via_cai, name
        symbols[name] = via_dlpack
    # the layouts differ in facts cuTile specializes on, so the symbols differ too
    assert len(set(symbols.values())) == len(symbols), symbols


def test_bfloat16_views_specialize_like_their_float16_bits():
    from cudnn.linear_attention.cutile.kernels.head_group_sum import head_group_sum_kernel
    part, out = torch.empty(100, 4, 64), torch.empty(100, 2, 64, dtype=torch.bfloat16)[:, :1]
    bf16 = _symbol(head_group_sum_kernel, (DeviceView.of(part), DeviceView.of(out)), (2, 64, 64))
    f16 = _symbol(head_group_sum_kernel, (_ArrayInterface(part),
                                          _ArrayInterface(out.view(torch.float16))), (2, 64, 64))
    assert "bf16" in bf16 and bf16.replace("bf16", "f16") == f16


def test_device_view_names_unsupported_dtypes():
    with pytest.raises(TypeError, match="complex64"):
        DeviceView.of(torch.empty(3, dtype=torch.complex64))


def test_recorder_keeps_each_distinct_launch_once_and_compiles_nothing(monkeypatch):
    import cuda.tile._compile as compile_module

    def no_compile(*args, **kwargs):
        raise AssertionError("the recorder reached cuTile's compiler")
    monkeypatch.setattr(compile_module, "compile_tile", no_compile)
    launch, compile_method = ct.launch, ct.kernel._compile
    gdn = LaCase("t", False, (1, 63, 65), 2, 2, 64, 64)
    kda = LaCase("t", True, (100, 37), 2, 4, 64, 128, h0=True)
    with LaunchRecorder() as rec:
        drive(gdn)
        drive(gdn)
    assert rec.launches == 6   # the cu_seqlens safety rides in the chunk-table launch
    assert [s.kernel for s in rec.specializations] == [
        "chunk_table_kernel", "la_wy_fwd_kernel", "la_chunk_fwd_kernel"]
    assert {s.sm for s in rec.specializations} == {(9, 0)}
    with LaunchRecorder() as rec:
        drive(kda)
    wy = [s for s in rec.specializations if s.kernel == "la_wy_fwd_kernel"]
    assert rec.launches == 4 and len(wy) == 2   # KDA's two gate tiers
    assert ct.launch is launch and ct.kernel._compile is compile_method


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_slice_tma_builds_are_distinct_cache_entries(backward):
    """CUDNN_CUTILE_SLICE_TMA=0 (the memcheck build) and the default are different
    specializations (the SLICE_TMA constant is in the mangled symbol, so in the cache key):
    a cache warmed for one never serves the other, and the prewarm lists both."""
    def symbols(tma):
        case = LaCase("t", False, (1, 63, 65), 2, 2, 64, 64, forward=not backward,
                      backward=backward, slice_tma=tma)
        with LaunchRecorder() as rec:
            drive(case)
        return {s.kernel: s.symbol for s in rec.specializations}
    on, off = symbols(True), symbols(False)
    assert set(on) == set(off)
    same = {k for k in on if on[k] == off[k]}
    assert same == {"chunk_table_kernel"}, same   # the only launch without sequence slices


def test_recorded_symbols_round_trip_to_their_signatures():
    from cuda.tile.compilation._name_mangling import demangle_kernel_name
    with LaunchRecorder() as rec:
        drive(LaCase("t", True, (200,), 4, 4, 128, 128, io="float16", backward=True))
    assert {s.kernel for s in rec.specializations} >= {"la_bwd_dqkwg_kernel",
                                                       "la_bwd_wy_kernel"}
    for spec in rec.specializations:
        name, signature = demangle_kernel_name(spec.symbol)
        assert name == spec.kernel
        assert signature.with_mangled_symbol(name).symbol == spec.symbol


def _suite_tables_reason() -> str | None:
    try:
        import tests.numerics.la_cutile_smoke  # noqa: F401
        import tests.numerics.test_la_cutile_engines  # noqa: F401
        import tests.torch_ops.ops_gpu_test  # noqa: F401
    except ImportError as e:
        return f"the GPU suites' case tables are not importable here ({e})"
    return None


def test_every_gpu_suite_replays_on_cpu():
    if (why := _suite_tables_reason()) is not None:
        pytest.skip(why)
    from tests.numerics.test_la_cutile_engines import SHAPES

    from cutile_warm.kernel_table import kernels
    from cutile_warm.suite_cases import DEFAULT_SUITES, cases_of, engine_matrix
    assert len(engine_matrix()) == len(SHAPES) * 8
    all_kernels = set(kernels())
    for suite in DEFAULT_SUITES:
        with LaunchRecorder() as rec:
            for case in cases_of([suite]):
                drive(case)
        names = {s.kernel for s in rec.specializations}
        assert names <= all_kernels and "la_wy_fwd_kernel" in names, (suite, names)
        if suite == "cutile":   # forward, backward, grouped heads: every kernel
            assert names == all_kernels, all_kernels - names


def test_unknown_suite_is_named():
    from cutile_warm.suite_cases import cases_of
    with pytest.raises(ValueError, match="nightly"):
        cases_of(["nightly"])


def test_relocation_moves_file_names_and_keeps_the_source(tmp_path):
    from cutile_warm.source_paths import relocate
    local = tmp_path / "tree" / "pkg_dir"
    local.mkdir(parents=True)
    text = "def helper(x):\n    return x + 1\n\n\ndef outer(y):\n    return helper(y) * 2\n"
    (local / "warm_probe_relocated.py").write_text(text)
    spec = importlib.util.spec_from_file_location("warm_probe_relocated",
                                                  local / "warm_probe_relocated.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["warm_probe_relocated"] = module
    try:
        spec.loader.exec_module(module)
        moved = relocate("warm_probe_relocated", str(tmp_path / "tree"), "/remote/root")
        remote = "/remote/root/pkg_dir/warm_probe_relocated.py"
        assert moved == {str(local / "warm_probe_relocated.py"): remote}
        assert inspect.getfile(module.outer) == remote == module.helper.__code__.co_filename
        assert inspect.getsource(module.outer) == text.split("\n\n\n")[1]
        assert module.outer(1) == 4
    finally:
        del sys.modules["warm_probe_relocated"]


def test_cache_database_lists_symbols_and_prunes(tmp_path):
    from cutile_cache._cache import MetadataV1, cache_store

    from cutile_warm.cache_db import entries, keys, prune
    for i in range(3):
        meta = MetadataV1(kernel_names=[f"k{i}_Kt1_I{i}"], compiler_version="v",
                          compilation_timestamp=1.0, compilation_time_seconds=0.5 * i)
        cache_store(str(tmp_path), f"{i:064x}", bytes(10 + i), meta.to_dict())
    listed = {e.key: e for e in entries(str(tmp_path))}
    assert {e.symbols for e in listed.values()} == {("k0_Kt1_I0",), ("k1_Kt1_I1",),
                                                     ("k2_Kt1_I2",)}
    assert listed[f"{2:064x}"].size == 12
    assert prune(str(tmp_path), {f"{1:064x}"}) == 2
    assert keys(str(tmp_path / "cache.db")) == {f"{1:064x}"}
    assert entries(str(tmp_path / "absent")) == []


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
