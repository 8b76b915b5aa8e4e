"""Context-parallel test cases and the per-rank check, shared by the CPU (gloo) and GPU
(NCCL) runs.

A case is one family, one set of global inputs (tests/reference/inputs.py; ragged
sequences, zero-length ones, head groups, flags) and, per world size, where the shards are
cut (global token offsets; None = an even split). Cuts fall inside sequences and inside
the reference backward's 8-token chunks, make ranks pass a state through (a sequence
covering a whole shard, chains of them, a one-token shard) and skip ranks that hold no
tokens.

`check_rank(case, world, rank, group, device, dtype, bound)` runs on every rank: it
computes the single-process result of the same ops on the whole inputs
(`single_process`), this rank's context-parallel result on its shard (`rank_forward`,
`rank_backward`), and compares (`compare_rank`) o, the final states this rank owns, and
every gradient (initial_state and the gate parameters summed over the ranks first). It
also counts this rank's messages: exactly one per direction for each cut its sequences
cross, none for a sequence that stays on one rank. in_process_world.py runs the same
pieces for all ranks in one process.
"""
from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import torch
import torch.distributed as dist

from cudnn.linear_attention import context_parallel as cp
from cudnn.linear_attention import ops
from tests.reference.compare import rel_err
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family

F64 = torch.float64


@dataclasses.dataclass(frozen=True)
class CpCase:
    name: str
    config: dict[str, Any]
    offsets: dict[int, list[int] | None]
    output_final_state: bool = True


def _config(family: Family, seq_lens: tuple[int, ...], **kw: Any) -> dict[str, Any]:
    return dict(family=family, seq_lens=seq_lens, **kw)


CASES = (
    CpCase("gdn_ragged_h0",  # lengths 13, 0, 7, 22, 2
           _config(Family.GDN, (13, 0, 7, 22, 2), H=2, HV=4, K=4, V=3, with_initial_state=True),
           {2: [0, 17, 44], 4: [0, 5, 5, 30, 44]}),
    CpCase("kda_pass_through_gqa_flags",
           _config(Family.KDA, (3, 38, 3), H=4, HK=2, HV=2, K=4, V=5, with_initial_state=True,
                   use_qk_l2norm=True, safe_gate=True, use_beta_sigmoid=True,
                   allow_neg_eigval=True, gate_lower_bound=-3.0),
           {2: [0, 21, 44], 4: [0, 9, 10, 30, 44]}),
    CpCase("gdn2_even_split_no_h0",
           _config(Family.GDN2, (30, 1, 13), H=2, K=4, V=4), {2: None, 4: None}),
    CpCase("kda_outputs_only",  # no final state: o's gradient alone reaches the cut states
           _config(Family.KDA, (9, 26, 9), H=2, K=4, V=2, with_initial_state=True),
           {2: [0, 22, 44], 4: [0, 3, 12, 36, 44]}, output_final_state=False),
    CpCase("gdn_cuts_at_boundaries",
           _config(Family.GDN, (13, 0, 7, 22, 2), H=2, K=3, V=2, with_initial_state=True,
                   scale=0.6),
           {2: [0, 20, 44], 4: [0, 13, 13, 20, 44]}),
)
# On GPUs (FROST engines): bf16, K and V in {64, 128}, no features FROST lacks (safe
# gate, beta sigmoid); cuts inside 64-token chunks. Pass-through ranks need 3+ GPUs.
GPU_CASES = (
    CpCase("gdn_gpu_ragged_h0",
           _config(Family.GDN, (300, 0, 500, 224), H=4, K=128, V=128, with_initial_state=True,
                   use_qk_l2norm=True),
           {2: [0, 437, 1024], 4: [0, 100, 437, 800, 1024]}),
    CpCase("kda_gpu_value_groups",
           _config(Family.KDA, (1000, 24), H=2, HV=4, K=64, V=128, with_initial_state=True),
           {2: [0, 333, 1024], 4: [0, 333, 500, 777, 1024]}),
    CpCase("gdn2_gpu_even_split",
           _config(Family.GDN2, (700, 1, 323), H=2, K=128, V=64, use_qk_l2norm=True),
           {2: None, 4: None}),
)
#: GPU_CASES' bound: bf16 inputs against the single-GPU op (relative L2 per tensor), the
#: FROST engines' own bound against float64; the chunking differs at a cut, so results
#: differ at bf16 rounding level
GPU_BOUND = 1e-2
FUNCTIONS = {Family.GDN: (ops.gated_delta_net, cp.gated_delta_net),
             Family.KDA: (ops.kimi_delta_attention, cp.kimi_delta_attention),
             Family.GDN2: (ops.gated_delta_net_v2, cp.gated_delta_net_v2)}


def _leaves(x, device):
    def leaf(t):
        if t is None or not t.is_floating_point():
            return None if t is None else t.to(device)
        return t.detach().to(device).requires_grad_(True)
    return {f.name: leaf(getattr(x, f.name)) for f in dataclasses.fields(x) if f.name != "config"}


def _kwargs(config: InputConfig, t: dict[str, Any], final: bool) -> dict[str, Any]:
    kw = dict(scale=config.scale, initial_state=t["initial_state"], output_final_state=final,
              use_qk_l2norm_in_kernel=config.use_qk_l2norm,
              use_beta_sigmoid_in_kernel=config.use_beta_sigmoid,
              allow_neg_eigval=config.allow_neg_eigval, safe_gate=config.safe_gate,
              gate_domain=config.gate_domain, a_log=t["a_log"], dt_bias=t["dt_bias"])
    if config.family is not Family.GDN:
        kw["gate_lower_bound"] = config.gate_lower_bound
    return kw


def _gates(t):
    return (t["g"], t["beta"]) if t["w"] is None else (t["g"], t["beta"], t["w"])


class MessageCounter:
    """Counts torch.distributed isend/irecv calls while installed."""

    def __init__(self) -> None:
        self.sends = self.receives = 0

    def __enter__(self) -> "MessageCounter":
        self._isend, self._irecv = dist.isend, dist.irecv

        def isend(*a, **k):
            self.sends += 1
            return self._isend(*a, **k)

        def irecv(*a, **k):
            self.receives += 1
            return self._irecv(*a, **k)
        dist.isend, dist.irecv = isend, irecv
        return self

    def __exit__(self, *exc) -> None:
        dist.isend, dist.irecv = self._isend, self._irecv


@dataclasses.dataclass
class Reference:
    """One case's global inputs and the single-process result (after its backward)."""
    case: CpCase
    config: InputConfig
    x: Any                     # tests.reference.inputs.Inputs (host tensors)
    whole: dict[str, Any]      # leaves of the single-process run, gradients filled
    o: torch.Tensor
    final: torch.Tensor
    dO: torch.Tensor
    d_final: torch.Tensor


def single_process(case: CpCase, device: str, dtype: torch.dtype) -> Reference:
    """The same ops on the whole inputs in this process (the result every rank matches)."""
    config = InputConfig(**case.config, dtype=dtype, gate_dtype=torch.float32 if dtype !=
                         F64 else F64, state_dtype=torch.float32 if dtype != F64 else F64,
                         param_dtype=torch.float32 if dtype != F64 else F64)
    x = make_inputs(config, seed=zlib.crc32(case.name.encode()))  # the same on every rank
    dO, d_final = (t.to(device) for t in make_grad_outputs(config, seed=7))
    single_fn, _ = FUNCTIONS[config.family]
    whole = _leaves(x, device)
    o, final = single_fn(whole["q"], whole["k"], whole["v"], *_gates(whole), whole["cu_seqlens"],
                         **_kwargs(config, whole, case.output_final_state))
    outputs, grads = ((o, final), (dO, d_final)) if case.output_final_state else ((o,), (dO,))
    torch.autograd.backward(outputs, grads)
    return Reference(case, config, x, whole, o, final, dO, d_final)


@dataclasses.dataclass
class RankRun:
    """One rank's context-parallel call: its shard leaves, parameters, outputs and plan."""
    rank: int
    lo: int
    hi: int
    shard: dict[str, Any]
    params: dict[str, Any]
    outputs: tuple[torch.Tensor, ...]   # (o, final_state), or (o,) without final states
    final: torch.Tensor                 # the returned final_state (zero-size without)
    plan: Any


def rank_forward(ref: Reference, world: int, rank: int, group: Any, device: str) -> RankRun:
    """This rank's context-parallel forward on its shard."""
    case, config, x = ref.case, ref.config, ref.x
    offsets = case.offsets[world]
    lo, hi = (offsets[rank], offsets[rank + 1]) if offsets else (
        rank * config.T // world, (rank + 1) * config.T // world)
    mine = _leaves(x, device)
    shard = {n: (None if mine[n] is None else mine[n].detach()[lo:hi].requires_grad_(True))
             for n in ("q", "k", "v", "g", "beta", "w")}
    params = {n: mine[n] for n in ("initial_state", "a_log", "dt_bias")}
    _, cp_fn = FUNCTIONS[config.family]
    o_r, final_r = cp_fn(shard["q"], shard["k"], shard["v"], *_gates(shard),
                         x.cu_seqlens.tolist(), group=group, shard_offsets=offsets,
                         **_kwargs(config, params, case.output_final_state))
    outputs = (o_r, final_r) if case.output_final_state else (o_r,)
    plan = cp.shard_plan(x.cu_seqlens, hi - lo, group, offsets)
    return RankRun(rank, lo, hi, shard, params, outputs, final_r, plan)


def rank_backward(ref: Reference, run: RankRun) -> None:
    torch.autograd.backward(run.outputs, (ref.dO[run.lo:run.hi], ref.d_final)[:len(run.outputs)])


def compare_rank(ref: Reference, run: RankRun, summed: dict[str, torch.Tensor], world: int,
                 messages: tuple[int, int], dtype: torch.dtype, bound: float
                 ) -> dict[str, float]:
    """Checks one rank against the single-process result; `summed` holds the gradients of
    initial_state / a_log / dt_bias summed over the ranks, `messages` this rank's (sends,
    receives). Raises AssertionError naming the tensor; returns the errors."""
    case, config, plan, (lo, hi) = ref.case, ref.config, run.plan, (run.lo, run.hi)
    errors = {"o": rel_err(run.outputs[0], ref.o[lo:hi])}
    owned = [p.sequence for p in plan.pieces if not p.to_right] + list(plan.empty_sequences)
    others = [n for n in range(config.N) if n not in owned]
    if case.output_final_state:
        final_r = run.final
        errors["final_state"] = rel_err(final_r[owned], ref.final[owned]) if owned else 0.0
        assert torch.count_nonzero(final_r[others]) == 0, "rows of sequences ending elsewhere"
    else:
        assert run.final.numel() == 0
    for name in ("q", "k", "v", "g", "beta", "w"):
        if run.shard[name] is not None:
            errors[f"d{name}"] = rel_err(run.shard[name].grad, ref.whole[name].grad[lo:hi])
    for name, total in summed.items():
        errors[f"d{name}"] = rel_err(total, ref.whole[name].grad)
    crossing = (plan.head is not None) + (plan.tail is not None)
    assert messages == (crossing, crossing), (
        f"rank {run.rank}: {messages[0]} sends / {messages[1]} receives, expected one per "
        f"direction for each of its {crossing} cut sequence(s)")
    # a float32 final state (no initial_state) is rounded from float64 twice: once per path
    limits = {name: (max(bound, 1e-6) if name == "final_state" and ref.final.dtype != dtype
                     else bound) for name in errors}
    bad = {n: e for n, e in errors.items() if not e <= limits[n]}
    assert not bad, f"{case.name} world {world} rank {run.rank}: errors over {bound:.0e}: {bad}"
    return errors


def check_rank(case: CpCase, world: int, rank: int, group: Any, device: str,
               dtype: torch.dtype, bound: float) -> dict[str, float]:
    """Raises AssertionError naming the tensor on a mismatch; returns the errors."""
    ref = single_process(case, device, dtype)
    with MessageCounter() as counter:
        run = rank_forward(ref, world, rank, group, device)
        rank_backward(ref, run)
    summed = {}
    for name in ("initial_state", "a_log", "dt_bias"):
        if run.params[name] is not None:
            summed[name] = run.params[name].grad.clone()
            dist.all_reduce(summed[name], group=group)  # each rank holds its part
    return compare_rank(ref, run, summed, world, (counter.sends, counter.receives), dtype,
                        bound)
