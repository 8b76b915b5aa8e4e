"""L0: the cuTile kernels compile for sm_90 through the real host orchestration.

The forward and backward passes run on CPU tensors with `ct.launch` replaced by an
ahead-of-time compile (aot_support.CompileOnlyLaunch), so every kernel variant a
configuration launches goes through cuTile, tileiras and ptxas.  Skips (with the reason)
where the cuTile compiler is not installed; runs on build machines that have it.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aot_support import CompileOnlyLaunch, missing_toolchain  # noqa: E402

torch = pytest.importorskip("torch")
_MISSING = missing_toolchain()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))

CONFIGS = [  # (seq lens, H, HV, K, V, with initial state, l2norm), each GDN and KDA
    ([1, 63, 65], 2, 2, 64, 64, True, False),
    ([100, 37], 2, 4, 64, 128, False, True),
    ([77], 4, 2, 128, 64, True, True),
]


def _run(family, backward, lens, H, HV, K, V, h0, l2):
    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout
    kda = family == "kda"
    T, N, HO = sum(lens), len(lens), max(H, HV)
    bf, f32 = torch.bfloat16, torch.float32
    q, k = torch.zeros(T, H, K, dtype=bf), torch.zeros(T, H, K, dtype=bf)
    v = torch.zeros(T, HV, V, dtype=bf)
    g = torch.zeros((T, HO, K) if kda else (T, HO))
    beta, cu = torch.zeros(T, HO), torch.zeros(N + 1, dtype=torch.int32)
    st = torch.zeros(N, HO, V, K) if h0 else None
    kw = dict(kda=kda, io_dtype=bf, io_itemsize=2, int32_dtype=torch.int32, float32_dtype=f32)
    if backward:
        lay = bwd_layout(T, N, H, HV, K, V, **kw)
        s = {n: torch.zeros(r.shape, dtype=r.dtype) for n, r in lay.regions.items()}
        chunked_bwd(q, k, v, g, beta, cu, torch.zeros(T, HO, V, dtype=bf), torch.zeros_like(q),
                    torch.zeros_like(k), torch.zeros_like(v), torch.zeros_like(g),
                    torch.zeros_like(beta), s, kda=kda, scale=0.1, initial_state=st,
                    d_final_state=torch.zeros(N, HO, V, K), d_initial_state=st,
                    use_l2norm=l2, stream=0)
    else:
        lay = fwd_layout(T, N, HO, K, V, **kw)
        s = {n: torch.zeros(r.shape, dtype=r.dtype) for n, r in lay.regions.items()}
        chunked_fwd(q, k, v, g, beta, cu, torch.zeros(T, HO, V, dtype=bf), s, kda=kda,
                    scale=0.1, initial_state=st, final_state=st, use_l2norm=l2, stream=0)


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("config", CONFIGS, ids=["K64V64", "K64V128_vgroups", "K128V64_qgroups"])
def test_every_launched_kernel_compiles(family, backward, config):
    with CompileOnlyLaunch() as c:
        _run(family, backward, *config)
    launched = {name for name, _ in c.compiled}
    expected = {"la_wy_fwd_kernel", "chunk_table_kernel"} | (
        {"la_bwd_dqkwg_kernel", "la_bwd_wy_kernel", "la_chunk_bwd_dhu_kernel"}
        if backward else {"la_chunk_fwd_kernel"})
    assert expected <= launched
    assert all(size > 0 for _, size in c.compiled)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
