"""The sources of the C++ extension `cudnn._pybind_module`, the one list both builds read.

backend_cc/BUILD.bazel loads it (cc_library `backend_core`, cc_binary
`cudnn/_pybind_module.so`), and setup.py (`pip install .`, for machines without Bazel)
reads it through tools/bzl/starlark_values.py. A new source file goes here and nowhere
else; `tests/sources_test.py` fails when a file on disk is missing. Plain literals only.
"""

# The plain C++ libraries (no pybind11): lowering records, descriptors, dlopen of cuDNN.
CORE_SRCS = [
    "cc/attr_value.cc",
    "cc/backend_graph.cc",
    "cc/composite.cc",
    "cc/composite_descriptors.cc",
    "cc/composite_record.cc",
    "cc/cudnn_loader.cc",
    "cc/descriptor.cc",
    "cc/device_props.cc",
    "cc/engine_configs.cc",
    "cc/enums.cc",
    "cc/errors.cc",
    "cc/graph_record.cc",
    "cc/handle.cc",
    "cc/host_scalar.cc",
    "cc/op_descriptors.cc",
    "cc/op_primitives.cc",
    "cc/op_rules.cc",
    "cc/op_schema.cc",
    "cc/op_schema_sdpa.cc",
    "cc/quantize_moe_descriptors.cc",
    "cc/sdpa_descriptors.cc",
    "cc/sdpa_fp8_composite.cc",
    "cc/shape_inference.cc",
    "cc/slice_transpose_rope_descriptors.cc",
    "cc/workspace_tensors.cc",
]

# Their headers.
CORE_HDRS = [
    "cc/attr_value.h",
    "cc/backend_graph.h",
    "cc/composite.h",
    "cc/cudnn_api.h",
    "cc/descriptor.h",
    "cc/device_props.h",
    "cc/engine_configs.h",
    "cc/enums.h",
    "cc/errors.h",
    "cc/graph_record.h",
    "cc/handle.h",
    "cc/host_scalar.h",
    "cc/op_descriptors.h",
    "cc/op_primitives.h",
    "cc/op_rules.h",
    "cc/op_schema.h",
    "cc/op_schema_rows.h",
    "cc/shape_inference.h",
    "cc/workspace_tensors.h",
]

# The thin pybind11 layer (sources and its own headers).
BINDING_SRCS = [
    "bindings/module.cc",
    "bindings/py_args.cc",
    "bindings/py_args.h",
    "bindings/py_tensor.cc",
    "bindings/py_tensor.h",
    "bindings/py_views.cc",
    "bindings/py_views.h",
]

# The headers of other projects the sources include, and the wheels that ship them (first
# choice first), for setup.py; each folder found goes on the include path. Nothing links
# these libraries: the extension loads libcudnn at run time. pyproject.toml's build
# requirements name the first wheel of each, so an isolated `pip install .` has them
# (tests/package_metadata_test.py checks), and MODULE.bazel asks the same wheels for
# Bazel. crt/ is its own wheel from CUDA 13 on (older runtime wheels ship it themselves).
EXTERNAL_HEADERS = {
    "cudnn_graph.h": ["nvidia-cudnn-cu13", "nvidia-cudnn-cu12"],
    "cuda_runtime_api.h": ["nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"],
    "crt/host_defines.h": ["nvidia-cuda-crt", "nvidia-cuda-runtime-cu12"],
}
