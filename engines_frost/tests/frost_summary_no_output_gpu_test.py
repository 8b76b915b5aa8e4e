"""GPU: the forward span summary on write_output=False kernels (FROST_SUMMARY_NO_OUTPUT=1,
the default, kernels/summary.py) writes bitwise the final states and transitions of the
passes with the output (FROST_SUMMARY_NO_OUTPUT=0).

The kernels compiled without the output run the same state path (config.py
write_output), so on the GPU final_state and transition must be equal bit for bit to
those of the kernels that also compute the discarded output: every family, bf16 (wgmma on
sm_90a) and fp16 (pipelined), l2norm on and off, lengths that are not multiples of 64, empty
sequences, an initial state or none, grouped heads and K != V. Each run gets a workspace
of its own layout's exact size filled with garbage first (what the passes read must be set
by their fills). Both are also held to the float64 summary reference (bf16 bound), so
two equally wrong results cannot pass. (The same through the summary op, plan and
lane: tests/torch_ops/span_split_gpu_test.py.) Skips without a
CUDA GPU or nvidia-cutlass-dsl.

  python3 -m pytest -q -s engines_frost/tests/frost_summary_no_output_gpu_test.py
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from cudnn.linear_attention.frost.kernels import summary  # noqa: E402
from tests.reference.compare import assert_rel_close  # noqa: E402
from tests.reference.inputs import InputConfig, make_inputs  # noqa: E402
from tests.reference.preprocess import Family, Options  # noqa: E402
from tests.reference.summary import summary_reference  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
BOUND = 2e-2  # bf16 / fp16 io against float64 (the summaries' GPU test holds the same order)

# (id, seq_lens, H, HK, HV, K, V)
SHAPES = [
    ("ragged", (100, 0, 257, 64, 1), 2, 2, 2, 128, 128),
    ("long", (4096, 1000), 4, 4, 4, 128, 128),
    ("value_groups_K64_V128", (63, 129, 0), 1, 1, 2, 64, 128),
    ("qk_groups_k_at_v", (190, 7), 2, 1, 1, 128, 64),
    ("qk_groups_k_at_q", (65, 300), 2, 2, 1, 64, 64),
]


def _run(family, x, config, no_output: bool, l2norm: bool):
    N, HO, K, V = config.N, config.HO, config.K, config.V
    shape = summary.SummaryShape(
        backward=False, T=config.T, N=N, HO=HO, HK=x.k.shape[1], H_or_HV=x.v.shape[1], K=K, V=V,
        io=summary.dtype_name(x.k), state="float32", transition="float32",
        gate_per_channel=family is not Family.GDN, beta_per_channel=family is Family.GDN2,
        beta=summary.dtype_name(x.beta), no_output=no_output)
    size = summary.summary_workspace_layout(shape)[1]
    workspace = torch.full((size,), 0xA5, dtype=torch.uint8, device="cuda")
    final = torch.full((N, HO, V, K), float("nan"), device="cuda")
    transition = torch.full((N, HO, K, K), float("nan"), device="cuda")
    summary.frost_summary(
        k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens,
        initial_state=x.initial_state, final_state=final, transition=transition,
        workspace=workspace, use_l2norm=l2norm, gate_per_channel=shape.gate_per_channel,
        beta_per_channel=shape.beta_per_channel, stream=torch.cuda.current_stream(),
        no_output=no_output)
    torch.cuda.synchronize()
    return final, transition, size


def _cases():
    """Every family on every shape, io dtype and (l2norm, initial state) rotating over them:
    15 cases, 4 kernels each (two passes, with and without the output), so the stage's
    compiles stay within minutes on a fresh machine."""
    flags = [(torch.bfloat16, True, False), (torch.bfloat16, False, True), (torch.float16, True, True),
             (torch.bfloat16, True, True), (torch.float16, False, False)]
    for i, (family, shape) in enumerate((f, s) for f in Family for s in SHAPES):
        io, l2norm, h0 = flags[(i + i // len(SHAPES)) % len(flags)]
        yield pytest.param(family, shape, io, l2norm, h0,
                           id=f"{family.value}-{shape[0]}-{str(io)[6:]}-l2{int(l2norm)}-h0{int(h0)}")


@pytest.mark.parametrize("family,shape,io,l2norm,h0", list(_cases()))
def test_no_output_summary_is_bitwise_the_default(family, shape, io, l2norm, h0):
    _, seq_lens, H, HK, HV, K, V = shape
    config = InputConfig(family=family, seq_lens=seq_lens, H=H, HK=HK, HV=HV, K=K, V=V, dtype=io,
                         use_qk_l2norm=l2norm, with_initial_state=h0)
    cpu = make_inputs(config, seed=11)
    x = cpu.to(device="cuda")
    final0, trans0, size0 = _run(family, x, config, False, l2norm)
    final1, trans1, size1 = _run(family, x, config, True, l2norm)
    assert size1 < size0
    assert torch.equal(final1, final0), (final1 - final0).abs().max()
    assert torch.equal(trans1, trans0), (trans1 - trans0).abs().max()
    want_final, want_trans = summary_reference(
        family, cpu.k, cpu.v, cpu.g, cpu.beta, cpu.cu_seqlens, w=cpu.w, initial_state=cpu.initial_state,
        opts=Options(use_qk_l2norm=l2norm))
    assert_rel_close("final_state", final1.cpu().double(), want_final, BOUND)
    assert_rel_close("transition", trans1.cpu().double(), want_trans, BOUND)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
