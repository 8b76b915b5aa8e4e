"""`gdn_summary_frost`: gdn_summary and gdn_summary_bwd nodes on the FROST kernels
(summary_engine.py; the affine state map of a span, for context parallelism).
"""
from .engine_gates import GDN
from .summary_engine import FrostSummaryEngine


class GdnSummaryFrostEngine(FrostSummaryEngine):
    name = "gdn_summary_frost"
    traits = GDN
