"""Float64 stand-ins for frost_fwd / frost_bwd, for CPU tests of the FROST summaries.

Each first runs the real launcher's operand checks (fwd.check_operands,
bwd.check_bwd_operands: every check but the CUDA one), so what a summary hands the
kernels must be exactly what they accept; then it computes what the kernel computes, in
float64: the token recurrence (frost_fwd), the hand-written backward's d_initial_state
(frost_bwd's chain stage, the only stage the summaries launch).
"""
from __future__ import annotations

import torch

from cudnn.linear_attention.frost.kernels import bwd as bwd_module
from cudnn.linear_attention.frost.kernels import fwd as fwd_module
from tests.reference.delta_rule import Primals, run_recurrent
from tests.reference.preprocess import Family, Options
from tests.reference.recurrent_bwd import explicit_recurrent_grads


def _family(gate_per_channel, beta_per_channel):
    return Family.GDN2 if beta_per_channel else (Family.KDA if gate_per_channel else Family.GDN)


class FakeKernels:
    """frost_fwd / frost_bwd stand-ins recording their calls."""

    def __init__(self):
        self.calls = []
        self.configs = []  # the FrostFwdConfig of each frost_fwd call, as its checks derive it

    def frost_fwd(self, *, q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state,
                  scale, use_l2norm, gate_per_channel, beta_per_channel, stream, write_output=True, **_):
        checked = fwd_module.check_operands(
            q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, out=out,
            initial_state=initial_state, final_state=final_state, use_l2norm=use_l2norm,
            gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel,
            write_output=write_output)
        self.configs.append(checked.config)
        family = _family(gate_per_channel, beta_per_channel)
        if q is None:  # a write_output=False kernel: q reaches no state, any q of its heads does
            q = torch.zeros(k.shape[0], checked.config.H, k.shape[2], dtype=k.dtype)
        x = Primals(q, k, v, g, beta, cu_seqlens, w=w, initial_state=initial_state)
        o, final = run_recurrent("fake_fwd", family, Options(scale=scale, use_qk_l2norm=use_l2norm),
                                 x, final_state is not None)
        if out is not None:
            out.copy_(o)
        if final_state is not None:
            final_state.copy_(final)
        self.calls.append(("fwd", v.shape[-1], initial_state is not None))

    def frost_bwd(self, *, q, k, v, g, beta, w, cu_seqlens, dO, initial_state, d_final_state,
                  dq, dk, dv, dg, dbeta, dw, d_initial_state, workspace, scale, use_l2norm,
                  gate_per_channel, beta_per_channel, stream, stages):
        bwd_module.check_bwd_operands(
            q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, dO=dO,
            initial_state=initial_state, d_final_state=d_final_state, dq=dq, dk=dk, dv=dv, dg=dg,
            dbeta=dbeta, dw=dw, d_initial_state=d_initial_state, use_l2norm=use_l2norm,
            gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel)
        assert stages == ("chain",), "the summary needs the state-gradient chain alone"
        need = bwd_module.frost_bwd_workspace_size(
            total_tokens=q.shape[0], num_seqs=cu_seqlens.numel() - 1, heads_q=q.shape[1],
            heads_k=k.shape[1], heads_v=v.shape[1], head_dim_k=q.shape[2], head_dim_v=v.shape[2])
        assert workspace.numel() >= need
        assert torch.count_nonzero(v) == 0 and torch.count_nonzero(initial_state) == 0
        family = _family(gate_per_channel, beta_per_channel)
        x = Primals(q, k, v, g, beta, cu_seqlens, w=w, initial_state=initial_state)
        grads = explicit_recurrent_grads("fake_bwd", family,
                                         Options(scale=scale, use_qk_l2norm=use_l2norm), x, dO,
                                         d_final_state)
        d_initial_state.copy_(grads.d_initial_state)
        self.calls.append(("bwd", stages))


def install(monkeypatch) -> "FakeKernels":
    """Replace the launchers' kernel entry points for one test; returns the recorder."""
    from cudnn.linear_attention.frost.kernels import summary
    fake = FakeKernels()
    monkeypatch.setattr(summary._fwd, "frost_fwd", fake.frost_fwd)
    monkeypatch.setattr(summary._bwd, "frost_bwd", fake.frost_bwd)
    return fake
