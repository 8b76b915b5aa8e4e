"""A stand-in for `cudnn.backend.adapter` that records every call (test-only).

`install_fake_backend(monkeypatch, adapter)` points the router's backend seam at an
in-memory module holding `adapter`, so tests can prove what the router asks the backend
and when: a python-routed graph must never reach it on the execute path.
"""
from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from typing import Any

from cudnn.engines import backend_source
from cudnn.engines.base import CompiledPlan, ExecutionContext, PlanConfig
from cudnn.ops.errors import cudnnGraphNotSupportedError

MODULE = "fake_cudnn_backend_adapter"


class FakeBackendAdapter:
    name = "fake_backend"

    def __init__(self, engine_ids: tuple[int, ...] = (7, 3), unavailable: str | None = None,
                 decline: str | None = None, workspace: int = 0) -> None:
        self.engine_ids = engine_ids
        self.unavailable = unavailable
        self.decline = decline
        self.workspace = workspace
        self.calls: list[tuple[str, Any]] = []

    def unavailable_reason(self) -> str | None:
        return self.unavailable

    def backend_plan_entries(self, graph: Any, heuristics: Any) -> list[PlanConfig]:
        self.calls.append(("entries", tuple(heuristics)))
        if self.decline is not None:
            raise cudnnGraphNotSupportedError(self.decline)
        return [PlanConfig(eid, {"SPLIT_K": i}, cpp_index=i)
                for i, eid in enumerate(self.engine_ids)]

    def plan_name(self, graph: Any, plan: PlanConfig) -> str:
        return f"eng{plan.engine_id}"

    def check_support(self, graph: Any, plan: PlanConfig) -> None:
        self.calls.append(("check_support", plan.cpp_index))

    def build_plan(self, graph: Any, plan: PlanConfig, ctx: ExecutionContext) -> CompiledPlan:
        self.calls.append(("build", plan.cpp_index))
        return _FakeCompiled(self, plan)


class _FakeCompiled(CompiledPlan):
    def __init__(self, adapter: FakeBackendAdapter, plan: PlanConfig) -> None:
        self.adapter = adapter
        self.plan = plan

    def get_workspace_size(self) -> int:
        return self.adapter.workspace

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        self.adapter.calls.append(("execute", (self.plan.cpp_index, sorted(data))))


def install_fake_backend(monkeypatch: Any, adapter: Any) -> Any:
    module = types.ModuleType(MODULE)
    module.CudnnBackendAdapter = lambda: adapter
    monkeypatch.setitem(sys.modules, MODULE, module)
    monkeypatch.setattr(backend_source, "ADAPTER_MODULE", MODULE)
    backend_source.reset_backend_adapter()
    return adapter


def install_no_backend(monkeypatch: Any) -> None:
    """Make the adapter module unimportable, whatever this machine has installed."""
    monkeypatch.setitem(sys.modules, MODULE, None)
    monkeypatch.setattr(backend_source, "ADAPTER_MODULE", MODULE)
    backend_source.reset_backend_adapter()
