"""`gdn2_summary_frost`: gdn2_summary and gdn2_summary_bwd nodes on the FROST kernels
(summary_engine.py; the affine state map of a span, for context parallelism).
"""
from .engine_gates import GDN2
from .summary_engine import FrostSummaryEngine


class Gdn2SummaryFrostEngine(FrostSummaryEngine):
    name = "gdn2_summary_frost"
    traits = GDN2
