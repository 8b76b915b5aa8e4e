"""Whether GPU tests can run here, and why not.

GPU tests carry `@pytest.mark.gpu` (and the Bazel tag `gpu`); tests/conftest.py skips them
with the reason below when this machine cannot run them. Tests of the FROST kernels also
carry `@pytest.mark.frost`: skipped, with frost_unavailable_reason, where the GPU is not one
the kernels are built for or the CuTe DSL runtime is missing.
"""

from typing import Optional


def unavailable_reason() -> Optional[str]:
    """None when torch sees a CUDA device; otherwise why GPU tests cannot run."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False)"
    return None


def frost_unavailable_reason() -> Optional[str]:
    """None when the FROST kernels can launch on the current CUDA device; otherwise why not
    (no GPU, an SM without a kernel build, no or too old a CuTe DSL)."""
    reason = unavailable_reason()
    if reason is not None:
        return reason
    from cudnn.linear_attention.frost import runtime_probe

    return runtime_probe.runtime_reason("frost")
