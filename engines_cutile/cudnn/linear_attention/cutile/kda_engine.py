"""`kda_cutile`: chunked cuTile kernels for kda (forward) and kda_bwd (la_engine.py)."""
from .la_engine import CuTileLinearAttentionEngine


class KdaCuTileEngine(CuTileLinearAttentionEngine):
    name = "kda_cutile"
    family = "kda"
