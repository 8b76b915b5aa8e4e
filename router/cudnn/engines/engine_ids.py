"""The flat engine id space: an id is an engine's permanent identity, a plan's list
position is only its rank, so `(engine_id, knobs)` replays on any graph.

    [0, 10_000)        cuDNN backend engines (ids assigned by the backend per graph)
    [10_000, 20_000)   C++ open-source engines (reserved, unpopulated)
    [20_000, 30_000)   in-tree python engines, one FAMILY_BLOCK-wide block per family
    [30_000, ...)      out-of-tree python engines (`manifest.register_backend`)
    -1                 the delegating backend entry (backend picks among candidates it
                       does not expose; no replayable (id, knobs))

Family bases are the published 1.32 layout (gdn 20100, kda 20200, gdn2 20300, ...),
kept so autotune records written against it replay here. Ids never move once used:
new families take new blocks, new engines take the next slot of their block.
"""
from __future__ import annotations

import numbers

BACKEND_ENGINE_ID_BASE = 0
CPP_OSS_ENGINE_ID_BASE = 10_000
PYTHON_ENGINE_ID_BASE = 20_000
OUT_OF_TREE_ID_BASE = 30_000
FAMILY_BLOCK = 100
BACKEND_HEURISTIC_ENGINE_ID = -1

# In-tree family blocks (base .. base + FAMILY_BLOCK - 1). Bases of families that have
# no engines here yet are listed so nothing else takes their block.
GDN_ID_BASE = 20_100
KDA_ID_BASE = 20_200
GDN2_ID_BASE = 20_300
FROST_GEMM_ID_BASE = 20_400
FROST_SDPA_FWD_ID_BASE = 20_500
FROST_SDPA_BWD_ID_BASE = 20_600
GDP_ID_BASE = 20_700
FROST_CONV_ID_BASE = 20_800
MAMBA2_ID_BASE = 20_900
FROST_NORM_FWD_ID_BASE = 21_000
FROST_NORM_BWD_ID_BASE = 21_100

#: {family name: block base} of every reserved in-tree block.
RESERVED_FAMILY_BLOCKS: dict[str, int] = {
    "gdn": GDN_ID_BASE, "kda": KDA_ID_BASE, "gdn2": GDN2_ID_BASE,
    "frost_gemm": FROST_GEMM_ID_BASE, "frost_sdpa_fwd": FROST_SDPA_FWD_ID_BASE,
    "frost_sdpa_bwd": FROST_SDPA_BWD_ID_BASE, "gdp": GDP_ID_BASE,
    "frost_conv": FROST_CONV_ID_BASE, "mamba2": MAMBA2_ID_BASE,
    "frost_norm_fwd": FROST_NORM_FWD_ID_BASE, "frost_norm_bwd": FROST_NORM_BWD_ID_BASE,
}


def as_engine_id(value: object, where: str) -> int:
    """`value` as an int engine id (bools and non-integers raise TypeError)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{where}: engine_id must be an int, got "
                        f"{type(value).__name__} {value!r}")
    return int(value)


def is_backend_engine(engine_id: int) -> bool:
    return BACKEND_ENGINE_ID_BASE <= engine_id < CPP_OSS_ENGINE_ID_BASE


def is_cpp_oss_engine(engine_id: int) -> bool:
    return CPP_OSS_ENGINE_ID_BASE <= engine_id < PYTHON_ENGINE_ID_BASE


def is_python_engine(engine_id: int) -> bool:
    """In-tree or out-of-tree python engine: executed in-process, never by the backend."""
    return engine_id >= PYTHON_ENGINE_ID_BASE


def is_out_of_tree_engine(engine_id: int) -> bool:
    return engine_id >= OUT_OF_TREE_ID_BASE


def reserved_family_of(engine_id: int) -> str | None:
    """The in-tree family whose block holds `engine_id`, if any."""
    for name, base in RESERVED_FAMILY_BLOCKS.items():
        if base <= engine_id < base + FAMILY_BLOCK:
            return name
    return None


def side_of(engine_id: int) -> str:
    """'python' or 'backend': which side executes an entry (everything not python is
    routed to the backend, including the delegating -1 entry)."""
    return "python" if is_python_engine(engine_id) else "backend"
