"""What the package is, in one place: the source roots and the distribution's metadata.

Loaded by the root BUILD.bazel (the umbrella library and `//:wheel`) and read by setup.py
(`pip install .`), the root conftest.py and the tools (tools/bzl/starlark_values.py), so
the Bazel wheel, the PEP 517 build and a source checkout agree. Plain literals only.
"""

# Each folder holds `cudnn/...` modules of one layer (docs/LAYOUT.md), bottom layer first.
SOURCE_ROOTS = [
    "ops",
    "ir",
    "router",
    "engines_common",
    "engines_cutile",
    "engines_frost",
    "backend_cc",
    "torch_ops",
]

DISTRIBUTION = "cudnn-pygraph"
VERSION = "0.1.0"
SUMMARY = "Python-native cuDNN graph IR with pluggable execution engines"
PYTHON_REQUIRES = ">=3.10"

# Optional dependencies by extra; `import cudnn` needs none of them.
EXTRA_REQUIRES = {
    "cutile": ["cuda-tile>=1.7"],
    "frost": ["nvidia-cutlass-dsl>=4.8.1"],
    "torch": ["torch>=2.11"],
}
