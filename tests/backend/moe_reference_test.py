"""The float64 MoE grouped matmul reference (moe_reference.py) against independent forms of
the same semantics, on random inputs of awkward sizes: dense masks and 0/1 selection
matrices instead of indexing, and for GATHER then SCATTER, each token times each of its
chosen experts straight from the routing's choices. A reference that read token_index as
an expanded slot, or scattered to token_ks * S + token_index, fails here."""
import numpy as np
import pytest

from tests.backend import moe_reference as ref

# (tokens S, experts E, top_k, K, N, idle experts)
SIZES = [(7, 5, 3, 11, 13, (1,)), (1, 3, 1, 5, 2, ()), (19, 8, 2, 3, 17, (0, 7)),
         (33, 4, 4, 9, 6, ())]
IDS = [f"S{s}_E{e}_top{k}_K{kk}_N{n}" for s, e, k, kk, n, _ in SIZES]


def case(sizes, seed):
    s, e, top_k, k, n, idle = sizes
    rng = np.random.default_rng(seed)
    routing = ref.random_routing(rng, s, e, top_k, idle)
    token = rng.standard_normal((1, s, k))
    routed = rng.standard_normal((1, routing.rows, k))
    weight = rng.standard_normal((e, k, n))
    return routing, token, routed, weight


def dense_none(rows, weight, offsets):
    """Sum over experts of (rows masked to the expert's range) @ its matrix."""
    starts = list(offsets) + [len(rows)]
    out = np.zeros((len(rows), weight.shape[-1]))
    for e in range(len(weight)):
        mask = np.zeros((len(rows), 1))
        mask[starts[e]:starts[e + 1]] = 1.0
        out += (mask * rows) @ weight[e]
    return out


def gather_matrix(index, sources):
    p = np.zeros((len(index), sources))
    p[np.arange(len(index)), index] = 1.0
    return p


@pytest.mark.parametrize("sizes", SIZES, ids=IDS)
def test_routing_is_sorted_by_expert_and_complete(sizes):
    routing, *_ = case(sizes, 1)
    starts = np.append(routing.first_token_offset, routing.rows)
    for e in range(routing.experts):
        rows = slice(starts[e], starts[e + 1])
        assert np.all(routing.choices[routing.token_index[rows], routing.token_ks[rows]] == e)
        assert np.all(np.diff(routing.token_index[rows]) > 0)
    for e in sizes[5]:
        assert routing.counts[e] == 0
    slots = routing.token_index * routing.top_k + routing.token_ks
    assert sorted(slots.tolist()) == list(range(routing.rows))


@pytest.mark.parametrize("sizes", SIZES, ids=IDS)
def test_none_matches_dense_masks(sizes):
    routing, _, routed, weight = case(sizes, 2)
    got = ref.moe_grouped_matmul(routed, weight, routing.first_token_offset)
    want = dense_none(routed[0], weight, routing.first_token_offset)
    np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sizes", SIZES, ids=IDS)
def test_gather_matches_a_selection_matrix(sizes):
    routing, token, _, weight = case(sizes, 3)
    got = ref.moe_grouped_matmul(token, weight, routing.first_token_offset, "GATHER",
                                 routing.token_index[None, :, None])
    gathered = gather_matrix(routing.token_index, routing.tokens) @ token[0]
    want = dense_none(gathered, weight, routing.first_token_offset)
    assert got.shape == (1, routing.rows, weight.shape[-1])
    np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sizes", SIZES, ids=IDS)
def test_scatter_matches_a_placement_matrix(sizes):
    routing, _, routed, weight = case(sizes, 4)
    got = ref.moe_grouped_matmul(routed, weight, routing.first_token_offset, "SCATTER",
                                 routing.token_index, routing.token_ks, routing.top_k)
    slots = routing.token_index * routing.top_k + routing.token_ks
    place = gather_matrix(slots, routing.rows).T  # [R out, R routed]
    want = place @ dense_none(routed[0], weight, routing.first_token_offset)
    np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sizes", SIZES, ids=IDS)
def test_gather_then_scatter_is_each_token_times_each_chosen_expert(sizes):
    routing, token, _, weight = case(sizes, 5)
    routed = ref.moe_grouped_matmul(token, weight, routing.first_token_offset, "GATHER",
                                    routing.token_index)
    # SCATTER of rows that already are products: multiply by identity experts
    eye = np.broadcast_to(np.eye(weight.shape[-1]), (routing.experts,) + (weight.shape[-1],) * 2)
    back = ref.moe_grouped_matmul(routed, eye, routing.first_token_offset, "SCATTER",
                                  routing.token_index, routing.token_ks, routing.top_k)
    np.testing.assert_allclose(back[0], ref.per_choice_products(token, weight, routing),
                               rtol=1e-12, atol=1e-12)


def test_a_hand_worked_example():
    """Two tokens, top-1 of two experts: token 0 -> expert 1, token 1 -> expert 0."""
    token = np.array([[[1.0, 2.0], [3.0, 4.0]]])
    weight = np.array([[[1.0], [0.0]], [[0.0], [1.0]]])  # expert 0 takes x0, expert 1 x1
    offsets, index, ks = np.array([0, 1]), np.array([1, 0]), np.array([0, 0])
    gathered = ref.moe_grouped_matmul(token, weight, offsets, "GATHER", index)
    assert gathered[0, :, 0].tolist() == [3.0, 2.0]  # row 0: token 1 by expert 0
    scattered = ref.moe_grouped_matmul(token, weight, offsets, "SCATTER", index, ks, 1)
    # routed row 0 ([1, 2] by expert 0) lands in slot 1, row 1 ([3, 4] by expert 1) in slot 0
    assert scattered[0, :, 0].tolist() == [4.0, 1.0]


@pytest.mark.parametrize("mode, kwargs, text", [
    ("GATHER", dict(token_index=np.array([0, 5])), r"token_index in \[0, 2\)"),
    ("SCATTER", dict(token_index=np.array([0, 0]), token_ks=np.array([0, 0]), top_k=1),
     "must be distinct"),
    ("SCATTER", dict(token_index=np.array([0, 1])), "needs token_index, token_ks and top_k"),
    ("COMBINE", {}, "expected one of"),
])
def test_bad_routing_is_refused(mode, kwargs, text):
    with pytest.raises(ValueError, match=text):
        ref.moe_grouped_matmul(np.ones((1, 2, 3)), np.ones((2, 3, 4)), np.array([0, 1]),
                               mode, **kwargs)


def test_offsets_that_do_not_split_the_rows_are_refused():
    with pytest.raises(ValueError, match="ascending expert ranges"):
        ref.expert_of_rows(np.array([0, 3, 2]), 4)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
