"""GPU numerics of the engines against the float64 references (L1 tier)."""
