"""What each forward of a greedy generation through a tiny Qwen3-Next LM did, recorded on
both paths (the drop-in installed, and transformers' torch path) so that a per-step logits
difference can be traced to the tensor that caused it (gpu_test.py, greedy_diagnose.py).

`replay(model, prompt, steps)` runs the generation the way the tests do (prefill, then one
token per forward, the drop-in's argmax fed to both paths, each path with its own cache)
and returns one `StepPair` per forward. Each side records:
- every gated-delta-rule call of the model (`GdnCall`): its FLA-layout arguments and
  results, and which cached graph served it and how (the op's launch lane, or the graph's
  executor path when the lane declined or there is none), with the plan's name;
- per MoE layer, the router's logits and chosen experts for the last token: a top-k router
  is discontinuous, so where two experts' logits are nearly tied a rounding-sized
  difference upstream swaps the expert and that token's MLP output entirely;
- per decoder layer, its output for the last token;
- the last token's logits.

`float64_gdn(call)` recomputes a call in float64 from its own captured inputs
(tests/reference, the recurrence), so each side's o and final state is judged on the
inputs it was given, and `compare(pair)` puts it all in one row per step.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tests.reference.compare import rel_err
from tests.reference.gdn import naive_recurrent_gdn

#: transformers' Qwen3-Next module attributes its GatedDeltaNet layer calls (the drop-in
#: under install(), the torch functions under torch_path()).
GDN_FUNCTIONS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")


@dataclasses.dataclass
class GdnCall:
    """One gated-delta-rule call: FLA-layout inputs and results (detached copies)."""
    function: str
    inputs: dict[str, Any]
    o: torch.Tensor
    final_state: torch.Tensor | None
    #: (plan name, "lane" | "executor") per cached graph the call ran (empty on the torch path).
    runs: list[tuple[str, str]]
    #: address modulo 16 of each tensor argument as the caller passed it.
    alignment: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Forward:
    calls: list[GdnCall] = dataclasses.field(default_factory=list)
    #: (layer, router logits [E] float32, chosen experts [k]) of the last token per MoE layer.
    routers: list[tuple[int, torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=list)
    #: decoder layer outputs of the last token, float32.
    hidden: list[torch.Tensor] = dataclasses.field(default_factory=list)
    logits: torch.Tensor | None = None


@dataclasses.dataclass
class StepPair:
    step: int
    tokens: int
    mine: Forward
    theirs: Forward


def _copy(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def _named_inputs(args: tuple, kwargs: dict) -> dict[str, Any]:
    """transformers passes q, k, v by position (as query, key, value) and the rest by name."""
    named = {("q", "k", "v")[i]: a for i, a in enumerate(args[:3])}
    for name, value in kwargs.items():
        named[{"query": "q", "key": "k", "value": "v"}.get(name, name)] = value
    return named


class _GraphRuns:
    """Records, while active, which cached graph of the ops ran and whether its launch lane
    took the call (a lane answers None when it declines; the graph then runs its executor)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        from cudnn.linear_attention.ops._graph_runner import CachedGraph
        from cudnn.linear_attention.ops._launch_lane import LaunchLane
        run, lane_call = CachedGraph.run, LaunchLane.__call__
        log, took = self.log, [False]

        def traced_lane(lane, *args, **kwargs):
            out = lane_call(lane, *args, **kwargs)
            took[0] = out is not None
            return out

        def traced_run(graph, *args, **kwargs):
            took[0] = False
            out = run(graph, *args, **kwargs)
            how = "lane" if took[0] else "executor" if graph.lane is not None \
                else "executor (no lane)"
            log.append((graph.plan, how))
            return out

        CachedGraph.run, LaunchLane.__call__ = traced_run, traced_lane
        try:
            yield
        finally:
            CachedGraph.run, LaunchLane.__call__ = run, lane_call


@contextlib.contextmanager
def recording(model: torch.nn.Module, into: Forward) -> Iterator[Forward]:
    """Record one forward of `model` into `into` (enter it inside installed() or
    torch_path(): it wraps whichever GDN functions the module holds then)."""
    from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next
    runs = _GraphRuns()
    saved = {name: getattr(qwen3_next, name) for name in GDN_FUNCTIONS}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def traced(*args: Any, **kwargs: Any) -> Any:
            start = len(runs.log)
            named = _named_inputs(args, kwargs)
            alignment = {n: t.data_ptr() & 15 for n, t in named.items()
                         if isinstance(t, torch.Tensor)}
            inputs = {n: _copy(t) for n, t in named.items()}  # before the call: S0 intact
            o, final = fn(*args, **kwargs)
            into.calls.append(GdnCall(name, inputs, _copy(o), _copy(final),
                                      runs.log[start:], alignment))
            return o, final
        return traced

    hooks = []
    for index, layer in enumerate(model.model.layers):
        hooks.append(layer.register_forward_hook(
            lambda _m, _i, out: into.hidden.append(
                (out[0] if isinstance(out, tuple) else out)[:, -1].detach().float().clone())))
        mlp = getattr(layer, "mlp", None)
        if mlp is not None and hasattr(mlp, "gate") and hasattr(mlp, "experts"):
            hooks.append(mlp.gate.register_forward_hook(
                lambda _m, _i, out, index=index: into.routers.append(
                    (index, out[0][-1].detach().float().clone(), out[2][-1].detach().clone()))))
    for name in GDN_FUNCTIONS:
        setattr(qwen3_next, name, wrap(name, saved[name]))
    try:
        with runs.active():
            yield into
    finally:
        for name, fn in saved.items():
            setattr(qwen3_next, name, fn)
        for hook in hooks:
            hook.remove()


def replay(model: torch.nn.Module, prompt: torch.Tensor, steps: int,
           cache_factory: Callable[[], Any]) -> list[StepPair]:
    """Greedy generation as the tests run it, recorded: the prefill, then `steps` forwards
    of one token (the drop-in's argmax, fed to both paths)."""
    import cudnn.linear_attention.fla as cfla
    from tests.fla.transformers_reference import torch_path
    cache, ref_cache = cache_factory(), cache_factory()
    pairs: list[StepPair] = []
    tokens = prompt
    with torch.no_grad():
        for step in range(steps + 1):
            mine, theirs = Forward(), Forward()
            with cfla.installed(), recording(model, mine):
                mine.logits = model(input_ids=tokens, past_key_values=cache,
                                    use_cache=True).logits[:, -1].float()
            with torch_path(), recording(model, theirs):
                theirs.logits = model(input_ids=tokens, past_key_values=ref_cache,
                                      use_cache=True).logits[:, -1].float()
            pairs.append(StepPair(step, tokens.shape[1], mine, theirs))
            tokens = mine.logits.argmax(-1, keepdim=True)
    return pairs


def float64_gdn(call: GdnCall) -> tuple[torch.Tensor, torch.Tensor]:
    """The call's o [B, T, HV, V] and final state [B, HV, K, V] in float64, from its captured
    FLA-layout inputs (q/k repeated to the value heads when fewer, as the models do)."""
    x = call.inputs
    q, k, v = x["q"], x["k"], x["v"]
    B, T, HV = v.shape[0], v.shape[1], v.shape[2]
    if q.shape[2] != HV:
        q, k = (t.repeat_interleave(HV // t.shape[2], dim=2) for t in (q, k))
    flat = lambda t: t.reshape(B * T, *t.shape[2:])  # noqa: E731
    cu = torch.arange(0, B * T + 1, T, device=q.device)
    state = x.get("initial_state")
    o, final = naive_recurrent_gdn(
        flat(q), flat(k), flat(v), flat(x["g"]), flat(x["beta"]), cu, scale=x.get("scale"),
        initial_state=None if state is None else state.transpose(-1, -2),
        output_final_state=True, use_qk_l2norm=bool(x.get("use_qk_l2norm_in_kernel")))
    return o.reshape(B, T, *o.shape[1:]), final.transpose(-1, -2)


def input_stats(call: GdnCall) -> str:
    x = call.inputs
    qn = x["q"].float().norm(dim=-1)
    kn = x["k"].float().norm(dim=-1)
    beta = x["beta"].float()
    state = x.get("initial_state")
    return (f"|q| {qn.min().item():.3g}..{qn.max().item():.3g} "
            f"|k| {kn.min().item():.3g}..{kn.max().item():.3g} "
            f"g min {x['g'].float().min().item():.3g} "
            f"beta {beta.min().item():.3g}..{beta.max().item():.3g} "
            f"|S0| {0.0 if state is None else state.float().norm().item():.3g} addr%16 "
            + " ".join(f"{n}{a}" for n, a in call.alignment.items()))


@dataclasses.dataclass
class StepReport:
    step: int
    logits: float
    #: per decoder layer: relative error of its last-token output, drop-in vs torch path.
    hidden: list[float]
    #: (layer, drop-in's experts, torch path's experts, torch path's top-2 logit margin)
    #: where the two paths' routers chose differently.
    router_flips: list[tuple[int, list[int], list[int], float]]
    #: smallest top-2 router logit margin of the step (torch path), None without MoE.
    router_margin: float | None
    #: per GDN call: errors of the drop-in's and the torch path's o and final state
    #: against float64 on each one's own inputs, and of o between the two paths.
    calls: list[dict[str, Any]]

    def worst_kernel_error(self) -> float:
        return max((max(c["o mine"], c["state mine"]) for c in self.calls), default=0.0)

    def line(self) -> str:
        flips = "".join(f" ROUTER FLIP layer {l}: mine {a} torch {b} (margin {m:.2g})"
                        for l, a, b, m in self.router_flips)
        margin = "" if self.router_margin is None else f" min margin {self.router_margin:.3g}"
        head = (f"step {self.step:2d}: logits {self.logits:.2e} hidden "
                f"[{', '.join(f'{e:.1e}' for e in self.hidden)}]{margin}{flips}")
        rows = [head]
        for c in self.calls:
            rows.append(
                f"    {c['function']} via {c['runs']}: o mine {c['o mine']:.1e} torch "
                f"{c['o torch']:.1e} mine-vs-torch {c['o mine vs torch']:.1e}; state mine "
                f"{c['state mine']:.1e} torch {c['state torch']:.1e}; S0 mine-vs-torch "
                f"{c['S0 mine vs torch']:.1e}; {c['stats']}")
        return "\n".join(rows)


def _margin(logits: torch.Tensor) -> float:
    if logits.numel() < 2:
        return float("inf")
    top = logits.topk(2).values
    return (top[0] - top[1]).item()


def compare(pair: StepPair) -> StepReport:
    mine, theirs = pair.mine, pair.theirs
    flips = [(layer, a.tolist(), b.tolist(), _margin(lb))
             for (layer, _, a), (_, lb, b) in zip(mine.routers, theirs.routers)
             if not torch.equal(a, b)]
    margins = [_margin(lb) for _, lb, _ in theirs.routers]
    calls = []
    for a, b in zip(mine.calls, theirs.calls):
        o_a, s_a = float64_gdn(a)
        o_b, s_b = float64_gdn(b)
        s0a, s0b = a.inputs.get("initial_state"), b.inputs.get("initial_state")
        calls.append({
            "function": a.function.removeprefix("torch_"),
            "runs": ", ".join(f"{plan} {how}" for plan, how in a.runs) or "-",
            "o mine": rel_err(a.o, o_a), "o torch": rel_err(b.o, o_b),
            "o mine vs torch": rel_err(a.o, b.o),
            "state mine": rel_err(a.final_state, s_a) if a.final_state is not None else 0.0,
            "state torch": rel_err(b.final_state, s_b) if b.final_state is not None else 0.0,
            "S0 mine vs torch": (rel_err(s0a, s0b) if s0a is not None and s0b is not None
                                 else 0.0),
            "stats": input_stats(a),
        })
    return StepReport(pair.step, rel_err(mine.logits, theirs.logits),
                      [rel_err(x, y) for x, y in zip(mine.hidden, theirs.hidden)],
                      flips, min(margins) if margins else None, calls)
