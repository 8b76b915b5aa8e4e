"""Fake (meta) kernels, autograd wiring and torch.compile tracing, on meta tensors: no
engine and no device needed, nothing runs."""
from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._subclasses.fake_tensor import FakeTensorMode

from la_inputs import BACKWARD_OPS, FORWARD_OPS, FUNCTIONS, make_args, state

FAMILIES = ("gdn", "kda", "gdn2")
# (H, HK, HV): equal heads, value grouping (GVA), query grouping (GQA).
HEADS = [(2, 2, 2), (2, 2, 4), (4, 2, 2), (4, 4, 2)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("H, HK, HV", HEADS)
def test_forward_result_shapes(family, H, HK, HV):
    args = make_args(family, T=12, N=3, H=H, HK=HK, HV=HV, K=16, V=8)
    o, final = FUNCTIONS[family](**args)
    HO = max(H, HV)
    assert (tuple(o.shape), o.dtype, o.device.type) == ((12, HO, 8), torch.bfloat16, "meta")
    assert (tuple(final.shape), final.dtype) == ((0,), torch.float32)  # not requested
    _, final = FUNCTIONS[family](**args, output_final_state=True)
    assert (tuple(final.shape), final.dtype) == ((3, HO, 8, 16), torch.float32)


@pytest.mark.parametrize("family", FAMILIES)
def test_final_state_takes_the_initial_state_dtype(family):
    args = make_args(family)
    h0 = state(args, torch.bfloat16)
    _, final = FUNCTIONS[family](**args, initial_state=h0, output_final_state=True)
    assert final.dtype == torch.bfloat16 and final.shape == h0.shape


@pytest.mark.parametrize("every, dtype, rows", [(4, None, 12 // 4 + 2), (5, torch.float32, 12 // 5 + 2),
                                                (64, None, 2)])
def test_checkpoint_rows_and_dtype(every, dtype, rows):
    args = make_args("gdn", T=12, N=2)
    o, final, ckpt = FUNCTIONS["gdn"](**args, checkpoint_every_n_tokens=every,
                                      checkpoint_dtype=dtype)
    assert tuple(ckpt.shape) == (rows, 2, 8, 16)
    assert ckpt.dtype == (dtype or torch.bfloat16)


@pytest.mark.parametrize("family", FAMILIES)
def test_backward_op_results_are_shaped_like_their_primals(family):
    args = make_args(family, H=2, HV=4)
    dO = torch.empty(12, 4, 8, dtype=torch.bfloat16, device="meta")
    op = getattr(torch.ops.cudnn, BACKWARD_OPS[family]).default
    grads = op(dO, *args.values(), 0.25)
    names = list(args)
    differentiable = [args[n] for n in names[:names.index("cu_seqlens")]]
    for grad, primal in zip(grads, differentiable):
        assert (grad.shape, grad.dtype) == (primal.shape, primal.dtype)
    for absent in grads[len(differentiable):]:  # no initial_state, a_log, dt_bias
        assert (tuple(absent.shape), absent.dtype) == ((0,), torch.float32)


def test_fake_tensor_mode_traces_the_ops():
    with FakeTensorMode():
        args = make_args("kda", device="cpu", H=2, HV=4)
        o, final = FUNCTIONS["kda"](**args, initial_state=state(args), output_final_state=True)
    assert type(o).__name__ == "FakeTensor"
    assert tuple(o.shape) == (12, 4, 8) and tuple(final.shape) == (2, 4, 8, 16)


@pytest.mark.parametrize("family", FAMILIES)
def test_autograd_runs_the_backward_op(family):
    args = make_args(family, requires_grad=True)
    h0 = state(args).requires_grad_(True)
    o, final = FUNCTIONS[family](**args, initial_state=h0, output_final_state=True)
    assert o.grad_fn is not None and final.grad_fn is not None
    (o.sum() + final.sum()).backward()
    for name, t in (*args.items(), ("initial_state", h0)):
        if name == "cu_seqlens":
            continue
        assert t.grad is not None and t.grad.shape == t.shape, name


def test_the_backward_op_itself_is_not_differentiable():
    args = make_args("gdn", requires_grad=True)
    dO = torch.empty(12, 2, 8, dtype=torch.bfloat16, device="meta")
    grads = torch.ops.cudnn.gated_delta_net_bwd.default(dO, *args.values(), 0.25)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        grads[0].sum().backward()


class _Layer(torch.nn.Module):
    def __init__(self, family):
        super().__init__()
        self.fn = FUNCTIONS[family]

    def forward(self, args, h0):
        o, final = self.fn(**args, initial_state=h0, output_final_state=True)
        return o.float().square().sum() + final.sum()


@pytest.mark.parametrize("family", FAMILIES)
def test_compile_fullgraph_traces_forward_and_backward(family):
    graphs = {}

    def recorder(kind):
        def compiler(gm, example_inputs):
            graphs[kind] = gm
            return make_boxed_func(gm.forward)
        return compiler

    backend = aot_autograd(fw_compiler=recorder("forward"), bw_compiler=recorder("backward"))
    layer = torch.compile(_Layer(family), fullgraph=True, backend=backend)
    args = make_args(family, requires_grad=True)
    h0 = state(args).requires_grad_(True)
    layer(args, h0).backward()
    assert args["q"].grad.shape == args["q"].shape and h0.grad.shape == h0.shape

    def targets(kind):
        return {str(n.target) for n in graphs[kind].graph.nodes if n.op == "call_function"}

    assert f"cudnn.{FORWARD_OPS[family]}.default" in targets("forward")
    assert f"cudnn.{BACKWARD_OPS[family]}.default" in targets("backward")


def _compiled_graphs(fn, *example_calls, dynamic=False):
    """Compile `fn` (fullgraph, AOT autograd) and run it on each (args, h0); return the
    recorded forward and backward FX graphs."""
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    compiled = torch.compile(fn, fullgraph=True, dynamic=dynamic,
                             backend=aot_autograd(fw_compiler=record, bw_compiler=record))
    for args, h0 in example_calls:
        compiled(args, h0).backward()
    return graphs


def _kda_loss(every):
    def loss(args, h0):
        o, final, _ = FUNCTIONS["kda"](**args, initial_state=h0, output_final_state=True,
                                       checkpoint_every_n_tokens=every)
        return o.float().sum() + final.sum()
    return loss


def _calls(*lengths):
    out = []
    for T in lengths:
        args = make_args("kda", T=T, N=2, requires_grad=True)
        out.append((args, state(args).requires_grad_(True)))
    return out


def test_dynamic_token_counts_compile_once():
    graphs = _compiled_graphs(_kda_loss(16), *_calls(32, 48, 80), dynamic=True)
    assert len(graphs) == 2  # one forward and one backward graph serve every length


@pytest.mark.parametrize("every, reused", [(16, True), (32, True), (8, False)])
def test_backward_reuses_checkpoints_at_the_family_chunk(every, reused):
    graphs = _compiled_graphs(_kda_loss(every), *_calls(48))
    op = torch.ops.cudnn.kimi_delta_attention_bwd.default
    (call,) = [n for n in graphs[-1].graph.nodes if n.target is op]
    names = [a.name for a in op._schema.arguments]
    given = dict(zip(names, call.args)) | call.kwargs
    assert (given.get("state_checkpoints") is not None) is reused
    assert given.get("checkpoint_every_n_tokens", 0) == (every if reused else 0)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
