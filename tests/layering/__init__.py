"""Tests that the layering rules of docs/LAYOUT.md hold."""
