"""fp32 staging of float16 KDA inputs: the workaround for a cuTile compiler crash.

Why: tileiras 13.4 (V13.4.92) crashes (SIGSEGV, or glibc heap-corruption aborts) while
generating sm_90 code for the KDA tier-2 WY kernel (`la_wy_fwd_kernel` with TIER = 2:
blocked scores plus the exact diagonal fallback of decay_gram.py) whenever q, k and v
are float16, at -O1, -O2 and -O3 and with float16, bfloat16 or float32 scratch alike.
The same kernel compiles with bfloat16 or float32 inputs, and for sm_100.  No single
construct is to blame: dropping either Gram call or the diagonal fallback hides it, and
fully unrolling the fallback's column loop compiles but gives a 16 MB cubin after 2.5
minutes.  GDN float16 is not affected.  The forward and the backward both launch the
kernel; the other backward kernels compile with float16 inputs.

So a KDA pass with float16 io reads float32 copies of q, k, v (and dO for the
backward), carved from the workspace and filled on the launch stream; fp16 -> fp32 is
exact.  Its stage-to-stage scratch is float32 too: TF32/fp32 keeps at least fp16's
precision and, unlike fp16, cannot overflow on large intermediate states.  Outputs are
still written into the caller's float16 buffers (tile_io.store_rows casts on store).
Since the session-5 rework of the KDA WY tiers the fp16 variant compiles with the same
tileiras (engines_cutile/tests/aot_compile_test.py,
`test_kda_fp16_tier2_wy_kernel_compiles_natively`); this staging stays until the native
float16 path has passed the GPU tests, then its use goes.
"""
from __future__ import annotations

COMPILER_BUG = ("tileiras 13.4.92 segfaults compiling the float16 KDA tier-2 WY kernel "
                "for sm_90")


def needs_fp32_staging(kda: bool, io_dtype) -> bool:
    """Whether a pass with q/k/v in `io_dtype` runs on fp32 copies (see module docstring)."""
    import torch
    return bool(kda) and io_dtype == torch.float16


def staged_name(port: str) -> str:
    """Workspace region holding the fp32 copy of input `port`."""
    return f"{port}_fp32"


def add_staging(layout, shapes: dict[str, tuple[int, ...]], float32_dtype) -> None:
    """Append one fp32 region per input port (name -> shape) to `layout`."""
    for port, shape in shapes.items():
        layout.add(staged_name(port), shape, float32_dtype, 4)


def stage_inputs(scratch, inputs: dict[str, object], stream) -> tuple:
    """fp32 copies of `inputs` (port -> tensor) in their scratch regions, in order.

    The copies are issued on `stream` (a torch CUDA stream) so they are ordered before
    the kernels launched there; CPU tensors (compile-only tests) copy directly."""
    import contextlib

    import torch
    out = []
    for port, src in inputs.items():
        dst = scratch.get(staged_name(port))
        if dst is None:
            raise ValueError(f"KDA with float16 '{port}' runs on fp32 copies ({COMPILER_BUG}); "
                             f"the scratch has no '{staged_name(port)}' region: build it "
                             "with fwd_layout / bwd_layout for io_dtype float16")
        if tuple(dst.shape) != tuple(src.shape):
            raise ValueError(f"'{port}' has shape {tuple(src.shape)} but its fp32 staging "
                             f"region was laid out as {tuple(dst.shape)} (pass the q/k and "
                             "v head counts to fwd_layout)")
        ctx = torch.cuda.stream(stream) if src.is_cuda else contextlib.nullcontext()
        with ctx:
            dst.copy_(src)
        out.append(dst)
    return tuple(out)
