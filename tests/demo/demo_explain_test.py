"""`demo explain` prints the explainer for each sample graph, and only for known names."""
from __future__ import annotations

import pytest

import demo_explain


def test_each_sample_is_explained_in_its_own_section():
    text = demo_explain.report()
    sections = text.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == [
        "== matmul ==", "== gdn ==", "== kda ==", "== gdn2 =="]
    matmul, gdn = sections[:2]
    assert "graph 'matmul_sample': mm (MATMUL)" in matmul
    assert "family: gdn" in gdn and "gdn_cutile [20101, manifest]" in gdn
    assert "backend: declined: No valid engine configs for GDN" in gdn


def test_the_samples_are_fresh_graphs_each_time():
    first, second = demo_explain.gdn_graph(), demo_explain.gdn_graph()
    assert first is not second and not first.is_frozen
    assert demo_explain.report(["gdn"]) == demo_explain.report(["gdn"])


def test_each_sample_says_whether_it_ran_and_why_not():
    text = demo_explain.report(["gdn"], execute=True)
    last = text.splitlines()[-1]
    assert last.startswith("run: ")
    import torch

    if not torch.cuda.is_available():
        assert last.startswith("run: not here (no CUDA device is visible")


def test_unknown_samples_are_refused():
    with pytest.raises(ValueError, match="unknown sample graph 'conv'"):
        demo_explain.report(["conv"])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
