#!/usr/bin/env bash
# Prepares, on a machine with a network, the wheel files a GPU machine without one needs
# for `pip install ".[all]"`, in loads small enough to carry one per run.
#
#   tools/gpu/wheelhouse.sh [PYTHON_VERSION] [LIMIT_MIB]      (defaults: 3.12 56)
#
# 1. downloads into .whl/all/ the wheels (manylinux x86_64, for that Python) of the
#    requirements of the `frost` and `cutile` extras and of the package itself, with their
#    dependencies, except torch and NVIDIA's CUDA runtime libraries that torch brings
#    (the GPU machine has them);
# 2. splits every wheel larger than LIMIT_MIB into parts and packs wheels and parts into
#    .whl/load1/, .whl/load2/, ... of at most LIMIT_MIB each.
# On the GPU machine, stage `wheels` of gpu_suite.sh adds each carried load to a folder
# that persists while the machine stays up (parts are joined once all have arrived), and
# stage `install` runs `pip install --no-index --find-links` on it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
py=${1:-3.12}
limit=$(( ${2:-56} * 1024 * 1024 ))
out=.whl
rm -rf "$out/all" "$out"/load*
mkdir -p "$out/all"
python3 -m pip download -q --disable-pip-version-check --only-binary :all: \
  --python-version "$py" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 -d "$out/all" \
  "cuda-tile>=1.7" "nvidia-cuda-tileiras>=13.2,<13.5" "nvidia-cuda-nvcc>=13.2,<13.5" "nvidia-nvvm>=13.2,<13.5" "nvidia-cutlass-dsl[cu13]>=4.8.1" "apache-tvm-ffi>=0.1.15" \
  "absl-py>=1.4" "setuptools>=77" "pybind11>=2.12"
# the GPU machine's torch brings these; carrying them again would only cost loads
rm -f "$out"/all/torch-* "$out"/all/nvidia_cudnn_* "$out"/all/nvidia_cublas_*
n=1 used=0
mkdir -p "$out/load$n"
place() {  # place FILE: into the current load, or a new one when it would overflow
  local size
  size=$(stat -c %s "$1")
  if [ $((used + size)) -gt "$limit" ] && [ "$used" -gt 0 ]; then
    n=$((n + 1)); used=0; mkdir -p "$out/load$n"
  fi
  mv "$1" "$out/load$n/"; used=$((used + size))
}
for wheel in "$out"/all/*.whl; do
  if [ "$(stat -c %s "$wheel")" -gt "$limit" ]; then
    split -b "$limit" -d -a 2 "$wheel" "$out/all/$(basename "$wheel").part"
    rm "$wheel"
  fi
done
for file in "$out"/all/*; do place "$file"; done
rmdir "$out/all"
du -sh "$out"/load* | sed 's/^/  /'
echo "carry each of .whl/load1 .. .whl/load$n with one run (stage: wheels), then stage: install"
