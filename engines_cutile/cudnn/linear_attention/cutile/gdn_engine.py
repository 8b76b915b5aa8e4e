"""`gdn_cutile`: chunked cuTile kernels for gdn (forward) and gdn_bwd (la_engine.py)."""
from cudnn.ops.linear_attention_family import GDN_FAMILY

from .la_engine import CuTileLinearAttentionEngine


class GdnCuTileEngine(CuTileLinearAttentionEngine):
    name = "gdn_cutile"
    family = GDN_FAMILY
