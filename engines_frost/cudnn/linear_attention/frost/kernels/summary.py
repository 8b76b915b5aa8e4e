"""FROST span summaries (gdn/kda/gdn2 _summary and _summary_bwd) built on the FROST
forward and backward kernels, no kernel of their own.

A span maps its entering state affinely: X_L = X_0 M^T + D (stored V-major, docs/CONTEXT_PARALLEL.md).
- final_state: the forward kernel run on the span (k, v, gates, initial_state), its
  readout discarded: the state chain is the forward's own.
- transition M^T: the forward kernel run with v = 0 (and GDN-2's w = 0), so nothing is
  written, from the identity as initial state: X_L = I M^T. The identity is K x K, so
  this run has "V" = K: v and w are zero [T, *, K] tensors whatever the real V is.
- d_initial_state: the backward's `chain` kernel alone (kernels/bwd.py stages): the state
  gradient walked backwards over the chunks from d_final_state (or zero), which reads q,
  k, the gates and dO, never v, w or the states, and writes d_initial_state from its
  registers. The other gradients' buffers are passed for the launcher's checks only; the
  chain stage never writes them, so they share one scratch region.
- the backward transition M: the forward transition run above (with q, k of the node),
  transposed.
The summaries have no q (forward) or no v (backward): a stand-in with the head count the
head rules need (HK in {H, HV}, HO = max(H, HV)) takes its place; its values never reach
a state. Scratch (zeros, the identity, discarded outputs, the backward's workspace) is
carved from the caller's workspace (`summary_workspace_layout` is exact) and set on the
caller's stream; nothing is allocated, nothing reads cu_seqlens on the host.

Costs: one forward pass for final_state, one more (V = K wide) for a transition; the
backward summary is one chain pass (plus a forward pass for its transition).

FROST_SUMMARY_NO_OUTPUT (1 by default, 0 turns it off; read when a plan is built, kept in
its SummaryShape): the forward summary's two passes run the forward kernels compiled with
write_output=False (config.py), which read no q and compute and store no output, so
there is no stand-in q and no discarded o / o_t in the workspace; the state path is the
same code, so final_state and transition are bitwise those of the default passes.
"""
from __future__ import annotations

import contextlib
import dataclasses

from cudnn.linear_attention.common.switches import binary_switch
from cudnn.linear_attention.frost.kernels import bwd as _bwd
from cudnn.linear_attention.frost.kernels import fwd as _fwd
from cudnn.linear_attention.frost.kernels.workspace_regions import ITEM_BYTES as _BYTES
from cudnn.linear_attention.frost.kernels.workspace_regions import Region, carve, pack
#: 1, unset or empty: the forward summary's passes skip the output (module docstring); 0: not
NO_OUTPUT_ENV = "FROST_SUMMARY_NO_OUTPUT"


def no_output_requested() -> bool:
    """FROST_SUMMARY_NO_OUTPUT: True for 1, unset or empty, False for 0, else ValueError."""
    return binary_switch(NO_OUTPUT_ENV, default=True)


def stand_in_heads(known: int, other: int, ho: int) -> int:
    """Heads of the absent q (forward: known = HK, other = HV) or v (backward: known = HK,
    other = H): HO when k is grouped like the absent port's partner, else k's own."""
    return ho if known == other else known


@dataclasses.dataclass(frozen=True)
class SummaryShape:
    """The static sizes of one summary node (what the layout depends on)."""
    backward: bool
    T: int
    N: int
    HO: int
    HK: int
    H_or_HV: int          # q heads (backward) or v heads (forward)
    K: int
    V: int
    io: str               # "bfloat16" | "float16"
    state: str            # dtype of the state output (the backward's zero initial state)
    transition: str | None  # dtype of the transition output (and the identity), if any
    gate_per_channel: bool
    beta_per_channel: bool
    beta: str             # beta's dtype
    # forward only: the passes run write_output=False kernels (no stand-in q, no o, no o_t)
    no_output: bool = False

    @property
    def stand_in(self) -> int:
        return stand_in_heads(self.HK, self.H_or_HV, self.HO)


def summary_workspace_layout(s: SummaryShape) -> tuple[tuple[Region, ...], int]:
    """The scratch regions of one summary call and their total bytes."""
    T, N, HO, K, V, io = s.T, s.N, s.HO, s.K, s.V, s.io
    readout = s.backward or not s.no_output  # the passes take a q and write an output
    want = []
    if not s.backward and readout and s.stand_in != s.HK:
        want.append(("q", (T, HO, K), io))                 # zero stand-in q
    if not s.backward and readout:
        want.append(("o", (T, HO, V), io))                 # the final-state run's readout
    if s.transition or s.backward:
        # zero v [T, <=HO, V or K] and w [T, HO, V or K] (read-only: one region serves both)
        want.append(("zeros", (T, HO, max(V, K) if s.backward else K), io))
    if s.transition:
        want.append(("eye", (N, HO, K, K), s.transition))
        if readout:
            want.append(("o_t", (T, HO, K), io))
        if s.backward:
            want.append(("m", (N, HO, K, K), s.transition))  # M^T, transposed into place
    if s.backward:
        gk = K if s.gate_per_channel else 1
        bk = K if s.beta_per_channel else 1
        sink = max(T * s.H_or_HV * K * _BYTES[io], T * s.HK * K * _BYTES[io],
                   T * s.stand_in * V * _BYTES[io], T * HO * gk * 4,
                   T * HO * bk * _BYTES[s.beta], T * HO * V * _BYTES[io])
        want += [("h0", (N, HO, V, K), s.state), ("sink", (sink,), "uint8"),
                 ("chain", (_bwd.frost_bwd_workspace_size(
                     total_tokens=T, num_seqs=N, heads_q=s.H_or_HV, heads_k=s.HK,
                     heads_v=s.stand_in, head_dim_k=K, head_dim_v=V),), "uint8")]
    return pack(want)


def _carve(workspace, regions):
    """workspace_regions.carve after checking that the workspace holds the last region
    (a plan sizes it when it is built, with the switches of that moment)."""
    import torch

    ws = workspace.reshape(-1).view(torch.uint8)
    if regions:
        end = regions[-1].offset + regions[-1].nbytes
        if ws.numel() < end:
            # a plan sizes the workspace when it is built: FROST_SUMMARY_NO_OUTPUT changed since?
            raise ValueError(f"frost_summary: workspace must hold at least {end} bytes for regions "
                             f"{[r.name for r in regions]} (summary_workspace_layout; {NO_OUTPUT_ENV} is "
                             f"read when a plan is built), got {ws.numel()}")
    return carve(ws, regions)


def _view(raw, shape, dtype):
    """The first elements of byte region `raw` as a packed tensor of `shape`."""
    count = 1
    for extent in shape:
        count *= extent
    return raw[:count * dtype.itemsize].view(dtype).view(shape)


def _identity(eye) -> None:
    eye.zero_()
    eye.diagonal(dim1=-2, dim2=-1).fill_(1)


def _transition_operands(*, q, k, g, beta, cu_seqlens, zeros, eye, out_t, into,
                         beta_per_channel, v_heads) -> dict:
    """frost_fwd's operands of the transition run (M^T into `into`): the forward from the
    identity `eye` with zero v (and w), V = K."""
    T, K = k.shape[0], k.shape[2]
    HO = g.shape[1]
    v0 = zeros.reshape(-1)[:T * v_heads * K].view(T, v_heads, K)
    w0 = zeros.reshape(-1)[:T * HO * K].view(T, HO, K) if beta_per_channel else None
    return dict(q=q, k=k, v=v0, g=g, beta=beta, w=w0, cu_seqlens=cu_seqlens, out=out_t,
                initial_state=eye, final_state=into)


def _transition_run(*, q, k, g, beta, cu_seqlens, zeros, eye, out_t, into, use_l2norm,
                    gate_per_channel, beta_per_channel, stream, v_heads) -> None:
    """M^T into `into`: the forward from the identity with zero v (and w), V = K."""
    _identity(eye)
    _fwd.frost_fwd(**_transition_operands(q=q, k=k, g=g, beta=beta, cu_seqlens=cu_seqlens,
                                          zeros=zeros, eye=eye, out_t=out_t, into=into,
                                          beta_per_channel=beta_per_channel, v_heads=v_heads),
                   scale=1.0, use_l2norm=use_l2norm, gate_per_channel=gate_per_channel,
                   beta_per_channel=beta_per_channel, stream=stream)


def _forward_runs(ws: dict, *, k, v, g, beta, w, cu_seqlens, initial_state, final_state,
                  transition, beta_per_channel: bool, no_output: bool = False) -> list:
    """frost_summary's launches on the carved workspace `ws`, in order, as (prepare,
    frost_fwd operands): prepare() sets what the launch reads from scratch first (the
    zero stand-in q; the zero v / w and the identity of the transition run). no_output:
    q and out are None (the write_output=False kernels read and write neither)."""
    q = None if no_output else ws.get("q", k)
    runs = [(ws["q"].zero_ if "q" in ws else _nothing,
             dict(q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens,
                  out=None if no_output else ws["o"],
                  initial_state=initial_state, final_state=final_state))]
    if transition is not None:
        zeros, eye = ws["zeros"], ws["eye"]

        def prepare() -> None:
            zeros.zero_()
            _identity(eye)
        runs.append((prepare, _transition_operands(
            q=q, k=k, g=g, beta=beta, cu_seqlens=cu_seqlens, zeros=zeros, eye=eye,
            out_t=None if no_output else ws["o_t"], into=transition,
            beta_per_channel=beta_per_channel, v_heads=v.shape[1])))
    return runs


def _nothing() -> None:
    return None


def _forward_regions(k, v, g, beta, cu_seqlens, final_state, transition, no_output: bool = False):
    T, HK, K = k.shape
    HV, V = v.shape[1], v.shape[2]
    HO, N = g.shape[1], cu_seqlens.numel() - 1
    return summary_workspace_layout(
        _shape_of(False, T, N, HO, HK, HV, K, V, k, final_state, transition, g, beta,
                  no_output=no_output))[0]


def _resolve_no_output(no_output: bool | None) -> bool:
    if no_output is None:
        return no_output_requested()
    if not isinstance(no_output, bool):
        raise ValueError(f"frost_summary: no_output must be None, True or False, got {no_output!r}")
    return no_output


def frost_summary(*, k, v, g, beta, w, cu_seqlens, initial_state, final_state, transition,
                  workspace, use_l2norm: bool, gate_per_channel: bool,
                  beta_per_channel: bool, stream, no_output: bool | None = None) -> None:
    """final_state [N, HO, V, K] (from initial_state or zero) and, when given, transition
    [N, HO, K, K] (M^T) of each sequence of cu_seqlens. Operands as frost_fwd takes them;
    workspace: at least summary_workspace_layout(...)[1] bytes (uint8, on the device), of
    the shape with this no_output (None: FROST_SUMMARY_NO_OUTPUT now; a plan passes the
    value it sized its workspace for)."""
    import torch

    no_output = _resolve_no_output(no_output)
    ws = _carve(workspace, _forward_regions(k, v, g, beta, cu_seqlens, final_state, transition,
                                            no_output))
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        for prepare, operands in _forward_runs(
                ws, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens,
                initial_state=initial_state, final_state=final_state, transition=transition,
                beta_per_channel=beta_per_channel, no_output=no_output):
            prepare()
            _fwd.frost_fwd(**operands, scale=1.0, use_l2norm=use_l2norm,
                           gate_per_channel=gate_per_channel,
                           beta_per_channel=beta_per_channel, stream=stream,
                           **({"write_output": False} if no_output else {}))


def bind_summary(*, k, v, g, beta, w, cu_seqlens, initial_state, final_state, transition,
                 workspace, use_l2norm: bool, gate_per_channel: bool, beta_per_channel: bool,
                 no_output: bool | None = None):
    """frost_summary's checks and kernel lookups done once (kernels/fwd.py bind_fwd, per
    launch), for operands and a workspace laid out like these: `launch(operands, workspace,
    stream_handle)` then runs frost_summary's fills and launches with no checks, on the
    current torch stream, which must be `stream_handle`'s (operands by frost_summary's
    names; the caller owes operands of this layout, as BoundLaunch's callers do). None
    when a launch has nothing to run (no sequences). no_output as frost_summary's, fixed
    here for every launch."""
    no_output = _resolve_no_output(no_output)
    flags = dict(use_l2norm=use_l2norm, gate_per_channel=gate_per_channel,
                 beta_per_channel=beta_per_channel)
    if no_output:
        flags["write_output"] = False
    regions = _forward_regions(k, v, g, beta, cu_seqlens, final_state, transition, no_output)
    bound = []
    for _, operands in _forward_runs(
            _carve(workspace, regions), k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens,
            initial_state=initial_state, final_state=final_state, transition=transition,
            beta_per_channel=beta_per_channel, no_output=no_output):
        launch = _fwd.bind_fwd(**operands, scale=1.0, **flags)
        if launch is None:
            return None
        names = tuple(n for n in _fwd.OPERANDS if operands[n] is not None)
        by_address = launch.pointer_launch(names)
        bound.append((names, by_address, None if by_address else launch.buffer_launch(names)))

    def run(ops: dict, scratch, stream: int) -> None:
        runs = _forward_runs(_carve(scratch, regions), **ops, beta_per_channel=beta_per_channel,
                             no_output=no_output)
        for (prepare, operands), (names, by_address, by_buffer) in zip(runs, bound):
            prepare()
            if by_address is not None:
                by_address([operands[n].data_ptr() for n in names], stream)
            else:
                by_buffer([operands[n] for n in names], stream)
    return run


def _backward_regions(q, k, g, beta, cu_seqlens, dO, d_initial_state, transition):
    T, H, K = q.shape
    HK, HO, V = k.shape[1], g.shape[1], dO.shape[2]
    N = cu_seqlens.numel() - 1
    shape = _shape_of(True, T, N, HO, HK, H, K, V, q, d_initial_state, transition, g, beta)
    return summary_workspace_layout(shape)[0], shape.stand_in


def _chain_operands(ws: dict, *, q, k, g, beta, cu_seqlens, dO, d_final_state, d_initial_state,
                    beta_per_channel: bool, stand_in: int) -> dict:
    """frost_bwd's operands of the backward summary's chain pass on the carved workspace
    `ws`: zero v (and w) of the stand-in heads, a zero initial state, every other
    gradient into one discarded sink, the chain's own workspace."""
    T, V = q.shape[0], dO.shape[2]
    HO = g.shape[1]
    zeros, sink = ws["zeros"].reshape(-1), ws["sink"]
    v0 = zeros[:T * stand_in * V].view(T, stand_in, V)
    w0 = zeros[:T * HO * V].view(T, HO, V) if beta_per_channel else None
    return dict(q=q, k=k, v=v0, g=g, beta=beta, w=w0, cu_seqlens=cu_seqlens, dO=dO,
                initial_state=ws["h0"], d_final_state=d_final_state,
                dq=_view(sink, q.shape, q.dtype), dk=_view(sink, k.shape, k.dtype),
                dv=_view(sink, v0.shape, q.dtype), dg=_view(sink, g.shape, g.dtype),
                dbeta=_view(sink, beta.shape, beta.dtype),
                dw=None if w0 is None else _view(sink, w0.shape, q.dtype),
                d_initial_state=d_initial_state, workspace=ws["chain"])


def frost_summary_bwd(*, q, k, g, beta, cu_seqlens, dO, d_final_state, d_initial_state,
                      transition, workspace, scale: float, use_l2norm: bool,
                      gate_per_channel: bool, beta_per_channel: bool, stream) -> None:
    """d_initial_state [N, HO, V, K] of L = <o, dO> + <X_L, d_final_state> and, when given,
    transition [N, HO, K, K] (M, the backward orientation)."""
    import torch

    regions, stand_in = _backward_regions(q, k, g, beta, cu_seqlens, dO, d_initial_state,
                                          transition)
    ws = _carve(workspace, regions)
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        ws["zeros"].zero_()
        ws["h0"].zero_()
        _bwd.frost_bwd(**_chain_operands(ws, q=q, k=k, g=g, beta=beta, cu_seqlens=cu_seqlens,
                                         dO=dO, d_final_state=d_final_state,
                                         d_initial_state=d_initial_state,
                                         beta_per_channel=beta_per_channel, stand_in=stand_in),
                       scale=scale, use_l2norm=use_l2norm, gate_per_channel=gate_per_channel,
                       beta_per_channel=beta_per_channel, stream=stream, stages=("chain",))
        if transition is not None:
            _transition_run(q=q, k=k, g=g, beta=beta, cu_seqlens=cu_seqlens, zeros=ws["zeros"],
                            eye=ws["eye"], out_t=ws["o_t"], into=ws["m"], use_l2norm=use_l2norm,
                            gate_per_channel=gate_per_channel,
                            beta_per_channel=beta_per_channel, stream=stream, v_heads=stand_in)
            transition.copy_(ws["m"].transpose(-1, -2))


def bind_summary_bwd(*, q, k, g, beta, cu_seqlens, dO, d_final_state, d_initial_state,
                     transition, workspace, scale: float, use_l2norm: bool,
                     gate_per_channel: bool, beta_per_channel: bool):
    """frost_summary_bwd's checks and kernel lookup done once (kernels/bwd.py bind_bwd,
    the chain stage), as bind_summary for the forward: `launch(operands, workspace,
    stream_handle)` zeroes the scratch the chain reads and launches it. None with a
    transition (its forward run and transpose: execute) or nothing to launch."""
    if transition is not None:
        return None
    regions, stand_in = _backward_regions(q, k, g, beta, cu_seqlens, dO, d_initial_state, None)
    common = dict(beta_per_channel=beta_per_channel, stand_in=stand_in)
    operands = _chain_operands(_carve(workspace, regions), q=q, k=k, g=g, beta=beta,
                               cu_seqlens=cu_seqlens, dO=dO, d_final_state=d_final_state,
                               d_initial_state=d_initial_state, **common)
    bound = _bwd.bind_bwd(**operands, scale=scale, use_l2norm=use_l2norm,
                          gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel,
                          stages=("chain",))
    if bound is None:
        return None

    def run(ops: dict, scratch, stream: int) -> None:
        ws = _carve(scratch, regions)
        ws["zeros"].zero_()
        ws["h0"].zero_()
        chain = _chain_operands(ws, **{n: ops[n] for n in _CHAIN_INPUTS}, **common)
        chain_workspace = chain.pop("workspace")
        bound.launch({**chain, "state_checkpoints": None, "values": None}, chain_workspace, stream)
    return run


_CHAIN_INPUTS = ("q", "k", "g", "beta", "cu_seqlens", "dO", "d_final_state", "d_initial_state")


def dtype_name(t) -> str | None:
    return None if t is None else str(t.dtype).removeprefix("torch.")


def _shape_of(backward, T, N, HO, HK, other, K, V, io_tensor, state, transition, g, beta,
              no_output: bool = False):
    return SummaryShape(backward=backward, T=T, N=N, HO=HO, HK=HK, H_or_HV=other, K=K, V=V,
                        io=dtype_name(io_tensor), state=dtype_name(state),
                        transition=dtype_name(transition), gate_per_channel=g.dim() == 3,
                        beta_per_channel=beta.dim() == 3, beta=dtype_name(beta),
                        no_output=no_output)
