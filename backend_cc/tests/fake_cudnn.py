"""A stand-in for the GPU side of the extension (test-only), and a BackendAccess using it.

`FakeExtension(script)` looks like `cudnn._pybind_module` to the lowering and the adapter:
its `backend_graph(...)` is a `FakeBackendGraph` that records into a *real* backend_graph
(the C++ recording layer and its validation; descriptors are finalized by real libcudnn
when one loads, which needs no GPU) and answers everything that needs a GPU from a
`CudnnScript`: the engine configs each heuristic mode proposes, which engines decline to
build, workspace sizes (plus the real graph's workspace-resident tensors), the device
description. Every such call is logged in `FakeBackendGraph.calls`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cudnn
from cudnn.backend import loader

REAL = loader.extension()
if REAL is None:
    raise ImportError("fake_cudnn needs the built extension: " + loader.unavailable_reason())

HEUR_NAMES = {int(m): m.name for m in cudnn.heur_mode}


@dataclass
class CudnnScript:
    #: heur_mode value -> [(engine_id, {cuDNN knob: value}), ...] it proposes
    proposals: dict[int, list[tuple[int, dict[int, int]]]] = field(default_factory=dict)
    #: heur_mode values cuDNN answers NOT_SUPPORTED
    declining_modes: set[int] = field(default_factory=set)
    #: engine ids whose plans do not build (NOT_SUPPORTED at finalize)
    unbuildable: set[int] = field(default_factory=set)
    workspace: dict[int, int] = field(default_factory=dict)
    notes: dict[int, list[int]] = field(default_factory=dict)
    #: cuDNN's device JSON for any handle (None: the device cannot be asked, as without a GPU)
    device_json: str | None = None


class FakeBackendGraph:
    def __init__(self, script: CudnnScript, log: list[FakeBackendGraph], **kwargs: Any) -> None:
        self.real = REAL.backend_graph(**kwargs)
        self.kwargs = kwargs
        self.script = script
        self.plans: list[tuple[int, dict[int, int]]] = []
        self.built: set[int] = set()
        self.calls: list[tuple[str, Any]] = []
        log.append(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)  # recording methods: tensor, ops, validate, ...

    def build_operation_graph(self) -> None:
        self.calls.append(("build_operation_graph", None))
        if loader.is_available():
            self.real.finalize_op_descriptors()  # cuDNN checks every descriptor, no GPU needed
        else:
            self.real.validate()

    def create_execution_plans(self, modes: list[int]) -> list[int]:
        self.calls.append(("create_execution_plans", list(modes)))
        created = []
        for mode in modes:
            if mode in self.script.declining_modes:
                if len(modes) == 1:
                    raise cudnn.cudnnGraphNotSupportedError(
                        f"heur_mode {HEUR_NAMES[mode]}: CUDNN_STATUS_NOT_SUPPORTED")
                continue
            for engine_id, knobs in self.script.proposals.get(mode, []):
                self.plans.append((engine_id, dict(knobs)))
                created.append(len(self.plans) - 1)
        return created

    def create_execution_plan(self, engine_id: int, knobs: dict[int, int]) -> int:
        self.calls.append(("create_execution_plan", (engine_id, dict(knobs))))
        self.plans.append((engine_id, dict(knobs)))
        return len(self.plans) - 1

    def get_execution_plan_count(self) -> int:
        return len(self.plans)

    def get_engine_and_knobs_at_index(self, index: int) -> tuple[int, dict[int, int]]:
        engine_id, knobs = self.plans[index]
        return engine_id, dict(knobs)

    def get_plan_name_at_index(self, index: int) -> str:
        engine_id, knobs = self.plans[index]
        return f"eng{engine_id}" + "".join(f"_k{k}={v}" for k, v in sorted(knobs.items()))

    def get_behavior_notes_for_plan_at_index(self, index: int) -> list[int]:
        return list(self.script.notes.get(self.plans[index][0], []))

    def build_plan_at_index(self, index: int) -> None:
        self.calls.append(("build_plan_at_index", index))
        self._finalize(index)

    def check_support_at_index(self, index: int) -> None:
        self.calls.append(("check_support_at_index", index))
        self._finalize(index)

    def _finalize(self, index: int) -> None:
        engine_id = self.plans[index][0]
        if engine_id in self.script.unbuildable:
            raise cudnn.cudnnGraphNotSupportedError(
                f"plan {index} (eng{engine_id}): CUDNN_STATUS_NOT_SUPPORTED")
        self.built.add(index)

    def get_workspace_size_plan_at_index(self, index: int) -> int:
        assert index in self.built, f"workspace size of plan {index} asked before it was built"
        # like the real graph: its workspace-resident tensors come before cuDNN's part
        return self.real.workspace_tensor_bytes() + self.script.workspace.get(
            self.plans[index][0], 0)

    def execute_plan_at_index(self, pack: dict[int, int], workspace: int, index: int,
                              handle: Any) -> None:
        assert index in self.built, f"plan {index} executed before it was built"
        scratch = {t["uid"] for t in self.real.workspace_tensors()} & set(pack)
        assert not scratch, f"workspace-resident uids {sorted(scratch)} given buffers"
        self.calls.append(("execute_plan_at_index", (dict(pack), workspace, index, handle)))


class FakeExtension:
    """Module-like: what the lowering and the adapter use of cudnn._pybind_module."""

    def __init__(self, script: CudnnScript | None = None) -> None:
        self.script = script or CudnnScript()
        self.graphs: list[FakeBackendGraph] = []

    def backend_graph(self, **kwargs: Any) -> FakeBackendGraph:
        return FakeBackendGraph(self.script, self.graphs, **kwargs)

    def op_schemas(self) -> list[dict[str, Any]]:
        return REAL.op_schemas()

    def cudnn_version(self) -> int | None:
        return REAL.cudnn_version()

    def device_properties_json(self, handle: int) -> str:
        if self.script.device_json is None:
            raise RuntimeError("fake cuDNN: no GPU to describe")
        return self.script.device_json

    def backend_knob_types(self) -> dict[str, int]:
        return REAL.backend_knob_types()


class FakeAccess:
    """BackendAccess over a FakeExtension; no handles (the fake never needs one)."""

    def __init__(self, ext: FakeExtension | None = None, unavailable: str | None = None,
                 handle: int | None = None) -> None:
        self.ext = ext or FakeExtension()
        self.unavailable = unavailable
        self.handle = handle
        self.extension_calls = 0

    def unavailable_reason(self) -> str | None:
        return self.unavailable

    def extension(self) -> FakeExtension:
        self.extension_calls += 1
        return self.ext

    def handle_for(self, graph: Any) -> int | None:
        return self.handle


ADAPTER_MODULE = "fake_cudnn_backend_adapter_module"


def install_adapter(monkeypatch: Any, adapter: Any) -> Any:
    """Point the router's backend seam at `adapter` for one test."""
    import sys
    import types

    from cudnn.engines import backend_source

    module = types.ModuleType(ADAPTER_MODULE)
    module.CudnnBackendAdapter = lambda: adapter
    monkeypatch.setitem(sys.modules, ADAPTER_MODULE, module)
    monkeypatch.setattr(backend_source, "ADAPTER_MODULE", ADAPTER_MODULE)
    backend_source.reset_backend_adapter()  # the slot re-imports once the patch is undone
    return adapter
