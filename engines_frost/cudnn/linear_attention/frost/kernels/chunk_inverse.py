"""FROST pre-pass for scalar gates (GDN): A = (I + M)^-1 of every (chunk, output head) at
once, written to global memory, so a chain kernel (or the backward's) can read it instead
of forming it on its own math warpgroup one chunk at a time (kernels/NOTES.md "Next: the
chunk-local math in a kernel of its own").

An experiment kernel: the test and bench tooling build it (engines_frost/tests,
bench/frost_chunk_inverse_bench.py); the product launches nothing from here yet.

One warpgroup per CTA and one chunk per CTA, grid [R, HO] with R = T // C + N chunk rows:
chunk j of sequence n is row bos // C + n + j (checkpoints.py's rows, seq_bounds.py's
bound: R rows hold every chunk of any table, and two chunks of a well-formed table never
share a row). A CTA finds its (n, j) by a binary search of cu_seqlens (the largest n with
bos_n // C + n <= row; rows no chunk claims exit). Its stages are the four-role forward's
math warpgroup's, traced from the same methods (fwd_ws4.RawRing over the product's v3
class, output-free: the Gram is M alone): k, the gate and beta rows by cp.async (zeros past
the sequence), the inverse l2 norms of k (use_l2norm), the gate scan, M by SS wgmma with
its epilogue and the diagonal inverses (fwd_v3_gram.GramWgmma.stage_gram), A's column
blocks a warp each (fwd_ws_wy.InverseProducts.solve_products), then A's shared tile, SW128
swizzled as the chain's wgmma read it, copied out byte for byte: 8 KB per row and head in
the chain's own layout (`a_image_offset` decodes it), so a reader copies it back into an
SW128 tile as it is.

Resources (sm_90a build, frost_compile_ws4_test): 64 registers (no setmaxnreg; the test
holds it to the math role's 104), 42,208 bytes of shared memory, so five CTAs per SM.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.runtime import make_fake_stream

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_v1 import CHUNK, NBLK, PAD16, SUB, SW128, allocate_smem, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_v3 import WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_v3_gram import GramWgmma
from cudnn.linear_attention.frost.kernels.fwd_ws import zero_blocks
from cudnn.linear_attention.frost.kernels.gmem_views import _packed
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds

#: bytes of one (chunk, head) A image: C x C bf16
IMAGE_BYTES = CHUNK * CHUNK * 2
#: 16-byte copies per thread to move one image
COPIES_PER_THREAD = IMAGE_BYTES // 16 // WG_THREADS


def chunk_rows(T: int, N: int) -> int:
    """Rows of the A buffer for T tokens in N sequences: T // C + N (module docstring)."""
    return T // CHUNK + N


def a_image_offset(t: int, s: int) -> int:
    """Element offset of A[t, s] inside one image: the SW128 K-major tile of C rows of C
    bf16 (128 bytes a row; 16-byte chunk c of row t at chunk c ^ (t mod 8))."""
    chunk = (s * 2 // 16) ^ (t % 8)
    return t * CHUNK + chunk * 8 + s % 8


def smem_plan(c: FrostFwdConfig):
    """One chunk's k rows (SW128, the Gram's operand), the gate and beta rows, the inverse
    norms [2, C] (NORM_K used), -M, M's diagonal blocks, their inverses and A (SW128)."""
    C = CHUNK
    return [
        ("k", "bf16", (C, c.K), SW128), ("ainv", "bf16", (C, C), SW128),
        ("mneg", "bf16", (C, C), (C + PAD16, 1)),
        ("dinv", "bf16", (NBLK, SUB, SUB), (SUB * 24, 24, 1)),
        ("md", "f32", (NBLK, SUB, SUB), (SUB * 17, 17, 1)),
        ("g", "f32", (C, 1), (1, 1)), ("beta", "f32", (C,), (1,)), ("norm", "f32", (2, C), (C, 1)),
    ]


@cute.jit
def find_chunk(mcu: cute.Tensor, row, N, T):
    """(n, bos, eos, j) of the chunk that owns `row` (bos // C + n + j == row for the
    largest n with bos_n // C + n <= row): a binary search over the clamped table; j may
    lie past the sequence (the caller's exit)."""
    lo = Int32(0)
    hi = N - 1
    for _ in cutlass.range(32, unroll=1):  # 2^32 > any N: the loop ends early in practice
        if lo < hi:
            mid = (lo + hi + 1) // 2
            b, _e = sequence_bounds(mcu, mid, T)
            if b // CHUNK + mid <= row:
                lo = mid
            else:
                hi = mid - 1
    bos, eos = sequence_bounds(mcu, lo, T)
    return lo, bos, eos, row - (bos // CHUNK + lo)


class ChunkInverse:
    """Mixin over the four-role forward's output-free class (chunk_inverse_class): its math
    methods, its own launcher and kernel. Callable for cute.compile."""

    smem_plan = staticmethod(smem_plan)

    def __init__(self, cfg: FrostFwdConfig):
        if cfg.write_output or cfg.gate_per_channel or cfg.io_dtype != "bfloat16":
            raise ValueError(f"{type(self).__name__}: the pre-pass is built from an output-free config with scalar "
                             f"gates and bf16 io, got {cfg}")
        super().__init__(cfg)
        self.threads = WG_THREADS

    @cute.jit
    def __call__(self, p_k: cute.Pointer, p_g: cute.Pointer, p_beta: cute.Pointer, p_cu: cute.Pointer,
                 p_a: cute.Pointer, T: Int32, N: Int32, stream):
        c = self.cfg
        mk = _packed(p_k, (T, c.HK, c.K))
        mg = _packed(p_g, (T, c.HO, 1))
        mb = _packed(p_beta, (T, c.HO, 1))
        mcu = _packed(p_cu, (N + 1,))
        ma = _packed(p_a, (T // CHUNK + N, c.HO, IMAGE_BYTES // 16, 8))
        self.prepass(mk, mg, mb, mcu, ma, T, N).launch(grid=[T // CHUNK + N, c.HO, 1], block=[WG_THREADS, 1, 1],
                                                        stream=stream)

    @cute.kernel
    def prepass(self, mk: cute.Tensor, mg: cute.Tensor, mb: cute.Tensor, mcu: cute.Tensor, ma: cute.Tensor,
                T: Int32, N: Int32):
        c = self.cfg
        row, h, _ = cute.arch.block_idx()
        tid, _, _ = cute.arch.thread_idx()
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        s = allocate_smem(self.smem_plan(c))
        heads = c.heads_of(h)
        s.gmem = SimpleNamespace(q=None, k=mk, v=None, g=mg, b=mb, w=None, heads=heads)
        s.q = s.k  # read by no stage here (no output), named by the borrowed ones
        s.p = s.mneg
        n, bos, eos, j = find_chunk(mcu, row, N, T)
        t0 = bos + j * CHUNK
        if j >= 0 and t0 < eos:  # j < 0: rows below the first sequence's (a table with cu[0] > 0)
            zero_blocks(s.ainv, tid, WG_THREADS, True)  # above the diagonal blocks: never solved
            self.prefetch_rows(s, t0, eos, tid)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(0)
            cute.arch.sync_threads()
            if cutlass.const_expr(c.use_l2norm):
                if tid < CHUNK:  # k rows only (NORM_K): M and fr need no q
                    self.inverse_norms(s, tid)
            self.scan_gates_in_place(s.g, tid)
            cute.arch.fence_proxy("async.shared", space="cta")  # k: the Gram's wgmma operand
            cute.arch.sync_threads()
            thr = warp_mma().get_slice(lane)
            # GramWgmma's by name, as FourRoles.math calls it: the chain kernels' own stage_gram
            # is their main loop's (a no-op where a producer role builds the Gram)
            GramWgmma.stage_gram(self, s, mb, heads, t0, eos, Float32(1.0), thr, lane, wid)
            cute.arch.sync_threads()  # -M, M's diagonal blocks' inverses
            self.solve_products(s, thr, lane, wid)
            cute.arch.sync_threads()
            self.store_image(s.ainv, ma, row, h, tid)

    @cute.jit
    def store_image(self, s_a: cute.Tensor, ma: cute.Tensor, row, h, tid):
        """A's shared tile copied out as it lies (its bytes in order, swizzle included):
        16-byte vectors, COPIES_PER_THREAD per thread."""
        src = cute.make_tensor(cute.recast_ptr(s_a.iterator, dtype=BFloat16),
                               cute.make_layout((IMAGE_BYTES // 16, 8), stride=(8, 1)))
        for u in cutlass.range_constexpr(COPIES_PER_THREAD):
            v = tid + u * WG_THREADS
            x = cute.make_rmem_tensor((8,), BFloat16)
            cute.autovec_copy(src[v, None], x)
            cute.autovec_copy(x, ma[row, h, v, None])


def chunk_inverse_class(cfg: FrostFwdConfig):
    """The pre-pass class for cfg (an output-free GDN forward config, K = V = 128):
    ChunkInverse over the four-role forward's class on v3 (fwd_ws4.four_role_class), whose
    output-free build forms M alone, as the backward's recompute of its states does."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import version_class
    from cudnn.linear_attention.frost.kernels.fwd_ws4 import four_role_class

    base = four_role_class(version_class("v3", cfg))
    return type(f"ChunkInverse{base.__name__}", (ChunkInverse, base), {})


def prepass_config(cfg: FrostFwdConfig) -> FrostFwdConfig:
    """The pre-pass's config for a forward config: no output and no training writes (the
    Gram then builds M alone); the final state stays named (a config must write something)
    and is never touched here."""
    import dataclasses

    return dataclasses.replace(cfg, write_output=False, has_initial_state=False, has_final_state=True,
                               state_dtype=cfg.state_dtype or "float32", write_checkpoints=False,
                               write_values=False, pipelined=False)


def fake_args(cfg: FrostFwdConfig) -> tuple:
    """cute.compile's arguments without a GPU: null pointers, T = N = 1."""
    from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype
    from cutlass.cute import AddressSpace
    from cutlass.cute.runtime import make_ptr

    def ptr(dt, align):
        return make_ptr(cutlass_dtype(dt), 0, AddressSpace.gmem, assumed_align=align)

    return (ptr("bfloat16", 16), ptr("float32", 4), ptr("float32", 4), ptr("int32", 4), ptr("bfloat16", 16),
            Int32(1), Int32(1), make_fake_stream())


@functools.cache
def compile_chunk_inverse(cfg: FrostFwdConfig, arch: str = "sm_90a"):
    """cute.compile of the pre-pass for prepass_config(cfg), in the DSL's own calling
    convention (chunk_inverse_args' arguments); once per process and config."""
    import cutlass.cute as cute

    pcfg = prepass_config(cfg)
    return cute.compile(chunk_inverse_class(pcfg)(pcfg), *fake_args(pcfg), options=f"--gpu-arch {arch}")


def chunk_inverse_args(k, g, beta, cu_seqlens, images, stream=None) -> tuple:
    """compile_chunk_inverse's launch arguments from torch tensors: k [T, HK, K] bf16, g and
    beta [T, HO] fp32, cu_seqlens [N + 1] int32, images [chunk_rows(T, N), HO, C * C] bf16
    (written); fn(*args) launches."""
    import cuda.bindings.driver as cuda
    import torch
    from cutlass.cute import AddressSpace
    from cutlass.cute.runtime import make_ptr

    T, N = k.shape[0], cu_seqlens.numel() - 1
    want = (chunk_rows(T, N), g.shape[1], CHUNK * CHUNK)
    if tuple(images.shape) != want or images.dtype != torch.bfloat16:
        raise ValueError(f"chunk_inverse_args: images must be bfloat16 {list(want)}, got {images.dtype} "
                         f"{list(images.shape)}")

    def ptr(t, dt, align):
        return make_ptr(dt, t.data_ptr(), AddressSpace.gmem, assumed_align=align)

    stream = stream or torch.cuda.current_stream()
    return (ptr(k, BFloat16, 16), ptr(g, Float32, 4), ptr(beta, Float32, 4), ptr(cu_seqlens, Int32, 4),
            ptr(images, BFloat16, 16), Int32(T), Int32(N), cuda.CUstream(stream.cuda_stream))


def decode_images(images):
    """[R, HO, C * C] images (chunk_inverse_args' buffer) as A [R, HO, C, C] (torch)."""
    import torch

    idx = torch.tensor([a_image_offset(t, s) for t in range(CHUNK) for s in range(CHUNK)], device=images.device)
    return images.index_select(-1, idx).reshape(*images.shape[:-1], CHUNK, CHUNK)
