"""cuTile kernels, one algorithm stage per module (FLA's stage names: wy, chunk, ...)."""
