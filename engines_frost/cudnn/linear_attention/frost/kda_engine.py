"""`kda_frost`: the FROST forward kernel for kda (per-key-channel gate, scalar beta,
in-kernel q/k L2 norm; la_engine.py). Declines kda_bwd (forward only in this version).
"""
from .engine_gates import KDA
from .la_engine import FrostLinearAttentionEngine


class KdaFrostEngine(FrostLinearAttentionEngine):
    name = "kda_frost"
    traits = KDA
