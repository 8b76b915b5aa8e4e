"""Which ops this machine's cuDNN backend declines, and the reason it must give, read from
the extension's own op table: the build headers (`missing_from_headers`), the loaded cuDNN
(`min_version`), the GPU (`min_sm`, compared by the lowering with the handle's device) and
ops with no lowering at all (`no_lowering`). The GPU suites check numerics wherever this
says None and otherwise assert that exact decline, so one suite serves the H200 (cuDNN 9.19)
and newer libraries alike.
"""
from __future__ import annotations

import re

import cudnn
from cudnn.backend import loader
from cudnn.backend.sdpa_bwd_route import version_string


def schema(method: str) -> dict:
    return next(s for s in loader.load().op_schemas() if s["method"] == method)


def expected_decline(method: str, device_sm: int | None) -> str | None:
    """A regex the backend's decline of `method` must match here, or None if it should run.
    The order is the lowering's: the device (a static check), then the extension's gates."""
    ext = loader.load()
    row = schema(method)
    if device_sm is not None and device_sm < row["min_sm"]:
        return rf"{method} needs sm_{row['min_sm']}\+ .*this device is sm_{device_sm}"
    if row["missing_from_headers"]:
        return (rf"built against cuDNN {re.escape(version_string(ext.version()))} headers, "
                rf"which lack {re.escape(row['missing_from_headers'])}")
    loaded = ext.cudnn_version()
    if loaded is not None and loaded < row["min_version"]:
        return rf"{method} needs cuDNN >= {re.escape(version_string(row['min_version']))}"
    if row["no_lowering"]:
        return re.escape(row["no_lowering"])
    return None


def gate_text(method: str, device_sm: int | None) -> str:
    """One line for the result table: why `method` declines here ("" if it runs)."""
    row = schema(method)
    if device_sm is not None and device_sm < row["min_sm"]:
        return f"needs sm_{row['min_sm']}+, device sm_{device_sm}"
    if row["missing_from_headers"]:
        return f"headers {version_string(loader.load().version())} lack " \
               f"{row['missing_from_headers'].split('_OPERATION_')[-1]}"
    loaded = loader.load().cudnn_version()
    if loaded is not None and loaded < row["min_version"]:
        return f"needs cuDNN {version_string(row['min_version'])}, loaded {version_string(loaded)}"
    return "no lowering (MXFP8)" if row["no_lowering"] else ""


def assert_backend_declined(graph: cudnn.pygraph, why: str) -> None:
    """Planning found nothing to run, and the backend said `why`."""
    try:
        graph.create_execution_plans()
    except cudnn.cudnnGraphNotSupportedError as exc:
        assert re.search(why, str(exc)), f"declined for another reason:\n{exc}"
    else:
        raise AssertionError(f"expected a decline matching {why!r}:\n{graph.explain_plans()}")
    assert graph.backend_plan_entries() == []
    assert re.search(why, graph.explain_plans().render())
