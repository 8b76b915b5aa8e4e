#!/usr/bin/env bash
# Builds cudnn._pybind_module with this machine's own compiler and Python, for machines
# without Bazel (the GPU machine: its Python, glibc and libstdc++ differ from the sid root
# that Bazel builds in here, so a Bazel-built .so would not load there).
#
#   tools/build_extension.sh        -> backend_cc/cudnn/_pybind_module.so (as Bazel names it)
#
# Headers are found the same way Bazel finds them (tools/bzl/locate_headers.py asks the
# installed packages); the CUDA runtime headers fall back to $CUDA_HOME/include. Compiles
# backend_cc/cc/*.cc (not *_test.cc) and backend_cc/bindings/*.cc, as //backend_cc does.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
py=${PYTHON:-python3}

include_of() {
  "$py" "$repo/tools/bzl/locate_headers.py" "$@" | "$py" -c 'import json, sys; print(json.load(sys.stdin)["include"])'
}

cudnn_inc=$(include_of wheel nvidia-cudnn-cu13 cudnn_graph.h 2>/dev/null) ||
  cudnn_inc=$(include_of wheel nvidia-cudnn-cu12 cudnn_graph.h)
cuda_inc=$(include_of wheel nvidia-cuda-runtime cuda_runtime_api.h 2>/dev/null) ||
  cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
out=$repo/backend_cc/cudnn/_pybind_module.so

shopt -s nullglob
srcs=()
for f in "$repo"/backend_cc/cc/*.cc "$repo"/backend_cc/bindings/*.cc; do
  case $f in *_test.cc) ;; *) srcs+=("$f") ;; esac
done

mkdir -p "$(dirname "$out")"
set -x
"${CXX:-c++}" -O2 -std=c++17 -shared -fPIC -fvisibility=hidden \
  -I"$repo" -I"$(include_of python)" -I"$(include_of pybind11)" -I"$cudnn_inc" -I"$cuda_inc" \
  "${srcs[@]}" -o "$out" -ldl
