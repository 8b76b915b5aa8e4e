"""FROST engines for the linear-attention families (GDN, KDA, GDN-2): CuTe DSL kernels.

Importing this package loads neither torch nor the CuTe DSL: the kernels live in
`kernels/` and are imported by the engines only when a plan is built or executed.
"""
