"""Cross-layer, GPU and numerics tests (not shipped in the wheel)."""
