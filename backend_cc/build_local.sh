#!/usr/bin/env bash
# Builds cudnn/_pybind_module.so from backend_cc/cc and backend_cc/bindings with the local
# C++ compiler, outside Bazel (the GPU test machine has no Bazel). Nothing links libcudnn:
# the extension needs only the cuDNN and CUDA-runtime *headers* and dlopens libcudnn later.
#
#   backend_cc/build_local.sh [OUT_DIR]     (default: backend_cc, i.e. backend_cc/cudnn/)
#   then: PYTHONPATH=OUT_DIR:... python3 -c "import cudnn._pybind_module"
#   backend_cc/build_local.sh --cc-tests    also builds and runs the C++ unit tests (cc/tests)
#
# Where headers come from (first match wins):
#   cuDNN: $CUDNN_INCLUDE_DIR, the installed nvidia-cudnn-cu13/-cu12 wheel
#          (nvidia/cudnn/include), /usr/include, /usr/local/cuda/include
#   CUDA runtime (cuda_runtime_api.h): $CUDA_INCLUDE_DIR, /usr/local/cuda/include,
#          the nvidia-cuda-runtime wheel (nvidia/cuda_runtime/include, nvidia/cu13/include)
#   Python and pybind11: the `python3` on PATH.
# With --fetch-headers DIR, missing cuDNN headers are fetched once with
# `pip download --no-deps nvidia-cudnn-cu13` and unpacked into DIR.
# Environment: CXX (default g++), JOBS (parallel compiles, default nproc).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FETCH_DIR=""
OUT_DIR="$HERE"
CC_TESTS=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --fetch-headers) FETCH_DIR="$2"; shift 2 ;;
    --cc-tests) CC_TESTS=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) OUT_DIR="$1"; shift ;;
  esac
done

PYTHON="${PYTHON:-python3}"
CXX="${CXX:-g++}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

py() { "$PYTHON" -c "$1"; }

# Every directory named by the namespace package `nvidia` on this Python's path, joined
# with $1 (e.g. cudnn/include).
nvidia_dirs() {
  py "
import importlib.util, os, sys
spec = importlib.util.find_spec('nvidia')
for root in (list(spec.submodule_search_locations) if spec else []):
    print(os.path.join(root, '$1'))
" 2>/dev/null || true
}

find_header_dir() {  # $1 = header file, rest = candidate dirs
  local header="$1"; shift
  for dir in "$@"; do
    [[ -n "$dir" && -f "$dir/$header" ]] && { echo "$dir"; return 0; }
  done
  return 1
}

PY_INCLUDE="$(py 'import sysconfig; print(sysconfig.get_paths()["include"])')"
PYBIND_INCLUDE="$(py 'import pybind11; print(pybind11.get_include())')" || {
  echo "build_local.sh: pybind11 is not installed for $PYTHON (pip install pybind11)" >&2; exit 1; }

mapfile -t CUDNN_CANDIDATES < <(echo "${CUDNN_INCLUDE_DIR:-}"; nvidia_dirs cudnn/include;
                                 echo /usr/include; echo /usr/local/cuda/include;
                                 [[ -n "$FETCH_DIR" ]] && echo "$FETCH_DIR/nvidia/cudnn/include")
if ! CUDNN_INC="$(find_header_dir cudnn_graph.h "${CUDNN_CANDIDATES[@]}")"; then
  if [[ -n "$FETCH_DIR" ]]; then
    mkdir -p "$FETCH_DIR"
    "$PYTHON" -m pip download --no-deps -q -d "$FETCH_DIR" nvidia-cudnn-cu13
    wheel="$(ls "$FETCH_DIR"/nvidia_cudnn_cu13-*.whl | head -1)"
    (cd "$FETCH_DIR" && "$PYTHON" -m zipfile -e "$wheel" . >/dev/null)
    CUDNN_INC="$FETCH_DIR/nvidia/cudnn/include"
  else
    echo "build_local.sh: cudnn_graph.h not found (looked in: ${CUDNN_CANDIDATES[*]})." >&2
    echo "  Set CUDNN_INCLUDE_DIR, pip install nvidia-cudnn-cu13, or pass --fetch-headers DIR." >&2
    exit 1
  fi
fi

mapfile -t CUDA_CANDIDATES < <(echo "${CUDA_INCLUDE_DIR:-}"; echo /usr/local/cuda/include;
                                nvidia_dirs cuda_runtime/include; nvidia_dirs cu13/include;
                                nvidia_dirs cu12/include)
CUDA_INC="$(find_header_dir cuda_runtime_api.h "${CUDA_CANDIDATES[@]}")" || {
  echo "build_local.sh: cuda_runtime_api.h not found (looked in: ${CUDA_CANDIDATES[*]})." >&2
  echo "  Set CUDA_INCLUDE_DIR or pip install nvidia-cuda-runtime." >&2
  exit 1; }

# Source list: keep in sync with SOURCES.md (checked by tests/sources_test.py).
SOURCES=(
  cc/attr_value.cc
  cc/backend_graph.cc
  cc/composite.cc
  cc/composite_descriptors.cc
  cc/composite_record.cc
  cc/cudnn_loader.cc
  cc/descriptor.cc
  cc/device_props.cc
  cc/engine_configs.cc
  cc/enums.cc
  cc/errors.cc
  cc/graph_record.cc
  cc/handle.cc
  cc/host_scalar.cc
  cc/op_descriptors.cc
  cc/op_primitives.cc
  cc/op_rules.cc
  cc/op_schema.cc
  cc/op_schema_sdpa.cc
  cc/quantize_moe_descriptors.cc
  cc/sdpa_descriptors.cc
  cc/sdpa_fp8_composite.cc
  cc/shape_inference.cc
  cc/slice_transpose_rope_descriptors.cc
  cc/workspace_tensors.cc
  bindings/module.cc
  bindings/py_args.cc
  bindings/py_tensor.cc
  bindings/py_views.cc
)

# The pure C++ layers (no pybind11) the cc tests link against.
CORE_SOURCES=(
  cc/attr_value.cc
  cc/composite.cc
  cc/composite_record.cc
  cc/cudnn_loader.cc
  cc/enums.cc
  cc/errors.cc
  cc/graph_record.cc
  cc/host_scalar.cc
  cc/op_rules.cc
  cc/op_schema.cc
  cc/op_schema_sdpa.cc
  cc/sdpa_fp8_composite.cc
  cc/shape_inference.cc
  cc/workspace_tensors.cc
)
CC_TEST_SOURCES=(
  cc/tests/classic_ops_record_test.cc
  cc/tests/graph_record_test.cc
  cc/tests/host_scalar_test.cc
  cc/tests/workspace_tensors_test.cc
)

OBJ_DIR="$(mktemp -d)"
trap 'rm -rf "$OBJ_DIR"' EXIT
# Sources include each other from the repository root ("backend_cc/cc/x.h"), as under Bazel.
CXXFLAGS=(-std=c++17 -O2 -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
          -iquote "$HERE/.." -isystem "$PY_INCLUDE" -isystem "$PYBIND_INCLUDE" -isystem "$CUDNN_INC" -isystem "$CUDA_INC")

echo "build_local.sh: cuDNN headers $CUDNN_INC; CUDA headers $CUDA_INC; $("$CXX" --version | head -1)"
pids=()
for src in "${SOURCES[@]}"; do
  obj="$OBJ_DIR/$(echo "$src" | tr '/' '_').o"
  "$CXX" "${CXXFLAGS[@]}" -c "$HERE/$src" -o "$obj" &
  pids+=("$!")
  if (( ${#pids[@]} >= JOBS )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

mkdir -p "$OUT_DIR/cudnn"
"$CXX" -shared -o "$OUT_DIR/cudnn/_pybind_module.so" "$OBJ_DIR"/*.o -ldl
echo "build_local.sh: wrote $OUT_DIR/cudnn/_pybind_module.so"

if (( CC_TESTS )); then
  core_objs=()
  for src in "${CORE_SOURCES[@]}"; do core_objs+=("$OBJ_DIR/$(echo "$src" | tr '/' '_').o"); done
  for test_src in "${CC_TEST_SOURCES[@]}"; do
    exe="$OBJ_DIR/$(basename "$test_src" .cc)"
    "$CXX" "${CXXFLAGS[@]}" "$HERE/$test_src" "${core_objs[@]}" -o "$exe" -ldl
    "$exe"
    echo "build_local.sh: $(basename "$exe") passed"
  done
fi
