"""The chunked forward (naive_chunk_gdn / _kda and its stages) against the recurrent reference."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.reference import decay_gram
from tests.reference.chunk_fwd import chunk_delta_rule_fwd, solve_tril
from tests.reference.chunking import ChunkLayout
from tests.reference.compare import assert_rel_close
from tests.reference.decay_gram import decayed_gram
from tests.reference.families import reference_forward
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.kda import naive_chunk_kda
from tests.reference.preprocess import Family

F64 = torch.float64
MIXED_LENS = (0, 1, 63, 64, 65, 130)  # empty, single token, chunk-1, chunk, chunk+1, two chunks + tail
BOUND = 1e-10  # recurrent vs chunked: different association of the same float64 sums


@pytest.fixture(autouse=True)
def _seed_global_rng():
    """Stage tests draw from torch's global generator; make every test's draw fixed."""
    torch.manual_seed(1234)


def _config(family: Family, **kw) -> InputConfig:
    base = dict(family=family, seq_lens=MIXED_LENS, H=2, HV=4, K=32, V=48, dtype=F64, gate_dtype=F64,
                state_dtype=F64, param_dtype=F64)
    base.update(kw)
    return InputConfig(**base)


def test_chunk_layout_table_and_round_trip():
    bounds = ((0, 0), (0, 1), (1, 64), (64, 128), (128, 193), (193, 323))
    layout = ChunkLayout.from_bounds(bounds, 64)
    assert layout.seq_chunks == ((0, 0), (0, 1), (1, 2), (2, 3), (3, 5), (5, 8))
    assert layout.chunk_len == (1, 63, 64, 64, 1, 64, 64, 2)
    assert layout.seq_of_chunk == (1, 2, 3, 4, 4, 5, 5, 5)
    x = torch.randn(323, 3, 5, dtype=F64)
    packed = layout.pack(x)
    assert packed.shape == (8, 3, 64, 5)
    assert torch.equal(packed[0, :, 0], x[0]) and not packed[0, :, 1:].any()
    assert torch.equal(packed[4, :, 0], x[192]) and not packed[4, :, 1:].any()
    assert torch.equal(layout.unpack(packed), x)


def test_solve_tril_inverts_unit_lower():
    A = torch.randn(3, 2, 64, 64, dtype=F64).tril(-1) * 0.1
    T = solve_tril(A)
    eye = torch.eye(64, dtype=F64)
    assert_rel_close("T", T, torch.linalg.inv(eye + A), 1e-12)
    assert torch.equal(T.triu(1), torch.zeros_like(T))


def _gram_loop(x, y, G, strict):
    C = x.shape[0]
    M = torch.zeros(C, C, dtype=F64)
    for i in range(C):
        for j in range(i if strict else i + 1):
            M[i, j] = (x[i] * y[j] * torch.exp(G[i] - G[j])).sum()
    return M


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "inclusive"])
def test_decayed_gram_matches_elementwise_sum(strict):
    C, K = 9, 4
    x, y = torch.randn(C, K, dtype=F64), torch.randn(C, K, dtype=F64)
    G_channel = (-torch.rand(C, K, dtype=F64)).cumsum(0)
    G_scalar = (-torch.rand(C, 1, dtype=F64)).cumsum(0)
    assert_rel_close("per-channel", decayed_gram(x, y, G_channel, strict), _gram_loop(x, y, G_channel, strict), 1e-13)
    assert_rel_close("scalar", decayed_gram(x, y, G_scalar, strict), _gram_loop(x, y, G_scalar, strict), 1e-13)
    # The scalar fast path equals the per-channel path with the gate repeated over K.
    assert_rel_close("scalar vs repeated", decayed_gram(x, y, G_scalar, strict),
                     decayed_gram(x, y, G_scalar.expand(C, K), strict), 1e-13)


def test_decayed_gram_blocking_is_invisible(monkeypatch):
    x, y = torch.randn(5, 3, 16, 8, dtype=F64), torch.randn(5, 3, 16, 8, dtype=F64)
    G = (-torch.rand(5, 3, 16, 8, dtype=F64)).cumsum(-2)
    whole = decayed_gram(x, y, G, strict=False)
    monkeypatch.setattr(decay_gram, "_BLOCK_ELEMENTS", 16 * 16 * 8 * 2)  # two items per block, 8 blocks
    assert_rel_close("blocked", decayed_gram(x, y, G, strict=False), whole, 0.0)


HEADS = {"value_groups": dict(H=2, HV=4), "qk_groups": dict(H=4, HK=2, HV=2), "equal": dict(H=3, HV=3)}
FLAGS = {
    "plain": dict(),
    "state_l2norm": dict(with_initial_state=True, use_qk_l2norm=True),
    "state_safe_gate_sigmoid": dict(with_initial_state=True, safe_gate=True, use_beta_sigmoid=True),
    "linear_gate": dict(gate_domain="linear", with_initial_state=True),
}


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA], ids=lambda f: f.value)
@pytest.mark.parametrize("heads", list(HEADS.values()), ids=list(HEADS))
@pytest.mark.parametrize("flags", list(FLAGS.values()), ids=list(FLAGS))
def test_chunk_forward_equals_recurrent(family, heads, flags):
    x = make_inputs(_config(family, **heads, **flags), seed=21)
    o, final = reference_forward(x)
    o_c, final_c = reference_forward(x, chunked=True)
    assert_rel_close("o", o_c, o, BOUND)
    assert_rel_close("final_state", final_c, final, BOUND)


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA], ids=lambda f: f.value)
def test_chunk_forward_survives_strong_decay(family):
    """gamma ~ -12 on every token and channel: G reaches -768 within a chunk, so a factorised
    exp(G_i) * exp(-G_j) would overflow even in float64; the masked pairwise decay never forms it."""
    x = make_inputs(_config(family, seq_lens=(130, 7), with_initial_state=True), seed=22)
    x = dataclasses.replace(x, g=torch.full_like(x.g, -12.0).add_(0.01 * torch.randn_like(x.g)))
    o, final = reference_forward(x)
    o_c, final_c = reference_forward(x, chunked=True)
    assert torch.isfinite(o_c).all()
    assert_rel_close("o", o_c, o, BOUND)
    assert_rel_close("final_state", final_c, final, BOUND)


@pytest.mark.parametrize("chunk_size", [1, 16, 50, 100])
def test_chunk_size_does_not_change_the_result(chunk_size):
    x = make_inputs(_config(Family.KDA, with_initial_state=True, seq_lens=(0, 1, 63, 130)), seed=23)
    o, final = reference_forward(x, chunked=True)
    o_c, final_c = naive_chunk_kda(*x.args(), **x.options(), chunk_size=chunk_size, output_final_state=True)
    assert_rel_close("o", o_c, o, BOUND)
    assert_rel_close("final_state", final_c, final, BOUND)


def test_chunk_states_are_the_recurrent_states_at_chunk_starts():
    x = make_inputs(_config(Family.KDA, seq_lens=(150,), H=2, HV=2, with_initial_state=True), seed=24)
    layout = ChunkLayout.from_bounds(((0, 150),), 64)
    q, k, v, g, beta = (layout.pack(t) for t in (x.q, x.k, x.v, x.g, x.beta[..., None]))
    fwd = chunk_delta_rule_fwd(q, k, v, g, beta, layout, x.config.K ** -0.5, x.initial_state.transpose(-1, -2))
    for c, start in enumerate((0, 64, 128)):
        prefix = dataclasses.replace(
            x, q=x.q[:start], k=x.k[:start], v=x.v[:start], g=x.g[:start], beta=x.beta[:start],
            cu_seqlens=torch.tensor([0, start], dtype=torch.int32),
        )
        _, state = reference_forward(prefix)
        assert_rel_close(f"h[{c}]", fwd.h[c].transpose(-1, -2), state[0], BOUND)

if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
