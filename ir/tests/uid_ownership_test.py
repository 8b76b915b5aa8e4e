"""The IR owns the uid namespace: auto uids, user uids stealing auto ones, collisions."""
import numpy as np
import pytest

import cudnn


def test_auto_uids_are_unique_and_start_at_one():
    g = cudnn.pygraph()
    ts = [g.tensor([2, 2]) for _ in range(5)]
    out = g.add(ts[0], ts[1])
    uids = [t.uid for t in ts] + [out.uid]
    assert sorted(uids) == list(range(1, 7))
    assert not any(t.uid_assigned for t in ts)


def test_user_uid_steals_an_auto_uid_and_the_holder_is_renumbered():
    g = cudnn.pygraph()
    first = g.tensor([4])
    stolen = first.uid
    mine = g.tensor([4], uid=stolen)
    assert mine.uid == stolen and mine.uid_assigned
    assert first.uid != stolen and not first.uid_assigned
    assert g.find_tensor(stolen) is mine
    assert g.find_tensor(first.uid) is first
    assert len({t.uid for t in g.all_tensors()}) == 2


def test_auto_binding_moves_with_a_renumbered_holder():
    g = cudnn.pygraph()
    x = np.zeros((3, 5), dtype=np.float32)
    y = g.tensor([3, 5], data_type=cudnn.data_type.FLOAT)
    g.add(x, y)
    (auto_uid,) = g.auto_bindings()
    holder = g.find_tensor(auto_uid)
    g.tensor([1], uid=auto_uid)
    assert holder.uid != auto_uid
    assert g.auto_bindings() == {holder.uid: x}


def test_user_user_collision_raises_and_leaves_graph_unchanged():
    g = cudnn.pygraph()
    a = g.tensor([2], uid=7, name="a")
    before = g.all_tensors()
    with pytest.raises(ValueError, match="uid 7 is already user-assigned to tensor 'a'"):
        g.tensor([2], uid=7)
    assert g.all_tensors() == before and a.uid == 7
    b = g.tensor([2])
    g.exp(b)
    g.validate()
    with pytest.raises(ValueError, match="already user-assigned"):
        b.set_uid(7)
    assert g.state.validated, "a refused set_uid must not drop the validation"


def test_set_uid_steals_and_renumbers():
    g = cudnn.pygraph()
    a, b = g.tensor([2]), g.tensor([2])
    target = a.uid
    b.set_uid(target)
    assert b.uid == target and b.uid_assigned and a.uid not in (target, 0)
    assert g.find_tensor(target) is b


def test_uid_minus_one_means_auto_and_bad_uids_are_rejected():
    g = cudnn.pygraph()
    t = g.tensor([2], uid=-1)
    assert t.uid >= 1 and not t.uid_assigned
    with pytest.raises(cudnn.OpValueError, match="uid"):
        g.tensor([2], uid=-5)
    with pytest.raises(cudnn.OpTypeError, match="uid"):
        g.tensor([2], uid="3")


def test_same_value_set_uid_is_a_noop_even_when_frozen():
    g = cudnn.pygraph()
    a = g.tensor([2, 2])
    g.relu(a)
    g.validate()
    g.lifecycle.freeze()
    assert a.set_uid(a.uid) is a
    with pytest.raises(cudnn.GraphFrozenError):
        a.set_uid(a.uid + 100)


def test_auto_uids_skip_reserved_user_uids():
    g = cudnn.pygraph()
    g.tensor([1], uid=1)
    g.tensor([1], uid=2)
    t = g.tensor([1])
    assert t.uid == 3


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
