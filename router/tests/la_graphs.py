"""Single-node linear-attention graphs for the router tests (no framework needed).

`la_graph("kda_bwd", ports=("initial_state",), safe_gate=True)` builds the op with its
required ports plus `ports`, every tensor declared with its THD shape and a dtype from
DTYPES (or `dtypes=`), attributes passed through. `node_variant` re-assembles a node with
edited inputs/outputs/params, bypassing the builders, to reach states the builders
refuse (the consistency rules must still catch them).
"""
from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import cudnn
from cudnn.ops import linear_attention as la_specs

D = cudnn.data_type


@dataclass(frozen=True)
class Geo:
    T: int = 24
    N: int = 3
    HQ: int = 2
    HK: int = 2
    HV: int = 4
    K: int = 16
    V: int = 8
    n: int = 2  # GDP sub-tokens

    @property
    def HO(self) -> int:  # noqa: N802 - spec notation
        return max(self.HQ, self.HV)


DTYPES = {"q": D.BFLOAT16, "k": D.BFLOAT16, "v": D.BFLOAT16, "g": D.FLOAT, "beta": D.FLOAT,
          "w": D.BFLOAT16, "cu_seqlens": D.INT32, "initial_state": D.FLOAT, "a_log": D.FLOAT,
          "dt_bias": D.FLOAT, "state_indices": D.INT32, "dO": D.BFLOAT16,
          "state_checkpoints": D.FLOAT, "d_final_state": D.FLOAT, "a": D.FLOAT, "d": D.FLOAT,
          "z": D.BFLOAT16, "O_pre": D.BFLOAT16}


def shapes(family: str, geo: Geo) -> dict[str, tuple[int, ...]]:
    T, N, HO, K, V, n = geo.T, geo.N, geo.HO, geo.K, geo.V, geo.n
    channel = family in ("kda", "gdn2")
    out = {
        "q": (T, geo.HQ, K), "k": (T, geo.HK, K), "v": (T, geo.HV, V),
        "g": (T, HO, K) if channel else (T, HO),
        "beta": (T, HO, K) if family == "gdn2" else (T, HO), "w": (T, HO, V),
        "cu_seqlens": (N + 1,), "initial_state": (N, HO, V, K), "a_log": (HO,),
        "dt_bias": (HO, K) if channel else (HO,), "state_indices": (N,), "dO": (T, HO, V),
        "state_checkpoints": (T // 4 + N, HO, V, K), "d_final_state": (N, HO, V, K),
        "a": (HO,), "d": (HO,), "z": (T, HO, V), "O_pre": (T, HO, V),
    }
    if family == "gdp":
        out.update(k=(T * n, geo.HK, K), v=(T * n, geo.HV, V), beta=(T * n, HO))
    if family == "mamba2":
        out.update(q=(T, geo.HQ, K), k=(T, geo.HQ, K), g=(T, HO))
    return out


def spec_of(op: str) -> Any:
    return getattr(la_specs, op.upper())


def la_graph(op: str, ports: tuple[str, ...] = (), geo: Geo = Geo(),
             dtypes: dict[str, Any] | None = None, name: str = "", **attrs: Any) -> Any:
    """(graph, node) of one linear-attention op, validated."""
    family = op.split("_")[0]
    spec = spec_of(op)
    wanted = [p.name for p in spec.input_ports if p.required] + list(ports)
    dims = shapes(family, geo)
    types_ = {**DTYPES, **(dtypes or {})}
    g = cudnn.pygraph(name=name or f"{op}_graph")
    tensors = {p: g.tensor(list(dims[p]), data_type=types_[p], name=p) for p in wanted}
    if family == "gdp":
        attrs.setdefault("num_householder", geo.n)
    getattr(g, op)(**tensors, **attrs, name=op)
    g.validate()
    return g, g.nodes[0]


def node_variant(node: Any, inputs: dict[str, Any] | None = None,
                 outputs: dict[str, Any] | None = None, params: dict[str, Any] | None = None,
                 drop: tuple[str, ...] = ()) -> Any:
    """A graph-like object holding a copy of `node` with edits (None values remove)."""
    def merged(base: Any, edits: dict[str, Any] | None) -> dict[str, Any]:
        out = {k: v for k, v in base.items() if k not in drop}
        for key, value in (edits or {}).items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        return out

    copy = cudnn.Node(node.name, node.spec, merged(node.inputs, inputs),
                      merged(node.outputs, outputs), merged(node.params, params),
                      node.compute_data_type)
    return types.SimpleNamespace(nodes=[copy])


def extra_tensor(dims: tuple[int, ...], dtype: Any = D.FLOAT, name: str = "extra") -> Any:
    """A tensor from a scratch graph, for wiring into node_variant."""
    return cudnn.pygraph().tensor(list(dims), data_type=dtype, name=name)
