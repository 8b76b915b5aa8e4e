"""Oracle engines for the cost-model and autotune tests (test-only, CPU).

`FakeClock` is the injected clock: `ClockTimer(clock)` reads it, and the plans of
`TimedMatmulEngine` advance it by their knob's cost each time they execute, so a test
decides what every plan "takes". `PredictingMatmulEngine` adds a cost model
(`predict_time`) to the contract oracle.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cudnn.engines.base import CompiledPlan, ExecutionContext, PlanConfig
from cudnn.engines.engine_ids import OUT_OF_TREE_ID_BASE

from tests.oracle.torch_matmul_engine import TorchMatmulEngine, _MatmulPlan


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


class PredictingMatmulEngine(TorchMatmulEngine):
    """The oracle with a cost model: `predictions[block_k]` seconds (missing: None)."""
    name = "matmul_predicting_oracle"
    predict_source = "oracle table"

    def __init__(self, predictions: Mapping[Any, float | None], engine_id: int = OUT_OF_TREE_ID_BASE,
                 block_ks=(None, 16, 4)) -> None:
        super().__init__(engine_id=engine_id, block_ks=block_ks)
        self.predictions = dict(predictions)

    def predict_time(self, graph: Any, plan: PlanConfig) -> float | None:
        self.calls.append(("predict", plan.knobs.block_k))
        value = self.predictions.get(plan.knobs.block_k)
        if isinstance(value, BaseException):
            raise value
        return value


class TimedMatmulEngine(TorchMatmulEngine):
    """The oracle whose plans advance `clock` by `costs[block_k]` seconds per execute; a
    cost that is an exception is raised by execute instead."""
    name = "matmul_timed_oracle"

    def __init__(self, clock: FakeClock, costs: Mapping[Any, Any],
                 engine_id: int = OUT_OF_TREE_ID_BASE, block_ks=(None, 16, 4)) -> None:
        super().__init__(engine_id=engine_id, block_ks=block_ks)
        self.clock = clock
        self.costs = dict(costs)

    def build_plan(self, graph: Any, plan: PlanConfig,
                   ctx: ExecutionContext | None = None) -> CompiledPlan:
        inner = super().build_plan(graph, plan, ctx)
        return _TimedPlan(self, inner)

    def executions(self) -> list[Any]:
        return [detail[0] for event, detail in self.calls if event == "execute"]


class _TimedPlan(CompiledPlan):
    def __init__(self, engine: TimedMatmulEngine, inner: _MatmulPlan) -> None:
        self.engine = engine
        self.inner = inner

    def get_workspace_size(self) -> int:
        return self.inner.get_workspace_size()

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        cost = self.engine.costs.get(self.inner.block_k, 1e-3)
        if isinstance(cost, BaseException):
            self.engine.calls.append(("execute", (self.inner.block_k, ctx.stream)))
            raise cost
        self.inner.execute(graph, data, ctx)
        self.engine.clock.now += cost
