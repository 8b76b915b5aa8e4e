"""The plan list's user filters (router plan_filters.py) end to end on CPU with the
TorchMatmulEngine oracle: deselect_engines, deselect_workspace_greater_than and the note
filters bar entries without renumbering the list, the build walk skips them, the at-index
APIs refuse them, and a filter set after a build makes the next build walk again."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cudnn  # noqa: E402
from cudnn.ops.errors import cudnnGraphNotSupportedError  # noqa: E402
from tests.oracle.fake_backend import install_no_backend  # noqa: E402
from tests.oracle.matmul_graphs import (matmul_graph, operands, rel_error,  # noqa: E402
                                        workspace_for)
from tests.oracle.torch_matmul_engine import TorchMatmulEngine  # noqa: E402

NAMES = ["matmul_torch_oracle[TILEK=0]", "matmul_torch_oracle[TILEK=8]",
         "matmul_torch_oracle[TILEK=4]"]


@pytest.fixture(autouse=True)
def no_backend(monkeypatch):
    install_no_backend(monkeypatch)


def _executed_block_ks(engine):
    return [d[0] for event, d in engine.calls if event == "execute"]


def _run(g, a, b, c, seed, index=None):
    ta, tb, tc = operands(a, b, c, torch.float32, seed=seed)
    if index is None:
        g.execute({a: ta, b: tb, c: tc}, workspace=workspace_for(g))
    else:
        g.execute_plan_at_index({a: ta, b: tb, c: tc}, workspace_for(g, index), index=index)
    assert rel_error(tc, ta, tb) < 1e-5


def test_deselected_engines_are_skipped_and_the_list_keeps_its_indices():
    engine = TorchMatmulEngine(block_ks=(None, 8, 4))
    g, a, b, c = matmul_graph(engine=engine)
    assert g.deselect_engines(["TILEK=0"]) is g
    g.create_execution_plans()
    assert [g.get_plan_name_at_index(i) for i in range(3)] == NAMES
    g.build_plans()
    assert g.lifecycle.planning.selected_index == 1
    _run(g, a, b, c, seed=1)
    _run(g, a, b, c, seed=2, index=2)
    assert _executed_block_ks(engine) == [8, 4]
    for call in (lambda: g.build_plan_at_index(0),
                 lambda: g.get_workspace_size_plan_at_index(0),
                 lambda: _run(g, a, b, c, seed=3, index=0)):
        with pytest.raises(ValueError,
                           match=r"plan 0 is excluded by deselect_engines\('TILEK=0'\)"):
            call()


def test_the_explainer_marks_each_barred_entry_with_its_filter():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None, 8, 4)))
    g.create_execution_plans()
    g.deselect_engines("TILEK=8")
    g.deselect_workspace_greater_than(0)  # a limit bars nothing before the build
    ex = g.explain_plans()
    assert [row.barred for row in ex.plans] == [
        None, "excluded by deselect_engines('TILEK=8')", None]
    assert "TILEK=8]  [python 30000] knobs=MatmulKnobs(block_k=8)  (excluded by " \
        "deselect_engines('TILEK=8'))" in ex.render()


def test_a_pinned_plan_that_is_deselected_is_an_error_not_a_silent_switch():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None, 8)))
    g.create_execution_plans()
    g.select_plan(1)
    g.deselect_engines("TILEK=8")
    with pytest.raises(ValueError, match="pinned by select_plan"):
        g.build_plans()


def test_nothing_left_after_the_filters_names_each_exclusion():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None, 8)))
    g.create_execution_plans()
    g.deselect_engines(["matmul_torch"])
    with pytest.raises(cudnnGraphNotSupportedError, match=r"\[0\].*excluded.*\[1\].*excluded"):
        g.build_plans()


def test_plans_over_the_workspace_limit_decline_at_build():
    engine = TorchMatmulEngine(block_ks=(8, None, 4))
    g, a, b, c = matmul_graph(engine=engine)
    g.create_execution_plans()
    g.deselect_workspace_greater_than(0)
    g.build_plans()
    assert g.lifecycle.planning.selected_index == 1  # block_k 8 needs an accumulator
    _run(g, a, b, c, seed=4)
    with pytest.raises(cudnnGraphNotSupportedError, match="over the 0 limit"):
        g.build_plan_at_index(2)
    g.deselect_workspace_greater_than(1 << 20)  # a larger limit never loosens a smaller one
    with pytest.raises(cudnnGraphNotSupportedError, match="over the 0 limit"):
        g.build_plan_at_index(0)


class _JitMatmul(TorchMatmulEngine):
    behavior_notes = (cudnn.behavior_note.RUNTIME_COMPILATION,)
    numerical_notes = (cudnn.numerical_note.TENSOR_CORE,)


@pytest.mark.parametrize("apply, built", [
    (lambda g: g.deselect_behavior_notes(cudnn.behavior_note.RUNTIME_COMPILATION), False),
    (lambda g: g.select_behavior_notes([cudnn.behavior_note.RUNTIME_COMPILATION]), True),
    (lambda g: g.deselect_numeric_notes(cudnn.numerical_note.TENSOR_CORE), False),
    (lambda g: g.select_numeric_notes(cudnn.numerical_note.NONDETERMINISTIC), False),
    (lambda g: g.deselect_numeric_notes(cudnn.numerical_note.NONDETERMINISTIC), True),
])
def test_note_filters_bar_by_the_engines_declared_notes(apply, built):
    g, *_ = matmul_graph(engine=_JitMatmul(block_ks=(None,)))
    g.create_execution_plans()
    apply(g)
    if built:
        g.build_plans()
        assert g.state.name == "built"
    else:
        with pytest.raises(cudnnGraphNotSupportedError, match="excluded by .*_notes"):
            g.build_plans()


def test_a_filter_set_after_the_build_makes_the_next_build_walk_again():
    engine = TorchMatmulEngine(block_ks=(None, 8))
    g, a, b, c = matmul_graph(engine=engine)
    g.build()
    _run(g, a, b, c, seed=5)
    g.deselect_engines("TILEK=0")
    assert g.state.name != "built"
    with pytest.raises(RuntimeError, match="Call build"):  # no stale workspace answer
        g.get_workspace_size()
    g.build_plans()
    _run(g, a, b, c, seed=6)
    assert _executed_block_ks(engine) == [None, 8]


@pytest.mark.parametrize("call, match", [
    (lambda g: g.deselect_engines(3), "a value or a list"),
    (lambda g: g.deselect_engines([""]), "non-empty strings"),
    (lambda g: g.deselect_workspace_greater_than(-1), "int >= 0"),
    (lambda g: g.deselect_workspace_greater_than(1.5), "int >= 0"),
])
def test_bad_filter_arguments_are_refused(call, match):
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    with pytest.raises(TypeError, match=match):
        call(g)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
