"""The TMA rows probe on the GPU (sm_90): every CTA's 64-row box lands where the SW128 tile
layout says (the tile read back element by element is x, bitwise), and the rows of the
last box past T come back as zeros (TMA's out-of-bounds fill). Skips without a Hopper GPU
or CuTe DSL."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                                reason="needs an sm_90 GPU")


@pytest.mark.parametrize("T, H, D", [(100, 3, 128), (64, 2, 64), (1, 1, 128), (4096 + 17, 4, 128)])
def test_tma_rows_land_in_the_sw128_tile(T, H, D):
    import cuda.bindings.driver as cuda
    from cutlass import BFloat16, Int32
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    import frost_tma_rows_probe as probe

    x = torch.randn(T, H, D, device="cuda").to(torch.bfloat16)
    rows = -(-T // probe.CHUNK) * probe.CHUNK
    out = torch.full((rows, H, D), 7.0, device="cuda", dtype=torch.bfloat16)  # every row is written

    def ptr(t):
        return make_ptr(BFloat16, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)

    kernel = probe.compile_probe(H, D)
    kernel(ptr(x), ptr(out), Int32(T), cuda.CUstream(torch.cuda.current_stream().cuda_stream))
    torch.cuda.synchronize()
    assert torch.equal(out[:T], x), (out[:T] != x).nonzero()[:8]
    assert torch.count_nonzero(out[T:]) == 0, "rows past T were not zero-filled"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
