"""Single-node gdn/kda/gdn2 graphs with kernel-native dtypes, for the FROST CPU tests.

`op_graph("kda", H=4, HV=8, with_h0=True, output_final_state=True)` declares every port
at its spec shape (docs/LINEAR_ATTENTION.md §1) and the dtype the FROST
kernels read (GDN-2's beta and w: the q dtype), unless `dtypes` / `dims` override a port; attributes pass through; outputs
are marked as outputs with `out_dtypes` (default: unset, "the engine's choice"). The
graph is validated and returned with its node.
"""
from __future__ import annotations

from typing import Any

import cudnn
from cudnn.ops import linear_attention as la_specs

D = cudnn.data_type

NATIVE = {"q": D.BFLOAT16, "k": D.BFLOAT16, "v": D.BFLOAT16, "g": D.FLOAT, "beta": D.FLOAT,
          "w": D.BFLOAT16, "cu_seqlens": D.INT32, "initial_state": D.FLOAT, "dO": D.BFLOAT16,
          "d_final_state": D.FLOAT, "a_log": D.FLOAT, "dt_bias": D.FLOAT,
          "state_indices": D.INT32, "state_checkpoints": D.BFLOAT16, "values": D.BFLOAT16}


def port_dims(family: str, T: int, N: int, H: int, HK: int, HV: int, K: int,
              V: int) -> dict[str, list[int]]:
    HO = max(H, HV)
    channel = family in ("kda", "gdn2")
    return {
        "q": [T, H, K], "k": [T, HK, K], "v": [T, HV, V],
        "g": [T, HO, K] if channel else [T, HO],
        "beta": [T, HO, K] if family == "gdn2" else [T, HO], "w": [T, HO, V],
        "cu_seqlens": [N + 1], "initial_state": [N, HO, V, K], "dO": [T, HO, V],
        "d_final_state": [N, HO, V, K], "a_log": [HO],
        "dt_bias": [HO, K] if channel else [HO], "state_indices": [N],
        "state_checkpoints": [T // 64 + N, HO, V, K],   # backward input at cadence 64
        "values": [T, HO, V],                            # backward input: the forward's u_t
    }


def op_graph(op: str = "gdn", *, T: int = 40, N: int = 3, H: int = 4, HK: int | None = None,
             HV: int = 4, K: int = 64, V: int = 64, with_h0: bool = False,
             extra_inputs: tuple[str, ...] = (), dtypes: dict[str, Any] | None = None,
             dims: dict[str, list[int]] | None = None, out_dtypes: dict[str, Any] | None = None,
             handle: Any = None, **attrs: Any) -> tuple[Any, Any]:
    """(graph, node) of one validated linear-attention op."""
    family = op.split("_")[0]
    spec = getattr(la_specs, op.upper())
    wanted = [p.name for p in spec.input_ports if p.required]
    wanted += ["initial_state"] * with_h0 + list(extra_inputs)
    shape = {**port_dims(family, T, N, H, HK or H, HV, K, V), **(dims or {})}
    io = (dtypes or {}).get("q", NATIVE["q"])
    io_gates = {"beta": io, "w": io} if family == "gdn2" else {}   # GDN-2 gates are io
    types = {**NATIVE, **io_gates, **(dtypes or {})}
    graph = cudnn.pygraph(name=f"{op}_frost_test", handle=handle)
    tensors = {p: graph.tensor(shape[p], data_type=types[p], name=p) for p in wanted}
    outs = getattr(graph, op)(**tensors, **attrs, name=op)
    for out in outs:
        if out is not None:
            port = out.name.split("::")[-1]
            out.set_output(True)
            if out_dtypes and port in out_dtypes:
                out.set_data_type(out_dtypes[port])
    graph.validate()
    return graph, graph.nodes[0]
