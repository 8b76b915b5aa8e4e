"""Placeholder in the torch_ops/ source root (package `cudnn.linear_attention.ops`).

It exists so that this folder's Bazel wiring (its py_library with imports = ["."], and the
`cudnn` package root shared with the other folders) is built and tested before the layer's
real modules land. Delete it when they do.
"""

LAYER = "torch_ops"
