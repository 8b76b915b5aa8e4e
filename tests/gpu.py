"""Whether GPU tests can run here, and why not.

GPU tests carry `@pytest.mark.gpu` (and the Bazel tag `gpu`); tests/conftest.py skips them
with the reason below when this machine cannot run them.
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
