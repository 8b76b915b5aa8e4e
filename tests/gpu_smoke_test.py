"""First check on a GPU machine: torch's CUDA path computes correctly there.

A float32 CUDA matmul against a float64 CPU reference on seeded random inputs, with awkward
sizes. Marked `gpu`: on machines without one it skips with the reason (tests/conftest.py).
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

# Frobenius relative error of a float32 product with K <= 1024 is ~sqrt(K) * 6e-8 <= 2e-6.
REL_ERR_FP32 = 1e-5


@pytest.fixture
def no_tf32():
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # TF32 would need a ~1e-3 bound
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.gpu
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (63, 65, 127), (256, 1024, 96)],
                         ids=["1x1x1", "odd_63x65x127", "tall_k_256x1024x96"])
def test_cuda_matmul_matches_float64_reference(no_tf32, m, k, n):
    gen = torch.Generator().manual_seed(1000 * m + 10 * k + n)
    a = torch.randn(m, k, dtype=torch.float64, generator=gen)
    b = torch.randn(k, n, dtype=torch.float64, generator=gen)
    ref = a @ b
    got = (a.float().cuda() @ b.float().cuda()).double().cpu()
    rel = ((got - ref).norm() / ref.norm()).item()
    assert rel < REL_ERR_FP32, f"{m}x{k}x{n}: relative error {rel:.3e}"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
