"""`kda_cutile`: chunked cuTile kernels for kda (forward) and kda_bwd (la_engine.py)."""
from cudnn.ops.linear_attention_family import KDA_FAMILY

from .la_engine import CuTileLinearAttentionEngine


class KdaCuTileEngine(CuTileLinearAttentionEngine):
    name = "kda_cutile"
    family = KDA_FAMILY
