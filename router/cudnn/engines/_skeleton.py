"""Placeholder in the router/ source root (package `cudnn.engines`).

It exists so that this folder's Bazel wiring (its py_library with imports = ["."], and the
`cudnn` package root shared with the other folders) is built and tested before the layer's
real modules land. Delete it when they do.
"""

LAYER = "router"
