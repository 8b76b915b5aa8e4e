"""CuTe DSL kernels of the FROST linear-attention engines (imported lazily by the engines)."""
