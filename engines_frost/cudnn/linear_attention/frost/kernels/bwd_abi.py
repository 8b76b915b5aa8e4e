"""The host ABI of the FROST backward kernels and their global-memory views.

All three backward kernels (bwd_config.STAGES) take one argument list,

    (q, k, v, g, beta, w, cu_seqlens, dO, initial_state, d_final_state,
     dq, dk, dv, dg, dbeta, dw, d_initial_state, ckpt, dckpt, u, dr : cute.Pointer,
     T, N : Int32, scale : Float32, stream)

each using the operands its stage reads or writes (the others may be null). Pointers carry
bwd_config's element types and alignments; ``bwd_views`` rebuilds the packed THD views from
the config plus T and N inside the launcher:
q [T,H,K], k [T,HK,K], v [T,HV,V], g [T,HO,Kg], beta [T,HO,Kb], w / dO / u / dr [T,HO,V],
cu_seqlens [N+1], initial_state / d_final_state / d_initial_state [N,HO,V,K],
dq [T,Hq',K] (Hq' = HO when q heads are grouped, else H), dk [T,Hk',K], dv [T,Hv',V],
dg like g, dbeta like beta, dw [T,HO,V], ckpt / dckpt [R,HO,V,K] with
R = bwd_config.checkpoint_rows(T, N). This file shapes the compiled kernels (keyed by the
store); imports cutlass: load lazily.
"""
from __future__ import annotations

from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass.cute import AddressSpace
from cutlass.cute.runtime import make_fake_stream, make_ptr

from cudnn.linear_attention.frost.kernels.bwd_config import (
    BWD_OPERANDS,
    CHUNK,
    FrostBwdConfig,
    bwd_operand_alignment,
    bwd_operand_dtypes,
)
from cudnn.linear_attention.frost.kernels.gmem_views import _packed
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype


def bwd_pointers(cfg: FrostBwdConfig, addresses: dict[str, int]) -> list:
    align = bwd_operand_alignment(cfg)
    return [make_ptr(cutlass_dtype(dt), addresses.get(name, 0), AddressSpace.gmem, assumed_align=align[name])
            for name, dt in bwd_operand_dtypes(cfg).items()]


def bwd_fake_args(cfg: FrostBwdConfig) -> tuple:
    """Representative arguments for cute.compile without a GPU (null pointers, T = N = 1)."""
    return (*bwd_pointers(cfg, dict.fromkeys(BWD_OPERANDS, 0)), Int32(1), Int32(1), Float32(1.0),
            make_fake_stream())


def bwd_views(c: FrostBwdConfig, ptrs, T, N):
    """Called while a @cute.jit launcher is traced: the operand views by ABI name."""
    f = c.fwd
    p = dict(zip(BWD_OPERANDS, ptrs))
    HO, K, V = f.HO, f.K, f.V
    gk = K if f.gate_per_channel else 1
    bk = K if f.beta_per_channel else 1
    rows = T // CHUNK + N
    shapes = {
        "q": (T, f.H, K), "k": (T, f.HK, K), "v": (T, f.HV, V), "g": (T, HO, gk), "beta": (T, HO, bk),
        "w": (T, HO, V), "cu_seqlens": (N + 1,), "dO": (T, HO, V), "initial_state": (N, HO, V, K),
        "d_final_state": (N, HO, V, K), "dq": (T, HO if c.q_grouped else f.H, K),
        "dk": (T, HO if c.k_grouped else f.HK, K), "dv": (T, HO if c.v_grouped else f.HV, V),
        "dg": (T, HO, gk), "dbeta": (T, HO, bk), "dw": (T, HO, V), "d_initial_state": (N, HO, V, K),
        "ckpt": (rows, HO, V, K), "dckpt": (rows, HO, V, K), "u": (T, HO, V), "dr": (T, HO, V),
    }
    return SimpleNamespace(**{name: _packed(p[name], shape) for name, shape in shapes.items()})


class FrostBwdLauncher:
    """The host entry every backward kernel class shares (put first among the bases, so it
    replaces the forward's): bwd_abi's argument list -> the views -> the class's own
    launch_kernel(m, T, N, scale, stream)."""

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_g: cute.Pointer,
                 p_beta: cute.Pointer, p_w: cute.Pointer, p_cu: cute.Pointer, p_do: cute.Pointer,
                 p_h0: cute.Pointer, p_dht: cute.Pointer, p_dq: cute.Pointer, p_dk: cute.Pointer,
                 p_dv: cute.Pointer, p_dg: cute.Pointer, p_dbeta: cute.Pointer, p_dw: cute.Pointer,
                 p_dh0: cute.Pointer, p_ckpt: cute.Pointer, p_dckpt: cute.Pointer, p_u: cute.Pointer,
                 p_dr: cute.Pointer, T: Int32, N: Int32, scale: Float32, stream: cuda.CUstream):
        m = bwd_views(self.bcfg, (p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_do, p_h0, p_dht, p_dq, p_dk, p_dv,
                                  p_dg, p_dbeta, p_dw, p_dh0, p_ckpt, p_dckpt, p_u, p_dr), T, N)
        self.launch_kernel(m, T, N, scale, stream)
