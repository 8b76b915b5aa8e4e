"""`kda_summary_frost`: kda_summary and kda_summary_bwd nodes on the FROST kernels
(summary_engine.py; the affine state map of a span, for context parallelism).
"""
from .engine_gates import KDA
from .summary_engine import FrostSummaryEngine


class KdaSummaryFrostEngine(FrostSummaryEngine):
    name = "kda_summary_frost"
    traits = KDA
