"""CUDNN_CUTILE_SLICE_TMA: the kernels' SLICE_TMA constant (CPU, nothing compiled).

The switch picks allow_tma for every load and store through a per-sequence slice (bounds
read from cu_seqlens on the device; with TMA tileiras builds their tensor maps in the
kernel, which compute-sanitizer's memcheck reports).  Checked here: the variable is
parsed where the host code builds its launches (unset / 1: TMA, 0: none, anything else a
ValueError naming it, before any launch), its value reaches the SLICE_TMA parameter of
every kernel that has one, and every sequence-slice access in the kernel sources takes its
allow_tma from that constant (so no access is missed when a kernel changes).
aot_compile_test.py compiles the kernels; the GPU side is gpu_suite.sh `cutiletma`.
"""
import ast
import inspect
import os
import sys

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from input_staging_test import aligned_bytes, inputs, launches, layout  # noqa: E402,F401

ENV = "CUDNN_CUTILE_SLICE_TMA"
GEO = dict(T=150, N=3, H=2, HV=4, K=64, V=128)
KERNELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "cudnn", "linear_attention", "cutile", "kernels")
# every kernel whose body reads or writes token-major arrays through sequence slices
SLICE_KERNELS = {"la_wy_fwd_kernel", "la_chunk_fwd_kernel", "la_chunk_bwd_dhu_kernel",
                 "la_bwd_dqkwg_kernel", "la_bwd_dqkwg_kda_kernel", "la_bwd_wy_kernel",
                 "la_bwd_wy_kda_kernel"}


def _run(backward, kda, **kw):
    from cudnn.linear_attention.cutile.kernels.bwd import chunked_bwd
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd
    io = torch.bfloat16
    T, N, H, HV, K, V = GEO.values()
    q, k, v, g, beta, cu = inputs(kda, io, **GEO)
    lay = layout(backward, kda, io, **GEO)
    s = lay.carve(aligned_bytes(lay.size))
    if backward:
        chunked_bwd(q, k, v, g, beta, cu, torch.randn(T, HV, V).to(io), torch.empty_like(q),
                    torch.empty_like(k), torch.empty_like(v), torch.empty_like(g),
                    torch.empty_like(beta), s, kda=kda, scale=0.125, stream=0, **kw)
    else:
        chunked_fwd(q, k, v, g, beta, cu, torch.empty(T, HV, V, dtype=io), s, kda=kda,
                    scale=0.125, stream=0, **kw)


def _slice_tma_args(calls):
    """{kernel name: set of the SLICE_TMA values it was launched with}."""
    from cudnn.linear_attention.cutile.kernels import (bwd_dqkwg, bwd_wy, chunk_bwd_dhu,
                                                       chunk_fwd, wy_fwd)
    fns = {name: fn for m in (bwd_dqkwg, bwd_wy, chunk_bwd_dhu, chunk_fwd, wy_fwd)
           for name, fn in vars(m).items() if name in SLICE_KERNELS}
    assert set(fns) == SLICE_KERNELS
    seen = {}
    for name, args in calls:
        if name in fns:
            params = list(inspect.signature(fns[name]).parameters)
            assert len(args) == len(params), (name, len(args), params)
            seen.setdefault(name, set()).add(args[params.index("SLICE_TMA")])
    return seen


@pytest.mark.parametrize("value, want", [(None, True), ("", True), ("1", True), ("0", False),
                                         (" 0 ", False)])
@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_env_value_reaches_every_slice_kernel(launches, monkeypatch, backward, kda, value,
                                              want):
    if value is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, value)
    _run(backward, kda)
    seen = _slice_tma_args(launches)
    expected = ({"la_wy_fwd_kernel", "la_chunk_bwd_dhu_kernel", "la_chunk_fwd_kernel"} |
                ({"la_bwd_dqkwg_kda_kernel", "la_bwd_wy_kda_kernel"} if kda else
                 {"la_bwd_dqkwg_kernel", "la_bwd_wy_kernel"})) if backward else \
        {"la_wy_fwd_kernel", "la_chunk_fwd_kernel"}
    assert set(seen) == expected
    # `is`: a bool, not a truthy stand-in (cuTile specialises on the constant's value)
    assert all(len(v) == 1 and next(iter(v)) is want for v in seen.values()), seen


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_argument_overrides_the_environment(launches, monkeypatch, backward):
    monkeypatch.setenv(ENV, "1")
    _run(backward, False, slice_tma=False)
    assert all(v == {False} for v in _slice_tma_args(launches).values())


@pytest.mark.parametrize("value", ["2", "yes", "true", "off", "00"])
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_invalid_value_names_the_variable_before_any_launch(launches, monkeypatch, backward,
                                                            value):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(ValueError, match=rf"{ENV}={value!r}: expected 1 .* or 0"):
        _run(backward, False)
    assert launches == []


# -- the kernel sources: every sequence-slice access takes allow_tma from SLICE_TMA ------

# helper -> its tile-array parameter (index) and whether it forwards SLICE_TMA last
HELPERS = {"load_rows_raw", "load_rows", "store_rows", "load_column", "load_gate_cumsum"}


def _is_slice(node, sliced):
    """node is `x.slice(...)` or a name assigned from one in this function."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "slice"
    return isinstance(node, ast.Name) and node.id in sliced


def _is_tma_const(node):
    return isinstance(node, ast.Name) and node.id == "SLICE_TMA"


def _problems(path):
    tree = ast.parse(open(path).read(), path)
    found, checked = [], 0
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        params = {a.arg for a in fn.args.args}
        sliced = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign)
                  and _is_slice(n.value, ()) for t in n.targets if isinstance(t, ast.Name)}
        # a helper's own array parameter is a sequence slice at every call (checked below)
        if fn.name in HELPERS:
            sliced |= {fn.args.args[0].arg}
        for call in [n for n in ast.walk(fn) if isinstance(n, ast.Call)]:
            f = call.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if not call.args or not _is_slice(call.args[0], sliced):
                continue
            where = f"{os.path.basename(path)}:{call.lineno} {name}"
            if isinstance(f, ast.Attribute) and name in ("load", "store"):
                kw = {k.arg: k.value for k in call.keywords}
                ok = "allow_tma" in kw and (_is_tma_const(kw["allow_tma"]) or (
                    # seq_bounds' zero fill: never TMA (its docstring says why)
                    isinstance(kw["allow_tma"], ast.Constant) and kw["allow_tma"].value is False))
                checked += 1
                if not ok:
                    found.append(f"{where}: no allow_tma=SLICE_TMA")
            elif name in HELPERS:
                checked += 1
                if not _is_tma_const(call.args[-1]):
                    found.append(f"{where}: SLICE_TMA not passed")
        if any(_is_tma_const(a) for c in ast.walk(fn) if isinstance(c, ast.Call)
               for a in c.args) and "SLICE_TMA" not in params:
            found.append(f"{os.path.basename(path)}:{fn.name} uses SLICE_TMA it does not take")
    return found, checked


def test_every_sequence_slice_access_takes_allow_tma_from_slice_tma():
    found, checked = [], 0
    for name in sorted(os.listdir(KERNELS_DIR)):
        if name.endswith(".py"):
            f, c = _problems(os.path.join(KERNELS_DIR, name))
            found += f
            checked += c
    assert not found, "\n".join(found)
    assert checked > 80   # the checker saw the kernels' accesses (over 100 today)


def test_checker_reports_a_missed_access(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("def f(x, bos, eos, SLICE_TMA: bool):\n"
                   "    xs = x.slice(axis=0, start=bos, stop=eos)\n"
                   "    a = ct.load(xs, (0, 0), shape=(4, 4))\n"
                   "    ct.store(x.slice(axis=0, start=bos, stop=eos), (0, 0), tile=a,\n"
                   "             allow_tma=SLICE_TMA)\n"
                   "    return load_rows(xs, 0, 0, 4, 4, True)\n")
    found, checked = _problems(str(src))
    assert checked == 3 and len(found) == 2
    assert "k.py:3 load: no allow_tma" in found[0] and "k.py:6 load_rows" in found[1]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
