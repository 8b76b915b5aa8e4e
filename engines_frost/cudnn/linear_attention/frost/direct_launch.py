"""The FROST plans' direct launches (engine contract `CompiledPlan.direct_launch`), built
one way for every plan whose execute hands its ports' buffers to a checked launcher and
whose launcher can bind its checks once (kernels/summary.py bind_summary /
bind_summary_bwd, kernels/bwd.py bind_bwd).

- `bound_direct_launch`: the node's wired ports -> their uids -> the buffers the first call
  was given (plain torch tensors only: execute converts the others) -> a workspace laid
  out as every lane call's (fresh from torch's allocator, the plan's size) -> the
  launcher's bind -> a DirectLaunch whose `launch` hands the call's buffers, by the same
  keywords, to what the bind returned. None in strict cu_seqlens mode (execute checks the
  table on the device on every call) and when the bind offers nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cudnn.engines.base import DirectLaunch
from cudnn.linear_attention.common.cu_seqlens_check import strict_requested

#: what a launcher's bind returns: run(operands by keyword, workspace, raw stream handle)
Run = Callable[[dict, Any, int], None]


def bound_direct_launch(node: Any, ports: Sequence[str], data: Mapping[int, Any],
                        workspace_size: int, bind: Callable[[dict, Any], Run | None],
                        keyword: Mapping[str, str] | None = None) -> DirectLaunch | None:
    """A DirectLaunch over `bind`'s result for the buffers `data` ({uid: buffer}) binds to
    `node`'s wired ports among `ports` (launch order: the DirectLaunch's uids).

    `bind(operands, workspace)` gets every port of `ports` by its launcher keyword
    (`keyword[port]`, else the port's name; None for a port the node does not wire) and a
    workspace of `workspace_size` bytes laid out as the lane's, and returns
    `run(operands, workspace, stream)` with its checks done, or None (execute handles
    the call)."""
    import torch

    if strict_requested():
        return None
    keyword = keyword or {}
    wired = {**node.inputs, **node.outputs}
    present = tuple(p for p in ports if p in wired)
    uids = tuple(wired[p].uid for p in present)
    given = [data.get(uid) for uid in uids]
    if not given or any(type(b) is not torch.Tensor for b in given):
        return None
    names = tuple(keyword.get(p, p) for p in present)
    absent = dict.fromkeys(keyword.get(p, p) for p in ports)
    # laid out as every call's scratch is: fresh from torch's allocator, this size
    probe = torch.empty(workspace_size, dtype=torch.uint8, device=given[0].device)
    run = bind({**absent, **dict(zip(names, given))}, probe)
    if run is None:
        return None

    def launch(buffers, workspace, stream: int) -> None:
        run({**absent, **dict(zip(names, buffers))}, workspace, stream)
    return DirectLaunch(uids=uids, alignment=tuple(b.data_ptr() & 15 for b in given),
                        launch=launch)
