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
    "cli",
]

DISTRIBUTION = "cudnn-pygraph"
VERSION = "0.1.0"  # cudnn.__version__ (ir/cudnn/_version.py) says the same (a test checks)
SUMMARY = "Python-native cuDNN graph IR with pluggable execution engines"
LICENSE = "MIT"
PYTHON_REQUIRES = ">=3.10"

# What every install gets: the command line's flag library (`import cudnn` needs nothing).
REQUIRES = ["absl-py>=1.4"]

# Optional dependencies by extra: what each part needs to run, not just to import.
#   torch   the torch custom ops (cudnn.linear_attention.ops)
#   cutile  cuTile engines: cuda-tile and its compiler (tileiras, ptxas, libnvvm) from
#           NVIDIA's wheels, which cuda.tile finds inside the environment; torch. Named
#           one by one, not as cuda-tile[tileiras]: that extra goes through the
#           cuda-toolkit metapackage (>= 13.2), which torch 2.11 pins to 13.0.2, so pip
#           finds no solution next to torch; the components themselves pin nothing torch has
#   frost   FROST engines: the CuTe DSL with its CUDA 13 libraries, TVM-FFI (the ~6 us
#           launch convention); torch
#   cudnn   the cuDNN backend: the library the extension loads at run time
#   all     every one of them (a test checks it is their union)
EXTRA_REQUIRES = {
    "torch": ["torch>=2.11"],
    "cutile": [
        "cuda-tile>=1.7",
        "nvidia-cuda-nvcc>=13.2,<13.5",
        "nvidia-cuda-tileiras>=13.2,<13.5",
        "nvidia-nvvm>=13.2,<13.5",
        "torch>=2.11",
    ],
    "frost": ["nvidia-cutlass-dsl[cu13]>=4.8.1", "apache-tvm-ffi>=0.1.15", "torch>=2.11"],
    "cudnn": ["nvidia-cudnn-cu13>=9.13"],
    "all": [
        "apache-tvm-ffi>=0.1.15",
        "cuda-tile>=1.7",
        "nvidia-cuda-nvcc>=13.2,<13.5",
        "nvidia-cuda-tileiras>=13.2,<13.5",
        "nvidia-cudnn-cu13>=9.13",
        "nvidia-cutlass-dsl[cu13]>=4.8.1",
        "nvidia-nvvm>=13.2,<13.5",
        "torch>=2.11",
    ],
}
