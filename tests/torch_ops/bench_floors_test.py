"""bench/floors.py on a CPU: the byte floor is the bytes of the tensors a call reads and
writes (allocated here as the ops take them), the FLOP floor the products its docstring
lists (counted here by torch's FLOP counter on those products at one chunk's shapes), and
every case the bench times maps to a family."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_linear_attention as bench  # noqa: E402
import floors  # noqa: E402

T, H, K, V = 200, 3, 64, 32


def _call_tensors(family: str):
    """The op's inputs and its output for one call (bf16 rows; GDN and KDA fp32 g, beta)."""
    bf = torch.bfloat16
    rows = [torch.empty(T, H, K, dtype=bf), torch.empty(T, H, K, dtype=bf), torch.empty(T, H, V, dtype=bf)]
    if family == "gdn":
        gates = [torch.empty(T, H), torch.empty(T, H)]
    elif family == "kda":
        gates = [torch.empty(T, H, K), torch.empty(T, H)]
    else:  # GDN-2: per-channel log gate, erase gate b [T, H, K] and write gate w [T, H, V]
        gates = [torch.empty(T, H, K), torch.empty(T, H, K, dtype=bf), torch.empty(T, H, V, dtype=bf)]
    return rows + gates, torch.empty(T, H, V, dtype=bf)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize("family", floors.FAMILIES)
def test_byte_floor_is_the_bytes_a_call_moves(family):
    inputs, out = _call_tensors(family)
    fwd = _nbytes(inputs) + _nbytes([out])
    assert floors.io_bytes(family, T, H, K, V, backward=False) == fwd
    # the backward reads the inputs and dO (out's shape) and writes one gradient per input
    assert floors.io_bytes(family, T, H, K, V, backward=True) == fwd + _nbytes(inputs) + _nbytes([out]) + _nbytes(inputs)


def _count(products) -> int:
    with FlopCounterMode(display=False) as counter:
        for m, n, k in products:
            torch.empty(m, k, dtype=torch.float64) @ torch.empty(k, n, dtype=torch.float64)
    return counter.get_total_flops()


@pytest.mark.parametrize("dims", [(64, 64), (128, 128), (128, 64)])
def test_flop_floor_counts_the_listed_products(dims):
    k, v = dims
    c = floors.CHUNK
    inverse = 2 * c ** 3 / 3  # the unit-triangular inverse, not a plain product
    forward = [(c, c, k), (c, c, k), (c, v, k), (c, v, c), (c, v, k), (c, v, c), (k, v, c)]
    states = [(c, c, k), (c, v, k), (c, v, c), (k, v, c)]
    chain = [(c, c, k), (c, c, k), (c, v, c), (c, v, k), (k, v, c), (k, v, c)]
    solve = c * c * v  # dR by the triangular solve: half a C x C product
    grads = [(c, k, v)] * 3 + [(c, c, v)] * 2 + [(c, k, c)] * 4
    assert floors.chunk_flops(k, v, backward=False) == pytest.approx(_count(forward) + inverse, rel=1e-12)
    assert floors.chunk_flops(k, v, backward=True) == pytest.approx(
        _count(forward + states + chain + grads) + 2 * inverse + solve, rel=1e-12)


def test_a_call_counts_each_sequence_in_its_own_chunks():
    per_chunk = floors.chunk_flops(K, V, backward=False)
    assert floors.flops([64, 65, 1, 0], H, K, V, backward=False) == (1 + 2 + 1 + 0) * H * per_chunk


def test_floor_ms_at_given_rates():
    lengths = [100, 100]
    byte_ms, flop_ms = floors.floor_ms("kda", lengths, H, K, V, True, (2e12, 5e14))
    assert byte_ms == pytest.approx(floors.io_bytes("kda", 200, H, K, V, True) / 2e12 * 1e3)
    assert flop_ms == pytest.approx(floors.flops(lengths, H, K, V, True) / 5e14 * 1e3)


def test_every_bench_case_has_a_family():
    for case, _, _ in bench.CASES + bench.CASES_BWD:
        family, backward = bench.case_family(case)
        assert family in floors.FAMILIES and backward == ("fwd+bwd" in case)
    with pytest.raises(ValueError, match="family must be one of"):
        floors.io_bytes("rwkv", T, H, K, V, False)


def test_the_bench_prints_each_row_against_its_floors(monkeypatch, capsys):
    monkeypatch.setattr(floors, "measured_rates", lambda: (4e12, 8e14))
    args = type("Args", (), dict(len=4096, seqs=8, heads=16, dim=128))()
    rows = [("GDN fwd", "op FROST", "0.400 ms", "0.300 ms"), ("KDA fwd+bwd", "FLA 0.6", "1 ms", "error: x")]
    bench.print_floors(rows, args)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| GDN") or
             line.startswith("| KDA")]
    byte_ms = floors.io_bytes("gdn", 8 * 4096, 16, 128, 128, False) / 4e12 * 1e3
    flop_ms = floors.flops([4096] * 8, 16, 128, 128, False) / 8e14 * 1e3
    assert lines[0] == (f"| GDN fwd | op FROST | 0.300 ms | {byte_ms:.3f} ms | {byte_ms / 0.3:.0%} | "
                        f"{flop_ms:.3f} ms | {flop_ms / 0.3:.0%} |")
    assert len(lines) == 1  # the failed row is only in the bench's own table


def _fake_fla(monkeypatch):
    """fla.ops.{gated_delta_rule, kda, gdn2} as modules holding one marker function each."""
    import types
    funcs = {}
    for mod, name in (("gated_delta_rule", "chunk_gated_delta_rule"), ("kda", "chunk_kda"),
                      ("gdn2", "chunk_gdn2")):
        m = types.ModuleType(f"fla.ops.{mod}")
        funcs[name] = lambda *a, **k: None
        setattr(m, name, funcs[name])
        monkeypatch.setitem(sys.modules, f"fla.ops.{mod}", m)
    monkeypatch.setitem(sys.modules, "fla", types.ModuleType("fla"))
    monkeypatch.setitem(sys.modules, "fla.ops", types.ModuleType("fla.ops"))
    return funcs


@pytest.mark.parametrize("family", floors.FAMILIES)
def test_fla_columns_get_each_family_its_function_and_leaves(monkeypatch, family):
    """Every family's forward and fwd+bwd case has an FLA column, and _fla_call gives it
    FLA's function for the family and fresh batch-1 copies of the bench inputs (GDN-2: a
    per-channel b [1, T, H, K] and w [1, T, H, V] in the io dtype instead of beta)."""
    funcs = _fake_fla(monkeypatch)
    bf = torch.bfloat16
    vector = family != "gdn"
    inp = (torch.randn(T, H, K).to(bf), torch.randn(T, H, K).to(bf), torch.randn(T, H, V).to(bf),
           torch.randn(*((T, H, K) if vector else (T, H))), torch.rand(T, H), torch.tensor([0, 120, T]))
    fn, leaves = bench._fla_call(inp, family)
    assert fn is funcs[{"gdn": "chunk_gated_delta_rule", "kda": "chunk_kda", "gdn2": "chunk_gdn2"}[family]]
    assert len(leaves) == (6 if family == "gdn2" else 5)
    for leaf, x in zip(leaves[:4], inp[:4]):
        assert leaf.shape == (1, *x.shape) and torch.equal(leaf[0], x) and leaf.data_ptr() != x.data_ptr()
    if family == "gdn2":
        assert leaves[4].shape == (1, T, H, K) and leaves[5].shape == (1, T, H, V)
        assert leaves[4].dtype == leaves[5].dtype == bf and 0 < leaves[4].float().min() <= leaves[4].float().max() < 1
    else:
        assert torch.equal(leaves[4][0], inp[4])
    name = {"gdn": "GDN", "kda": "KDA", "gdn2": "GDN-2"}[family]
    for cases, case in ((bench.CASES, f"{name} fwd"), (bench.CASES_BWD, f"{name} fwd+bwd")):
        (impls,) = [impls for c, _, impls in cases if c == case]
        assert "FLA 0.6" in [label for label, _ in impls]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
