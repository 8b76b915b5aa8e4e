"""moe_grouped_matmul in modes NONE, GATHER and SCATTER: the output's rows follow the mode
(GATHER: one per token_index entry; NONE / SCATTER: one per token row), and every
inconsistent call is refused with the op, the argument, what was expected and what was
given. Shapes are awkward on purpose (S = 7 tokens, top-3 of 5 experts, K = 11, N = 13)."""
import pytest

import cudnn

D = cudnn.data_type
MODE = cudnn.moe_grouped_matmul_mode
S, TOP_K, E, K, N = 7, 3, 5, 11, 13
R = S * TOP_K


def graph():
    return cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT,
                         compute_data_type=D.FLOAT)


def index(g, rows=R):
    return g.tensor([1, rows, 1], data_type=D.INT32)


def weights(g):
    return g.tensor([E, K, N]), g.tensor([E, 1, 1], data_type=D.INT32)


def test_none_keeps_the_token_rows():
    g = graph()
    out = g.moe_grouped_matmul(g.tensor([1, R, K]), *weights(g))
    assert tuple(out.dim) == (1, R, N)


def test_gather_has_one_row_per_token_index_entry_not_per_token():
    g = graph()
    out = g.moe_grouped_matmul(g.tensor([1, S, K]), *weights(g), index(g), mode=MODE.GATHER)
    assert tuple(out.dim) == (1, R, N)


def test_scatter_writes_token_order_rows_as_many_as_routed_rows():
    g = graph()
    out = g.moe_grouped_matmul(g.tensor([1, R, K]), *weights(g), index(g), index(g),
                               mode=MODE.SCATTER, top_k=TOP_K)
    assert tuple(out.dim) == (1, R, N)


def _gather(g, **kw):
    args = dict(token=g.tensor([1, S, K]), weight=g.tensor([E, K, N]),
                first_token_offset=g.tensor([E, 1, 1], data_type=D.INT32),
                token_index=index(g), mode=MODE.GATHER)
    args.update(kw)
    return g.moe_grouped_matmul(**args)


def _scatter(g, **kw):
    args = dict(token=g.tensor([1, R, K]), weight=g.tensor([E, K, N]),
                first_token_offset=g.tensor([E, 1, 1], data_type=D.INT32),
                token_index=index(g), token_ks=index(g), mode=MODE.SCATTER, top_k=TOP_K)
    args.update(kw)
    return g.moe_grouped_matmul(**args)


# (id, call, argument, text in expected, text in given)
BAD = [
    ("gather_without_index", lambda g: _gather(g, token_index=None),
     "token_index", "mode GATHER reads it", "None"),
    ("gather_with_ks", lambda g: _gather(g, token_ks=index(g)),
     "token_ks", "only mode SCATTER reads it", "a tensor"),
    ("gather_index_rank", lambda g: _gather(g, token_index=g.tensor([R], data_type=D.INT32)),
     "token_index", "[1, R, 1]", f"dims [{R}]"),
    ("gather_index_float", lambda g: _gather(g, token_index=g.tensor([1, R, 1])),
     "token_index", "", ""),
    ("scatter_without_ks", lambda g: _scatter(g, token_ks=None),
     "token_ks", "mode SCATTER reads it", "None"),
    ("scatter_without_top_k", lambda g: _scatter(g, top_k=0),
     "top_k", f"divisor > 0 of the {R} routed rows", "0"),
    ("scatter_top_k_not_dividing", lambda g: _scatter(g, top_k=4),
     "top_k", f"divisor > 0 of the {R} routed rows", "4"),
    ("scatter_index_rows", lambda g: _scatter(g, token_index=index(g, S)),
     "token_index", f"[1, {R}, 1]", f"dims [1, {S}, 1]"),
    ("scatter_ks_rows", lambda g: _scatter(g, token_ks=index(g, R + 1)),
     "token_ks", f"[1, {R}, 1]", f"dims [1, {R + 1}, 1]"),
    ("none_with_index", lambda g: g.moe_grouped_matmul(
        g.tensor([1, R, K]), *weights(g), index(g)),
     "token_index", "only modes GATHER and SCATTER read it", "a tensor"),
    ("token_rank", lambda g: _gather(g, token=g.tensor([S, K])),
     "token", "[1, rows, K]", f"dims [{S}, {K}]"),
    ("weight_rank", lambda g: _gather(g, weight=g.tensor([K, N])),
     "weight", "[E, K, N]", f"dims [{K}, {N}]"),
    ("weight_k", lambda g: _gather(g, weight=g.tensor([E, K + 1, N])),
     "weight", f"token.dim[-1] = {K}", f"[{E}, {K + 1}, {N}]"),
    ("offsets_per_expert", lambda g: _gather(
        g, first_token_offset=g.tensor([E + 1, 1, 1], data_type=D.INT32)),
     "first_token_offset", f"[B * {E}, 1, 1]", f"dims [{E + 1}, 1, 1]"),
]


@pytest.mark.parametrize("call, argument, expected, given", [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_inconsistent_calls_are_refused_naming_the_argument(call, argument, expected, given):
    g = graph()
    with pytest.raises((cudnn.OpValueError, cudnn.OpTypeError)) as err:
        call(g)
    text = str(err.value)
    assert "moe_grouped_matmul" in text and argument in text, text
    assert expected in text and given in text, text


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
