"""`register_backend`: out-of-tree engines join one graph, under the id rules."""
from __future__ import annotations

import gc

import pytest

import cudnn
from cudnn.engines import graph_api
from cudnn.engines.base import BaseEngine, PlanConfig
from cudnn.engines.manifest import register_backend, registered_backends

D = cudnn.data_type


class OutOfTree(BaseEngine):
    name = "out_of_tree"

    def __init__(self, engine_id, id_end=None):
        self.engine_id = engine_id
        self.id_end = id_end


def graph():
    g = cudnn.pygraph()
    g.relu(g.tensor([2, 3], data_type=D.FLOAT, name="x")).set_output(True)
    return g


def test_registered_engines_are_listed_in_order_per_graph():
    g, other = graph(), graph()
    a, b = OutOfTree(30000), OutOfTree(30001)
    assert register_backend(g, a) is g
    graph_api.register_backend(g, b)
    assert registered_backends(g) == (a, b) and graph_api.backends(g) == [a, b]
    assert registered_backends(other) == ()


@pytest.mark.parametrize("engine_id, error, match", [
    (None, ValueError, "engine_id None"),
    ("30000", TypeError, "engine_id must be an int"),
    (True, TypeError, "engine_id must be an int"),
    (7, ValueError, "not a python engine id"),
    (15_000, ValueError, "not a python engine id"),
    (20_100, ValueError, "reserves for 'gdn'"),
    (20_250, ValueError, "reserves for 'kda'"),
    (20_000, ValueError, "in-tree python range"),
    (29_999, ValueError, "in-tree python range"),
])
def test_id_rules(engine_id, error, match):
    g = graph()
    with pytest.raises(error, match=match):
        register_backend(g, OutOfTree(engine_id))
    assert registered_backends(g) == ()


def test_ids_are_unique_and_blocks_disjoint_per_graph():
    g = graph()
    register_backend(g, OutOfTree(30000, id_end=30010))
    with pytest.raises(ValueError, match="already registered"):
        register_backend(g, OutOfTree(30000))
    with pytest.raises(ValueError, match="overlap"):
        register_backend(g, OutOfTree(30005))
    with pytest.raises(ValueError, match="overlap"):
        register_backend(g, OutOfTree(30009, id_end=30020))
    register_backend(g, OutOfTree(30010))
    assert [e.engine_id for e in registered_backends(g)] == [30000, 30010]


def test_bad_blocks_and_non_engines_are_refused():
    g = graph()
    with pytest.raises(ValueError, match="id_end 30000 must exceed"):
        register_backend(g, OutOfTree(30000, id_end=30000))
    with pytest.raises(TypeError, match="BaseEngine"):
        register_backend(g, object())


def test_no_registration_after_planning():
    class Claiming(OutOfTree):
        def propose_plans(self, graph):
            return [PlanConfig(self.engine_id)]

        def execute(self, graph, data, ctx):
            pass

    g = graph()
    register_backend(g, Claiming(30000))
    g.create_execution_plans()
    with pytest.raises(RuntimeError, match="after create_execution_plans"):
        register_backend(g, OutOfTree(30100))


def test_registrations_do_not_keep_graphs_alive():
    import weakref
    g = graph()
    register_backend(g, OutOfTree(30000))
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is None


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
