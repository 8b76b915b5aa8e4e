"""The flat engine id space: ranges, predicates and the reserved family blocks."""
from __future__ import annotations

import pytest

from cudnn.engines import engine_ids as ids


@pytest.mark.parametrize("engine_id, side, backend, cpp, python, out_of_tree", [
    (0, "backend", True, False, False, False),
    (9_999, "backend", True, False, False, False),
    (10_000, "backend", False, True, False, False),
    (19_999, "backend", False, True, False, False),
    (20_000, "python", False, False, True, False),
    (29_999, "python", False, False, True, False),
    (30_000, "python", False, False, True, True),
    (-1, "backend", False, False, False, False),
])
def test_ranges_partition_the_id_space(engine_id, side, backend, cpp, python, out_of_tree):
    assert ids.side_of(engine_id) == side
    assert ids.is_backend_engine(engine_id) is backend
    assert ids.is_cpp_oss_engine(engine_id) is cpp
    assert ids.is_python_engine(engine_id) is python
    assert ids.is_out_of_tree_engine(engine_id) is out_of_tree


def test_linear_attention_families_use_the_published_bases():
    assert (ids.GDN_ID_BASE, ids.KDA_ID_BASE, ids.GDN2_ID_BASE) == (20_100, 20_200, 20_300)
    assert ids.BACKEND_HEURISTIC_ENGINE_ID == -1
    assert ids.OUT_OF_TREE_ID_BASE == ids.PYTHON_ENGINE_ID_BASE + 10_000


def test_reserved_blocks_are_disjoint_and_inside_the_in_tree_python_range():
    spans = sorted((base, base + ids.FAMILY_BLOCK) for base in ids.RESERVED_FAMILY_BLOCKS.values())
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start
    assert spans[0][0] >= ids.PYTHON_ENGINE_ID_BASE and spans[-1][1] <= ids.OUT_OF_TREE_ID_BASE
    assert all(base % ids.FAMILY_BLOCK == 0 for base, _ in spans)


@pytest.mark.parametrize("engine_id, family", [
    (20_100, "gdn"), (20_199, "gdn"), (20_200, "kda"), (20_301, "gdn2"), (21_150, "frost_norm_bwd"),
    (20_050, None), (21_200, None), (30_000, None), (5, None),
])
def test_reserved_family_of(engine_id, family):
    assert ids.reserved_family_of(engine_id) == family


@pytest.mark.parametrize("value", [True, 1.0, "20100", None])
def test_engine_ids_must_be_ints(value):
    with pytest.raises(TypeError, match="engine_id must be an int"):
        ids.as_engine_id(value, "here")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
