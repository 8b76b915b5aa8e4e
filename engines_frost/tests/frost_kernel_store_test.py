"""The kernel store's keys and fwd._compiled's use of the store, without the CuTe DSL.

The key must move with every FrostFwdConfig field, the arch, each toolchain part and the
text of every kernel source a compile reads (KEYED_SOURCES must cover what fwd_v* import);
FROST_KERNEL_CACHE* select the store; _compiled serves a stored kernel without compiling,
compiles (and stores) on a miss, survives a store that cannot be written, refuses a miss
under STRICT, and loads each config once under concurrent first calls. The AOT round trip
through real objects is frost_kernel_store_aot_test.py.
"""
import ast
import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from cudnn.linear_attention.frost.kernels import fwd, kernel_store
from cudnn.linear_attention.frost.kernels.compiled_kernel import CompiledKernel
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frost_fwd_experiments as fx  # noqa: E402

CFG = FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=2, HK=2, HV=2, K=64, V=64,
                     gate_per_channel=True, beta_per_channel=False, has_w=False, use_l2norm=False,
                     has_initial_state=True, has_final_state=True, gate_align16=True)
TOOLS = {"cutlass_dsl": "4.8.1", "dsl_cuda": "13.4", "tvm_ffi": "0.1.15", "machine": "x86_64",
         "sources": "ab" * 32}
KERNELS = Path(kernel_store.__file__).resolve().parent


def _other(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return "bfloat16" if value != "bfloat16" else "float16"


def test_every_config_field_and_toolchain_part_changes_the_key():
    def key(cfg=CFG, arch="sm_90a", ffi="tvm", tools=TOOLS, host="native-x86_64-0"):
        return kernel_store.entry_key(cfg, arch, ffi, tools, host)

    base = key()
    keys = {"base": base}
    for f in dataclasses.fields(FrostFwdConfig):
        changed = dataclasses.replace(CFG)
        object.__setattr__(changed, f.name, _other(getattr(CFG, f.name)))  # key only: skip validation
        keys[f.name] = key(cfg=changed)
    keys["arch"] = key(arch="sm_100a")
    keys["ffi"] = key(ffi="cute")
    keys["host"] = key(host=kernel_store.GENERIC_X86_64)
    for part in TOOLS:
        keys[part] = key(tools={**TOOLS, part: TOOLS[part] + "x"})
    assert len(set(keys.values())) == len(keys), keys
    assert key(cfg=dataclasses.replace(CFG), tools=dict(TOOLS)) == base  # stable
    # the TVM-FFI release keys TVM-FFI kernels only
    assert key(ffi="cute", tools={**TOOLS, "tvm_ffi": "-"}) == key(ffi="cute")


def test_host_code_is_keyed_on_this_cpu_unless_built_for_a_generic_one():
    assert kernel_store.host_id(kernel_store.GENERIC_X86_64) == kernel_store.GENERIC_X86_64
    assert kernel_store.host_id().startswith("native-")
    assert kernel_store.host_id() == kernel_store.host_id(None)


def test_source_hash_follows_each_keyed_file(tmp_path):
    for name in kernel_store.KEYED_SOURCES:
        shutil.copy(KERNELS / name, tmp_path / name)
    base = kernel_store.source_hash(str(tmp_path))
    assert base == kernel_store.source_hash(str(KERNELS))
    seen = {base}
    for name in kernel_store.KEYED_SOURCES:
        path = tmp_path / name
        original = path.read_bytes()
        path.write_bytes(original + b"\n# edited\n")
        kernel_store.source_hash.cache_clear()
        seen.add(kernel_store.source_hash(str(tmp_path)))
        path.write_bytes(original)
    kernel_store.source_hash.cache_clear()
    assert len(seen) == len(kernel_store.KEYED_SOURCES) + 1


def _kernel_imports(name: str) -> set[str]:
    prefix = "cudnn.linear_attention.frost.kernels."
    tree = ast.parse((KERNELS / name).read_text())
    return {node.module[len(prefix):] + ".py" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix)}


def test_keyed_sources_cover_everything_the_kernels_import():
    # from what a compile reads: the compile entries, the launch ABI, the kernel classes
    # (bwd_compile.py imports every backward kernel class, the chain variants included)
    todo = ["compile_kernel.py", "bwd_compile.py", "launch_abi.py",
            *sorted(p.name for p in KERNELS.glob("fwd_v*.py"))]
    reached = set()
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_kernel_imports(name))
    reached.discard("kernel_store.py")  # the store's own format is FORMAT, not its text
    # the runtime wrappers may be reached only through the compile entries, never from code
    # that is traced into a kernel
    for name in reached - {"compile_kernel.py", "bwd_compile.py", *kernel_store.UNKEYED_RUNTIME}:
        assert not _kernel_imports(name) & set(kernel_store.UNKEYED_RUNTIME), name
    reached -= set(kernel_store.UNKEYED_RUNTIME)
    assert reached <= set(kernel_store.KEYED_SOURCES), reached - set(kernel_store.KEYED_SOURCES)
    assert {"fwd_mma.py", "fwd_pipelined.py", "fwd_wgmma.py", "wgmma_fragments.py", "gmem_views.py",
            "config.py", "bwd_chain.py", "bwd_chain_pipelined.py", "bwd_chain_schedule.py"} <= reached
    assert "fwd.py" not in kernel_store.KEYED_SOURCES  # launcher edits keep the store valid


def test_environment_selects_the_store(monkeypatch, tmp_path):
    for name in (kernel_store.STORE_ENV, kernel_store.WRITE_ENV, kernel_store.STRICT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_store.active_store() == kernel_store.KernelStore(
        tmp_path / "xdg" / "cudnn-pygraph" / "frost")  # on by default, per user
    for off in ("0", "off", "none", ""):
        monkeypatch.setenv(kernel_store.STORE_ENV, off)
        assert kernel_store.active_store() is None
    monkeypatch.setenv(kernel_store.STORE_ENV, str(tmp_path))
    assert kernel_store.active_store() == kernel_store.KernelStore(tmp_path, writable=True, strict=False)
    monkeypatch.setenv(kernel_store.WRITE_ENV, "0")
    monkeypatch.setenv(kernel_store.STRICT_ENV, "1")
    assert kernel_store.active_store() == kernel_store.KernelStore(tmp_path, writable=False, strict=True)
    for name in (kernel_store.WRITE_ENV, kernel_store.STRICT_ENV):  # 0 or 1, nothing else
        monkeypatch.setenv(name, "true")
        with pytest.raises(ValueError, match=name):
            kernel_store.active_store()
        monkeypatch.delenv(name)


@dataclasses.dataclass
class FakeStore:
    """Stands in for KernelStore: records calls, returns `stored` from load."""
    stored: object = None
    writable: bool = True
    strict: bool = False
    fail_save: bool = False
    root: Path = Path("/fake/store")
    loads: int = 0
    saved: list = dataclasses.field(default_factory=list)

    def load(self, cfg, arch, ffi, host_target=None):
        self.loads += 1
        return self.stored

    def compiling(self, cfg, arch, ffi):
        return contextlib.nullcontext()

    def save(self, cfg, arch, fn):
        if self.fail_save:
            raise OSError("read-only file system")
        self.saved.append((cfg, arch, fn))


@pytest.fixture
def compiles(monkeypatch):
    """fwd.compile_fwd replaced by a counter returning a fresh object per compile."""
    calls = []

    def fake_compile(cfg, arch, host_target=None, ffi=None):
        calls.append((cfg, arch))
        return object()
    monkeypatch.setattr(fwd, "compile_fwd", fake_compile)
    return calls


def _use(monkeypatch, store):
    monkeypatch.setattr(kernel_store, "active_store", lambda: store)


def test_a_stored_kernel_is_served_without_compiling(monkeypatch, compiles):
    kernel = object()
    store = FakeStore(stored=kernel)
    _use(monkeypatch, store)
    assert fwd._load_or_compile(CFG, "sm_90a", "cute") is kernel
    assert compiles == [] and store.saved == []


def test_a_miss_compiles_and_stores(monkeypatch, compiles):
    store = FakeStore()
    _use(monkeypatch, store)
    fn = fwd._load_or_compile(CFG, "sm_90a", "cute")
    assert compiles == [(CFG, "sm_90a")] and store.saved == [(CFG, "sm_90a", fn)]


def test_a_read_only_store_is_not_written(monkeypatch, compiles):
    store = FakeStore(writable=False)
    _use(monkeypatch, store)
    fwd._load_or_compile(CFG, "sm_90a", "cute")
    assert len(compiles) == 1 and store.saved == []


def test_a_store_that_cannot_be_written_warns_and_the_kernel_still_runs(monkeypatch, compiles):
    _use(monkeypatch, FakeStore(fail_save=True))
    with pytest.warns(kernel_store.KernelStoreWarning, match="could not add fwd kda .* read-only file system"):
        fn = fwd._load_or_compile(CFG, "sm_90a", "cute")
    assert fn is not None and len(compiles) == 1


def test_strict_store_refuses_a_miss(monkeypatch, compiles):
    _use(monkeypatch, FakeStore(strict=True))
    with pytest.raises(kernel_store.KernelStoreMiss,
                       match="FROST_KERNEL_CACHE_STRICT=1 .* no sm_90a cute-convention kernel for fwd kda"):
        fwd._load_or_compile(CFG, "sm_90a", "cute")
    assert compiles == []


def test_without_a_store_the_kernel_is_compiled(monkeypatch, compiles):
    _use(monkeypatch, None)
    fwd._load_or_compile(CFG, "sm_90a", "cute")
    assert compiles == [(CFG, "sm_90a")]


def test_concurrent_first_calls_load_once(monkeypatch, compiles):
    kernel = object()
    store = FakeStore(stored=kernel)
    _use(monkeypatch, store)
    arch = "sm_test_concurrent"  # a cache key no other test uses
    barrier = threading.Barrier(8)
    got = []

    def call():
        barrier.wait()
        got.append(fwd._compiled(CFG, arch))
    threads = [threading.Thread(target=call) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        fwd._cache.pop((CFG, arch, fwd.preferred_ffi()), None)
    assert got == [kernel] * 8 and store.loads == 1 and compiles == []


def test_a_long_compile_logs_one_line(monkeypatch, compiles, caplog):
    _use(monkeypatch, FakeStore())
    monkeypatch.setattr(kernel_store, "LOG_COMPILE_SECONDS", -1.0)
    with caplog.at_level("INFO", logger="cudnn.linear_attention.frost"):
        fwd._load_or_compile(CFG, "sm_90a", "cute", device="cuda:0")
    (record,) = caplog.records
    assert record.getMessage().startswith("FROST: compiled fwd kda H2/HK2/HV2 K64 V64 bfloat16")
    assert "for sm_90a (cuda:0), cute convention, in " in record.getMessage()


def test_a_kernel_precompiled_for_a_generic_host_serves_when_this_host_has_none(monkeypatch, compiles):
    generic = object()

    class Precompiled(FakeStore):
        def load(self, cfg, arch, ffi, host_target=None):
            hit = ffi == "cute" and host_target == kernel_store.GENERIC_X86_64
            return generic if hit else None
    _use(monkeypatch, Precompiled())
    assert fwd._load_or_compile(CFG, "sm_90a", "tvm") is generic and compiles == []


def test_one_process_compiles_a_kernel_while_the_others_wait(monkeypatch, tmp_path):
    """compiling() is an exclusive file lock per key: a second holder waits for the first."""
    monkeypatch.setattr(kernel_store, "toolchain", lambda: TOOLS)
    store = kernel_store.KernelStore(tmp_path)
    order = []
    inside = threading.Event()

    def second():
        inside.wait()
        with store.compiling(CFG, "sm_90a", "tvm"):
            order.append("second")
    t = threading.Thread(target=second)
    t.start()
    with store.compiling(CFG, "sm_90a", "tvm"):
        inside.set()
        t.join(timeout=0.5)
        order.append("first")
    t.join()
    assert order == ["first", "second"]


@pytest.mark.parametrize("skip", [(), ("chain",), ("rows", "gram")])
def test_a_saved_entry_loads_back_through_its_json_sidecar(monkeypatch, tmp_path, skip):
    """save() then load() with the DSL's object export/import stubbed: the sidecar's config
    (read back from JSON, where tuples become lists: the tooling's skip_stages) must match
    the requested config."""
    cfg = fx.tooling_config(CFG, skip_stages=skip)
    tools = {"cutlass_dsl": "4.8.1", "dsl_cuda": "13.4", "machine": "x86_64", "sources": "s"}
    monkeypatch.setattr(kernel_store, "toolchain", lambda: tools)
    monkeypatch.setattr(kernel_store, "_dump_object", lambda fn, prefix, ffi: b"object:" + prefix.encode())
    loaded = object()
    monkeypatch.setattr(kernel_store, "_load_object", lambda path, prefix, ffi: loaded)
    monkeypatch.setattr(kernel_store, "_signature_mismatch", lambda fn, c, ffi: None)
    store = kernel_store.KernelStore(tmp_path)
    store.save(cfg, "sm_90a", CompiledKernel(None, "tvm", cfg))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "config differs" warning fails the test
        got = store.load(cfg, "sm_90a", "tvm")
    assert (got.fn, got.ffi, got.cfg) == (loaded, "tvm", cfg)
    other = fx.experiment(CFG, skip_stages=skip + ("operands",))
    assert store.load(other, "sm_90a", "tvm") is None  # another key: no entry, no warning
    assert store.load(cfg, "sm_90a", "cute") is None  # another calling convention: another key


def test_tvm_arguments_follow_the_launch_abi():
    """CompiledKernel.args in the TVM-FFI convention: one int per ABI operand in the ABI's
    order (0 for an absent one), then T, N, scale and the raw stream, for a forward and a
    backward config (the names are looked up once per kernel, not per launch)."""
    import types

    from cudnn.linear_attention.frost.kernels.bwd_config import BWD_OPERANDS, FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import abi_operands

    fwd0 = dataclasses.replace(CFG, has_final_state=False)
    stream = types.SimpleNamespace(cuda_stream=77)
    for cfg, names in ((CFG, abi_operands(CFG)),
                       (FrostBwdConfig(fwd0, "chain", None, "float32"), BWD_OPERANDS)):
        given = {name: types.SimpleNamespace(data_ptr=lambda i=i: 4096 * (i + 1))
                 for i, name in enumerate(names) if i % 3}  # every third operand absent
        got = CompiledKernel(None, "tvm", cfg).args({**given, "not_an_operand": None}, 640, 3, 0.5, stream)
        want = [4096 * (i + 1) if i % 3 else 0 for i in range(len(names))]
        assert list(got) == [*want, 640, 3, 0.5, 77]


def test_modules_import_without_torch_or_cutlass():
    code = ("import sys; sys.modules.update(torch=None, cutlass=None); "
            "from cudnn.linear_attention.frost.kernels import fwd, kernel_store; "
            "print(kernel_store.describe(fwd.FrostFwdConfig(io_dtype='float16', state_dtype=None, H=1, HK=1, "
            "HV=1, K=64, V=64, gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=True, "
            "has_initial_state=False, has_final_state=False)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "fwd gdn H1/HK1/HV1 K64 V64 float16 None h0=0 ht=0 l2"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
