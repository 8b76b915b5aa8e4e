"""`gdn_frost`: the FROST forward kernel for gdn (scalar gate and beta; la_engine.py).

Declines gdn_bwd (forward only in this version) and use_qk_l2norm (this kernel build
does not normalise GDN's q/k; the cuTile engine serves those graphs).
"""
from .engine_gates import GDN
from .la_engine import FrostLinearAttentionEngine


class GdnFrostEngine(FrostLinearAttentionEngine):
    name = "gdn_frost"
    traits = GDN
