"""`gdn_cutile`: chunked cuTile kernels for gdn (forward) and gdn_bwd (la_engine.py)."""
from .la_engine import CuTileLinearAttentionEngine


class GdnCuTileEngine(CuTileLinearAttentionEngine):
    name = "gdn_cutile"
    family = "gdn"
