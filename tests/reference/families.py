"""The reference functions of each family in one typed table, and calls driven by Inputs.

Later GPU tests compare kernels against ``reference_forward`` / ``reference_backward``
without naming a family's functions; the chunked forms are the ones that scale to long
sequences (the recurrent backward holds every per-token state for autograd).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from tests.reference.delta_rule import LinearAttentionGrads
from tests.reference.gdn import naive_chunk_gdn, naive_chunk_gdn_bwd, naive_recurrent_gdn, naive_recurrent_gdn_bwd
from tests.reference.gdn2 import naive_recurrent_gdn2, naive_recurrent_gdn2_bwd
from tests.reference.inputs import Inputs
from tests.reference.kda import naive_chunk_kda, naive_chunk_kda_bwd, naive_recurrent_kda, naive_recurrent_kda_bwd
from tests.reference.preprocess import Family


@dataclasses.dataclass(frozen=True)
class FamilyReferences:
    recurrent: Callable[..., tuple[torch.Tensor, torch.Tensor | None]]
    recurrent_bwd: Callable[..., LinearAttentionGrads]
    chunk: Callable[..., tuple[torch.Tensor, torch.Tensor | None]] | None
    chunk_bwd: Callable[..., LinearAttentionGrads] | None


REFERENCES: dict[Family, FamilyReferences] = {
    Family.GDN: FamilyReferences(naive_recurrent_gdn, naive_recurrent_gdn_bwd, naive_chunk_gdn, naive_chunk_gdn_bwd),
    Family.KDA: FamilyReferences(naive_recurrent_kda, naive_recurrent_kda_bwd, naive_chunk_kda, naive_chunk_kda_bwd),
    Family.GDN2: FamilyReferences(naive_recurrent_gdn2, naive_recurrent_gdn2_bwd, None, None),
}


def _pick(inputs: Inputs, chunked: bool, backward: bool) -> Callable:
    refs = REFERENCES[inputs.config.family]
    fn = (refs.chunk_bwd if backward else refs.chunk) if chunked else (refs.recurrent_bwd if backward else refs.recurrent)
    if fn is None:
        raise NotImplementedError(f"no chunked reference for family {inputs.config.family.value}")
    return fn


def reference_forward(inputs: Inputs, *, chunked: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(o [T, HO, V], final_state [N, HO, V, K]), float64."""
    fn = _pick(inputs, chunked, backward=False)
    return fn(*inputs.args(), output_final_state=True, **inputs.options())


def reference_backward(
    inputs: Inputs, dO: torch.Tensor, d_final_state: torch.Tensor | None = None, *, chunked: bool = False
) -> LinearAttentionGrads:
    fn = _pick(inputs, chunked, backward=True)
    return fn(*inputs.args(), dO, d_final_state=d_final_state, **inputs.options())
