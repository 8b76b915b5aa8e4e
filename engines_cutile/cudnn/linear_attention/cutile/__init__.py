"""cuTile engines and kernels for the linear-attention families (GDN, KDA).

Importing this package loads no cuda.tile code: kernels live in `kernels/` and are
imported by the engines only when a plan is built.
"""
