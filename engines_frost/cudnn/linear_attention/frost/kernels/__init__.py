"""CuTe DSL kernels of the FROST engines (sm_90 first). Entry point: kernels.fwd.frost_fwd.

Nothing here imports cutlass or torch at import time; kernels compile lazily on first use.
"""
