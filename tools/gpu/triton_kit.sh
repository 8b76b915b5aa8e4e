#!/usr/bin/env bash
# Packs a newer Triton for the GPU test machine into one carried file, for the one thing
# that needs it there: timing flash-linear-attention's gated backward, which refuses
# Triton < 3.7.1 on Hopper (the machine's torch brings 3.6). Test tooling only: the product
# never imports Triton.
#
#   tools/gpu/triton_kit.sh [VERSION]      # build machine, network; default 3.9.0
#
# The manylinux wheel is ~285 MB; what an H200 run never loads goes (the AMD backend, the
# CUPTI profiler libraries, Blackwell's ptxas, instrumentation test libraries) and the
# shared libraries lose their static symbol tables (strip --strip-unneeded keeps the
# dynamic ones): ~54 MB as .kit/triton/triton.tar.xz, one run's carry. Stage `tritonkit`
# unpacks it into /tmp/triton-kit; stage `flabwd` puts that first on PYTHONPATH and points
# TRITON_PTXAS_BLACKWELL_PATH (what Triton 3.9 runs for sm_90 and newer) at the kept
# ptxas, which compiles sm_90a (measured: FLA's GDN backward ran on the H200 that way).
set -euo pipefail
VERSION="${1:-3.9.0}"
ROOT=$(git rev-parse --show-toplevel)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$T" "triton==$VERSION"
mkdir "$T/x"
unzip -q "$T"/triton-*.whl -d "$T/x"
rm -rf "$T/x/triton/backends/amd" "$T"/x/triton/backends/nvidia/lib/cupti* \
  "$T/x/triton/backends/nvidia/bin/ptxas-blackwell" "$T"/x/triton/instrumentation/*.so
# the AMD backend's entry point would make Triton import the package just removed
sed -i '/^amd *= *triton.backends.amd/d' "$T"/x/triton-*.dist-info/entry_points.txt
find "$T/x" -name '*.so*' -type f -exec strip --strip-unneeded {} +
mkdir -p "$ROOT/.kit/triton"
tar cf - -C "$T/x" . | xz -T0 -9 > "$ROOT/.kit/triton/triton.tar.xz"
ls -l "$ROOT/.kit/triton/triton.tar.xz"
