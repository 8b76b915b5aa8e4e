"""Probe: can the loaded cuDNN build, and run on this GPU, a graph holding SDPA_BWD?

Talks to libcudnn directly (ctypes), bypassing the extension and its version gate, so one
run shows what cuDNN itself does with the plainest SDPA backward graph (dense BHSD/BSHD
fp16 q/k/v/o/dO/dQ/dK/dV, fp32 Stats, a by-value fp32 scale), next to the SDPA forward
graph as a control:

  PYTHONPATH=$(python3 tools/pythonpath.py) python3 tests/backend/sdpa_bwd_probe.py

For each graph it prints whether the operation graph finalizes (no GPU needed: measured
here, 9.17-9.20 refuse SDPA_BWD in buildDAG, 9.21+ accept it) and, where a GPU is present,
the engine ids heuristics modes A and FALLBACK keep (cuDNN drops configs it cannot run;
CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr prints why). libcudnn is the one
cudnn.backend.loader would load ($CUDNN_LIBRARY_PATH first).
"""
from __future__ import annotations

import ctypes
import sys

from cudnn.backend import loader

# cudnn_graph.h values (stable across cuDNN 9).
TENSOR, OPERATIONGRAPH, ENGINEHEUR, ENGINECFG, ENGINE = 17, 15, 4, 3, 2
SDPA_FWD, SDPA_BWD = 41, 43
T_DATA_TYPE, T_BOOLEAN, T_INT64, T_HEUR_MODE, T_HANDLE, T_DESCRIPTOR = 1, 2, 3, 8, 0, 15
FLOAT, HALF = 0, 2
HEUR_A, HEUR_FALLBACK = 0, 2
FWD_PORTS = {"q": 2800, "k": 2801, "v": 2802, "o": 2803, "stats": 2804, "scale": 2805}
BWD_PORTS = {"q": 2851, "k": 2852, "v": 2853, "o": 2854, "stats": 2855, "scale": 2856,
             "dq": 2859, "dk": 2860, "dv": 2861, "do": 2862}


class Cudnn:
    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.lib.cudnnGetVersion.restype = ctypes.c_size_t
        self.lib.cudnnGetErrorString.restype = ctypes.c_char_p
        self.version = int(self.lib.cudnnGetVersion())
        self.keep: list[ctypes.c_void_p] = []

    def status(self, code: int) -> str:
        if code == 0:
            return "SUCCESS"
        detail = ctypes.create_string_buffer(1024)
        self.lib.cudnnGetLastErrorString(detail, 1024)
        return f"{self.lib.cudnnGetErrorString(code).decode()} ({detail.value.decode()})"

    def create(self, kind: int) -> ctypes.c_void_p:
        desc = ctypes.c_void_p()
        code = self.lib.cudnnBackendCreateDescriptor(kind, ctypes.byref(desc))
        if code:
            raise RuntimeError(f"cudnnBackendCreateDescriptor({kind}): {self.status(code)}")
        self.keep.append(desc)
        return desc

    def set(self, desc, name: int, kind: int, values, ctype) -> None:
        array = (ctype * len(values))(*values)
        code = self.lib.cudnnBackendSetAttribute(desc, name, kind, len(values), array)
        if code:
            raise RuntimeError(f"set attribute {name}: {self.status(code)}")

    def set_descs(self, desc, name: int, descs) -> None:
        self.set(desc, name, T_DESCRIPTOR, [d.value for d in descs], ctypes.c_void_p)

    def finalize(self, desc) -> int:
        return self.lib.cudnnBackendFinalize(desc)

    def tensor(self, uid: int, dims, strides, dtype=HALF, by_value=False):
        t = self.create(TENSOR)
        self.set(t, 901, T_DATA_TYPE, [dtype], ctypes.c_int)
        self.set(t, 902, T_INT64, dims, ctypes.c_int64)
        self.set(t, 903, T_INT64, strides, ctypes.c_int64)
        self.set(t, 906, T_INT64, [uid], ctypes.c_int64)
        self.set(t, 900, T_INT64, [16], ctypes.c_int64)
        if by_value:
            self.set(t, 908, T_BOOLEAN, [True], ctypes.c_bool)
        code = self.finalize(t)
        if code:
            raise RuntimeError(f"tensor {uid}: {self.status(code)}")
        return t


def sdpa_operation(cu: Cudnn, backward: bool, bshd: bool, b=2, h=4, s=128, d=64):
    dims = [b, h, s, d]
    strides = [s * h * d, d, h * d, 1] if bshd else [h * s * d, s * d, d, 1]
    names = ("q", "k", "v", "o", "do", "dq", "dk", "dv") if backward else ("q", "k", "v", "o")
    tensors = {n: cu.tensor(uid, dims, strides) for uid, n in enumerate(names, start=1)}
    tensors["stats"] = cu.tensor(20, [b, h, s, 1], [h * s, s, 1, 1], dtype=FLOAT)
    tensors["scale"] = cu.tensor(21, [1, 1, 1, 1], [1, 1, 1, 1], dtype=FLOAT, by_value=True)
    ports = BWD_PORTS if backward else FWD_PORTS
    op = cu.create(SDPA_BWD if backward else SDPA_FWD)
    for name, attribute in ports.items():
        cu.set_descs(op, attribute, [tensors[name]])
    return op, cu.finalize(op)


def engines(cu: Cudnn, graph, mode: int) -> str:
    heur = cu.create(ENGINEHEUR)
    cu.set_descs(heur, 201, [graph])
    cu.set(heur, 200, T_HEUR_MODE, [mode], ctypes.c_int)
    code = cu.finalize(heur)
    if code:
        return f"heuristics refused: {cu.status(code)}"
    configs = [cu.create(ENGINECFG) for _ in range(16)]
    array = (ctypes.c_void_p * 16)(*[c.value for c in configs])
    count = ctypes.c_int64()
    code = cu.lib.cudnnBackendGetAttribute(heur, 202, T_DESCRIPTOR, 16, ctypes.byref(count),
                                           array)
    if code:
        return f"results refused: {cu.status(code)}"
    ids = []
    for config in configs[:count.value]:
        engine, got, index = cu.create(ENGINE), ctypes.c_int64(), ctypes.c_int64()
        cu.lib.cudnnBackendGetAttribute(config, 300, T_DESCRIPTOR, 1, ctypes.byref(got),
                                        (ctypes.c_void_p * 1)(engine.value))
        cu.lib.cudnnBackendGetAttribute(engine, 1301, T_INT64, 1, ctypes.byref(got),
                                        ctypes.byref(index))
        ids.append(index.value)
    return f"engines {ids}" if ids else "no engine config kept"


def probe(cu: Cudnn, backward: bool, bshd: bool, handle=None) -> dict[str, object]:
    """{'op': status, 'graph': status or None, 'A': ..., 'FALLBACK': ...} of one graph."""
    op, op_code = sdpa_operation(cu, backward, bshd)
    result: dict[str, object] = {"op": cu.status(op_code), "graph": None}
    if op_code:
        return result
    graph = cu.create(OPERATIONGRAPH)
    if handle is not None:
        cu.set(graph, 800, T_HANDLE, [handle.value], ctypes.c_void_p)
    cu.set_descs(graph, 801, [op])
    code = cu.finalize(graph)
    result["graph"] = cu.status(code)
    if code == 0 and handle is not None:
        result["A"] = engines(cu, graph, HEUR_A)
        result["FALLBACK"] = engines(cu, graph, HEUR_FALLBACK)
    return result


def library_path() -> str:
    for candidate in loader.library_candidates():
        try:
            ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        return candidate
    raise SystemExit("no libcudnn found: " + ", ".join(loader.library_candidates()))


def main() -> int:
    path = library_path()
    cu = Cudnn(path)
    handle = ctypes.c_void_p()
    code = cu.lib.cudnnCreate(ctypes.byref(handle))
    if code:
        print(f"no GPU handle ({cu.status(code)}): operation graphs only")
        handle = None
    print(f"cuDNN {cu.version} from {path}")
    for backward in (False, True):
        for bshd in (True, False):
            name = f"SDPA_{'BWD' if backward else 'FWD'} {'BSHD' if bshd else 'BHSD'}"
            print(f"{name:<14} " + "; ".join(f"{k}: {v}" for k, v in
                                              probe(cu, backward, bshd, handle).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
