"""The GDN forward in two kernels: the pre-pass (chunk_inverse.py: A = (I + M)^-1 of every
chunk and head at once) and the four-role forward reading A from memory. An experiment;
the product launches neither (kernels/NOTES.md "The GDN forward on the pre-pass's A").

SavedInverse is fwd_ws4.RawRingInChain with two changes:
- its math warpgroup forms the factor rows and P only (math_forms_inverse False: no M, no
  diagonal inverses, no solve), so it fits 72 registers and the chain warpgroups get 208,
  where ptxas keeps their wgmma pipelined (no C7512);
- its copy warpgroup copies chunk i's A image (8 KB, the pre-pass's SW128 tile as it lay)
  into the operand set's A tile with the set's v rows, byte for byte (the set's tile is
  1024-byte aligned as the pre-pass's was, so the swizzle holds), before FULL.
The image of chunk i of sequence n (CTA x) on head h (CTA y) is row bos // C + n + i.
Launch ABI: the forward's (launch_abi.py) with the images pointer after the operands.
"""
from __future__ import annotations

import functools

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import cpasync

from cudnn.linear_attention.frost.kernels.chunk_inverse import COPIES_PER_THREAD, IMAGE_BYTES, chunk_inverse_args, \
    chunk_rows, compile_chunk_inverse
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_v1 import CHUNK
from cudnn.linear_attention.frost.kernels.fwd_v3 import WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_ws4 import COPY_TID0, RawRingInChain
from cudnn.linear_attention.frost.kernels.gmem_views import _packed, operand_views

#: (chain, math, copies) setmaxnreg: math without M and A fits 72 (sm_90a builds, no spill),
#: and at 208 the chain's wgmma are not serialized
REGISTER_SPLIT = (208, 72, 24)


class SavedInverse(RawRingInChain):
    """Mixin over the four-role class (saved_inverse_class; module docstring)."""

    inverse_from_memory = True
    split_mma_gram = REGISTER_SPLIT
    split_wgmma_gram = REGISTER_SPLIT

    def __init__(self, cfg: FrostFwdConfig):
        if not cfg.write_output or cfg.write_checkpoints or cfg.write_values:
            raise ValueError(f"{type(self).__name__}: the plain forward only (an output, no training writes), "
                             f"got {cfg}")
        super().__init__(cfg)

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_g: cute.Pointer,
                 p_beta: cute.Pointer, p_w: cute.Pointer, p_cu: cute.Pointer, p_out: cute.Pointer,
                 p_h0: cute.Pointer, p_ht: cute.Pointer, p_a: cute.Pointer, T: Int32, N: Int32, scale: Float32,
                 stream):
        c = self.cfg
        m = operand_views(c, p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, T, N)
        ma = _packed(p_a, (T // CHUNK + N, c.HO, IMAGE_BYTES // 16, 8))
        # the images ride in the kernel's U slot (s.values): write_values is off here, so
        # nothing else reads it
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu, m.out, m.h0, m.ht, m.ht, ma, scale, T, N).launch(
            grid=self.grid(N), block=[self.block_threads, 1, 1], stream=stream)

    @cute.jit
    def copy_set_extras(self, s, st, i, bos):
        """Chunk i's A image (s.values: __call__) into the set's A tile (cp.async, in the
        caller's group)."""
        n, h, _ = cute.arch.block_idx()
        row = bos // CHUNK + n + i
        ctid = cute.arch.thread_idx()[0] - COPY_TID0
        atom = cute.make_copy_atom(cpasync.CopyG2SOp(), BFloat16, num_bits_per_copy=128)
        dst = cute.make_tensor(cute.recast_ptr(st.ainv.iterator, dtype=BFloat16),
                               cute.make_layout((IMAGE_BYTES // 16, 8), stride=(8, 1)))
        for u in cutlass.range_constexpr(COPIES_PER_THREAD):
            v = ctid + u * WG_THREADS
            cute.copy(atom, s.values[row, h, v, None], dst[v, None])


def saved_inverse_class(cfg: FrostFwdConfig):
    """SavedInverse over the four-role class on v3 (fwd_ws4.four_role_class)."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import version_class
    from cudnn.linear_attention.frost.kernels.fwd_ws4 import four_role_class

    base = four_role_class(version_class("v3", cfg))
    return type(f"SavedInverse{base.__name__}", (SavedInverse, base), {})


def _with_images(args: tuple, images_ptr) -> tuple:
    """The forward's argument list (operands, T, N, scale, stream) with the images pointer
    after the operands."""
    return (*args[:-4], images_ptr, *args[-4:])


@functools.cache
def compile_saved_inverse(cfg: FrostFwdConfig, arch: str = "sm_90a"):
    """cute.compile of the chain kernel for cfg, in the DSL's own calling convention."""
    from cutlass.cute import AddressSpace
    from cutlass.cute.runtime import make_ptr

    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    images = make_ptr(BFloat16, 0, AddressSpace.gmem, assumed_align=16)
    return cute.compile(saved_inverse_class(cfg)(cfg), *_with_images(fake_args(cfg), images),
                        options=f"--gpu-arch {arch}")


class TwoKernelForward:
    """One checked forward launch (fwd.check_operands' result) as the two kernels: the
    pre-pass into a buffer of its own, then the chain. Built once, called many times
    (the buffer and both argument lists kept)."""

    def __init__(self, checked, scale: float, stream=None):
        import torch
        from cutlass.cute import AddressSpace
        from cutlass.cute.runtime import make_ptr

        from cudnn.linear_attention.frost.kernels.launch_args import real_args

        cfg, t = checked.config, checked.tensors
        T, N = checked.T, checked.N
        stream = stream or torch.cuda.current_stream()
        self.images = torch.empty(chunk_rows(T, N), cfg.HO, CHUNK * CHUNK, dtype=torch.bfloat16,
                                  device=t["k"].device)
        self.prepass = compile_chunk_inverse(cfg)
        self.chain = compile_saved_inverse(cfg)
        self.prepass_args = chunk_inverse_args(t["k"], t["g"].reshape(T, cfg.HO), t["beta"].reshape(T, cfg.HO),
                                               t["cu_seqlens"], self.images, stream)
        images = make_ptr(BFloat16, self.images.data_ptr(), AddressSpace.gmem, assumed_align=16)
        self.chain_args = _with_images(real_args(cfg, t, T, N, scale, stream), images)

    def __call__(self) -> None:
        self.prepass(*self.prepass_args)
        self.chain(*self.chain_args)
