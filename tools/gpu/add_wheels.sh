#!/usr/bin/env bash
# Adds the carried wheel loads (.whl/load*/, made by tools/gpu/wheelhouse.sh) to a folder
# that persists on the GPU machine, joining split wheels once all their parts are there.
#
#   tools/gpu/add_wheels.sh [FOLDER]      (default: $CUDNN_WHEELS or /opt/cudnn-wheels)
set -euo pipefail
dest=${1:-${CUDNN_WHEELS:-/opt/cudnn-wheels}}
mkdir -p "$dest"
shopt -s nullglob
for load in .whl/load*/; do
  files=("$load"*)
  [ "${#files[@]}" = 0 ] || cp "${files[@]}" "$dest"/
done
cd "$dest"
for first in *.whl.part00; do
  wheel=${first%.part00}
  parts=("$wheel".part*)
  cat "${parts[@]}" >"$wheel.tmp"
  # a wheel is a zip: it reads back whole only when every part has arrived
  if python3 -c 'import sys, zipfile; sys.exit(zipfile.ZipFile(sys.argv[1]).testzip() is not None)' "$wheel.tmp" 2>/dev/null; then
    mv "$wheel.tmp" "$wheel"
    rm -f "${parts[@]}"
  else
    rm -f "$wheel.tmp"
    echo "$wheel: ${#parts[@]} part(s) so far, waiting for the rest"
  fi
done
echo "$dest: $(ls ./*.whl 2>/dev/null | wc -l) wheels"
