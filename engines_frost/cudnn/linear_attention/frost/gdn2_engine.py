"""`gdn2_frost`: the FROST forward kernel for gdn2 (per-key-channel gate, erase gate
beta [T, HO, K] and write gate w [T, HO, V] in the io dtype, in-kernel q/k L2 norm;
la_engine.py). The only gdn2 engine; declines gdn2_bwd (forward only in this version).
"""
from .engine_gates import GDN2
from .la_engine import FrostLinearAttentionEngine


class Gdn2FrostEngine(FrostLinearAttentionEngine):
    name = "gdn2_frost"
    traits = GDN2
