"""`gdn_frost`: the FROST forward kernel for gdn (scalar gate and beta; la_engine.py).

Declines gdn_bwd (forward only in this version). use_qk_l2norm is served: the kernel's
operand stage normalises q/k rows for every family (qk_hat), checked for GDN by the
pipelined layer's stage emulation and the GPU smoke/matrix.
"""
from .engine_gates import GDN
from .la_engine import FrostLinearAttentionEngine


class GdnFrostEngine(FrostLinearAttentionEngine):
    name = "gdn_frost"
    traits = GDN
