"""`TorchMatmulEngine`: the CPU contract oracle (test-only, never shipped).

A complete python engine in plain PyTorch that serves single-node matmul graphs, so the
whole engine contract (proposals with several knob configs, declines at planning and at
build, compiled plans, workspace, variant packs, handles and streams) can be exercised
without a GPU. Knobs: `MatmulKnobs(block_k)`; `block_k=None` is one product, an int
accumulates K in blocks of `block_k` through an fp32 accumulator carved from the caller's
workspace (so the workspace size and the buffer itself are really used). A config whose
block_k does not split K declines at build time with NotImplementedError.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cudnn.engines.base import (BaseEngine, CompiledPlan, ExecutionContext, PlanConfig,
                                resolve_node_buffers)
from cudnn.engines.engine_ids import OUT_OF_TREE_ID_BASE
from cudnn.ops.data_types import data_type
from cudnn.ops.enums import knob_type
from cudnn.ops.errors import cudnnGraphNotSupportedError
from cudnn.ops.node_type import NodeType

_SERVED = frozenset({data_type.FLOAT, data_type.DOUBLE, data_type.HALF, data_type.BFLOAT16})
_ACC_BYTES = 4  # fp32 accumulator element


@dataclass(frozen=True)
class MatmulKnobs:
    block_k: int | None = None


class TorchMatmulEngine(BaseEngine):
    name = "matmul_torch_oracle"

    def __init__(self, engine_id: int = OUT_OF_TREE_ID_BASE,
                 block_ks: Sequence[int | None] = (None, 16, 4)) -> None:
        self.engine_id = engine_id
        self.block_ks = tuple(block_ks)
        #: what the tests observe: (event, detail) in call order.
        self.calls: list[tuple[str, Any]] = []

    def check_support(self, graph: Any) -> None:
        nodes = graph.nodes
        if len(nodes) != 1 or nodes[0].node_type is not NodeType.MATMUL:
            kinds = [n.node_type.name for n in nodes]
            raise cudnnGraphNotSupportedError(f"{self.name} serves single-node matmul graphs, "
                                              f"got {kinds}")
        node = nodes[0]
        for port, tensor in (*node.inputs.items(), *node.outputs.items()):
            if tensor.data_type not in _SERVED:
                raise NotImplementedError(f"{self.name}: port {port} has dtype "
                                          f"{tensor.data_type}, not a float type")
        if node.param("padding"):
            raise NotImplementedError(f"{self.name}: padding is not supported")
        a, b = node.inputs["A"].data_type, node.inputs["B"].data_type
        if a is not b:  # torch.matmul multiplies one dtype
            raise NotImplementedError(f"{self.name}: A is {a.name} but B is {b.name}")

    def propose_plans(self, graph: Any) -> list[PlanConfig]:
        self.check_support(graph)
        self.calls.append(("propose", graph.name))
        return [PlanConfig(self.require_id(), MatmulKnobs(bk)) for bk in self.block_ks]

    def build_plan(self, graph: Any, plan: PlanConfig,
                   ctx: ExecutionContext | None = None) -> CompiledPlan:
        self.calls.append(("build", plan.knobs))
        node = graph.nodes[0]
        k = node.inputs["A"].dim[-1]
        block_k = plan.knobs.block_k
        if block_k is not None and not 0 < block_k < k:
            raise NotImplementedError(f"{self.name}: block_k {block_k} does not split K = {k}")
        out = node.outputs["C"]
        count = 1
        for n in out.dim:
            count *= n
        workspace = 0 if block_k is None else count * _ACC_BYTES
        return _MatmulPlan(self, node.name, block_k, workspace)

    def knobs_to_public(self, knobs: Any) -> dict[Any, int]:
        return {knob_type.TILEK: knobs.block_k or 0}

    def knobs_from_public(self, public: Mapping[Any, int]) -> Any:
        return MatmulKnobs(public.get(knob_type.TILEK) or None)


class _MatmulPlan(CompiledPlan):
    def __init__(self, engine: TorchMatmulEngine, node_name: str, block_k: int | None,
                 workspace_bytes: int) -> None:
        self.engine = engine
        self.node_name = node_name
        self.block_k = block_k
        self.workspace_bytes = workspace_bytes

    def get_workspace_size(self) -> int:
        return self.workspace_bytes

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        import torch

        self.engine.calls.append(("execute", (self.block_k, ctx.stream)))
        node = graph.get_node(self.node_name)
        buffers = resolve_node_buffers(graph, data)[node]
        a, b, c = buffers.input("A"), buffers.input("B"), buffers.output("C")
        if self.block_k is None:
            c.copy_(torch.matmul(a, b))
            return
        acc = _accumulator(ctx.workspace, self.workspace_bytes, tuple(c.shape))
        acc.zero_()
        k = a.shape[-1]
        for k0 in range(0, k, self.block_k):
            k1 = min(k0 + self.block_k, k)
            acc += torch.matmul(a[..., k0:k1].float(), b[..., k0:k1, :].float())
        c.copy_(acc)


def _accumulator(workspace: Any, nbytes: int, shape: tuple[int, ...]) -> Any:
    import torch

    if not isinstance(workspace, torch.Tensor) or workspace.dtype != torch.uint8 \
            or not workspace.is_contiguous():
        raise ValueError("matmul_torch_oracle: the workspace must be a contiguous uint8 tensor")
    return workspace[:nbytes].view(torch.float32).view(shape)
