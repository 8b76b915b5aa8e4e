"""Which cases of an expensive CPU matrix (sm_90a compiles, the kernels' source run on the
CPU emulator) every test run takes, and which wait for the full matrix.

One CuTe DSL build of a kernel costs ~3-18 s on a two-core CI machine, one emulated decode
launch ~15 s, and the resource and compile matrices hold a few hundred builds. Every run
takes a matrix's core: each kernel the product launches at the configs its engines pick
(the bench shape among them) and at least one awkward config per kernel (K = 64, fp16,
grouped heads), each emulated case once. The other cases (experiment kernels at more
head-dim pairs, the tooling's oracle / mma at every variant, switch combinations the product
does not use, an emulated case's second layout or chunk, further malformed cu_seqlens
tables) run with FROST_FULL_MATRIX=1 and are reported as skipped, with that reason,
otherwise:

    FROST_FULL_MATRIX=1 python3 -m pytest engines_frost/tests/frost_resource_bwd_test.py
    tools/bazel test --test_env=FROST_FULL_MATRIX=1 //engines_frost/...
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Sequence

import pytest

FULL_ENV = "FROST_FULL_MATRIX"


def full_matrix() -> bool:
    """Whether FROST_FULL_MATRIX asks for every case (set and not "0")."""
    return os.environ.get(FULL_ENV, "").strip() not in ("", "0")


_SKIP = pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")


def tiered(cases: Sequence, core: Iterable[int], ids: Callable | None = None, unpack: bool = False) -> list:
    """cases as pytest params for parametrize: the indices in `core` always run, the rest
    only under FROST_FULL_MATRIX. `ids`, if given, names each case (as parametrize's ids);
    `unpack` spreads each case over several argnames ("algorithm,variant")."""
    core = set(core)
    bad = [i for i in core if not 0 <= i < len(cases)]
    if bad:
        raise IndexError(f"tiered: core indices {sorted(bad)} outside the {len(cases)} cases")
    return [pytest.param(*(c if unpack else (c,)), marks=() if i in core else _SKIP,
                         id=None if ids is None else ids(c))
            for i, c in enumerate(cases)]
