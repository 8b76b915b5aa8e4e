"""L0: the pipelined chain's shared-memory protocol (bwd_chain_schedule.PHASES) over a run
of chunks: no phase lets one part write a tensor another part touches, every chain read
sees chunk j's data and every prep read chunk j - 1's. Pure Python (no cutlass); the
mutations below must each be caught, so the check can fail."""
import dataclasses

import pytest

from cudnn.linear_attention.frost.kernels import bwd_chain_schedule as sched

PREP = ("rows", "operands", "gram")


@dataclasses.dataclass
class Protocol:
    phases: tuple
    doubled: tuple


def _slot(tensor, copy, j, doubled):
    """Chunk j's ("cur") or the other ("nxt") copy of a doubled tensor; the only one else."""
    if tensor not in doubled:
        return (tensor, 0)
    return (tensor, j % 2 if copy == "cur" else (j + 1) % 2)


def run(protocol: Protocol, nch: int) -> None:
    """Raise AssertionError at the first race or stale read."""
    tags = {}

    def prep_alone(chunk):  # the prologue: loads, rows, operands, Gram, each behind a barrier
        for t in sched.STAGING:
            tags[(t, 0)] = chunk
        for part in PREP:
            for _, entries in protocol.phases:
                for who, op, tensor, copy in entries:
                    if who == part and op == "w":
                        tags[_slot(tensor, copy, chunk + 1, protocol.doubled)] = chunk

    prep_alone(nch - 1)
    for j in range(nch - 1, -2, -1):  # j = -1: only chunk 0's last update part (chain_prev)
        owner = {"chain": j, "chain_prev": j + 1, "loads": j - 1, **{p: j - 1 for p in PREP}}

        def runs(part):
            if part == "chain_prev":
                return j + 1 < nch
            return j >= 0 and not (part == "loads" and owner[part] < 0)

        for name, entries in protocol.phases:
            active = [e for e in entries if runs(e[0])]
            touched = {}
            for who, op, tensor, copy in active:
                touched.setdefault(_slot(tensor, copy, j, protocol.doubled), []).append((who, op))
            for slot, uses in touched.items():
                writers = {w for w, op in uses if op == "w"}
                parts = {w for w, _ in uses}
                assert not writers or len(parts) == 1, f"chunk {j} phase {name}: race on {slot}: {uses}"
            for who, op, tensor, copy in active:
                slot = _slot(tensor, copy, j, protocol.doubled)
                in_place = (who, "w") in touched[slot]
                if op == "r" and not in_place and owner[who] >= 0:  # prep of chunk -1: stale, unread
                    assert tags.get(slot) == owner[who], \
                        f"chunk {j} phase {name}: {who} reads {slot} of chunk {tags.get(slot)}, wants {owner[who]}"
            for who, op, tensor, copy in active:
                if op == "w":
                    tags[_slot(tensor, copy, j, protocol.doubled)] = owner[who]


NCH = (1, 2, 3, 8)


@pytest.mark.parametrize("nch", NCH)
def test_protocol_is_race_free_and_fresh(nch):
    run(Protocol(sched.PHASES, sched.DOUBLED), nch)


def _without(name):
    return tuple(t for t in sched.DOUBLED if t != name)


def _moved(part, tensor, src, dst):
    """PHASES with part's entries on tensor moved from phase src to phase dst."""
    phases = dict(sched.PHASES)
    move = [e for e in phases[src] if e[0] == part and e[2] == tensor]
    assert move, (part, tensor, src)
    phases[src] = tuple(e for e in phases[src] if e not in move)
    phases[dst] = phases[dst] + tuple(move)
    return tuple(phases.items())


MUTATIONS = {
    # dO^T in one copy: the rows stage of j-1 overwrites it before chunk j's update reads it
    "single dot": Protocol(sched.PHASES, _without("dot")),
    # QA^T in one copy: the operand stage writes it while the update reads it
    "single qat": Protocol(sched.PHASES, _without("qat")),
    "single alast": Protocol(sched.PHASES, _without("alast")),
    # the loads issued before the Gram's last read of the staging (BAR 3)
    "loads beside Gram": Protocol(_moved("loads", "k", "A", "C"), sched.DOUBLED),
    # the rows stage before the loads have landed (no BAR 1 between them)
    "rows in A": Protocol(_moved("rows", "q", "B", "A"), sched.DOUBLED),
    # the chain's dR reading (-M)^T in the phase where the Gram writes it
    "dR beside Gram": Protocol(_moved("chain", "mnegt", "B", "C"), sched.DOUBLED),
    # the dU reading KD in the phase where the operand stage writes it
    "dU beside operands": Protocol(_moved("chain", "kd", "A", "C"), sched.DOUBLED),
    # chunk j+1's last update part after chunk j's rows stage has rewritten dO^T's copy
    "late update": Protocol(_moved("chain_prev", "dot", "A", "C"), sched.DOUBLED),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutations_are_caught(name):
    with pytest.raises(AssertionError):
        run(MUTATIONS[name], 4)


def test_kernel_doubles_what_the_protocol_says():
    cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")  # noqa: F841
    from cudnn.linear_attention.frost.kernels import bwd_chain_pipelined as pipe
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    f = FrostFwdConfig("bfloat16", None, 4, 4, 4, 128, 128, False, False, False, True, False, False)
    shapes = {name: shape for name, _, shape, _ in pipe.smem_plan(f)}
    for name in sched.DOUBLED:
        assert shapes[name][-1] == sched.COPIES, (name, shapes[name])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
