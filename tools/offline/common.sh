# Shared settings for tools/bazel, tools/offline/setup.sh and .ci/run (sourced, not run).
#
# Everything the offline toolchain creates lives under one cache folder:
#   $CUDNN_BAZEL_CACHE/root/    Debian sid root with bazel-bootstrap 7.7.1 (about 2 GB)
#   $CUDNN_BAZEL_CACHE/out/     Bazel output_user_root (one output base per checkout)
#   $CUDNN_BAZEL_CACHE/stamps/  one file per finished setup step (makes setup idempotent)

CUDNN_BAZEL_CACHE=${CUDNN_BAZEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cudnn-bazel}
CUDNN_BAZEL_ROOT=$CUDNN_BAZEL_CACHE/root
CUDNN_BAZEL_OUT=$CUDNN_BAZEL_CACHE/out
CUDNN_BAZEL_STAMPS=$CUDNN_BAZEL_CACHE/stamps
# deb.debian.org is the mirror these machines reach; override for a local mirror.
CUDNN_SID_MIRROR=${CUDNN_SID_MIRROR:-http://deb.debian.org/debian}
# The Python whose site-packages Bazel's py_test and the header probes use.
CUDNN_PYTHON=${CUDNN_PYTHON:-python3}

cudnn_log() { printf '[tools/bazel] %s\n' "$*" >&2; }
cudnn_die() { printf '[tools/bazel] error: %s\n' "$*" >&2; exit 1; }

# sha256 of the given files' contents (used to key stamps on what a step installs).
cudnn_hash_files() { cat "$@" | sha256sum | cut -c1-16; }

# Prints three lines: sys.executable, sys.prefix and sys.base_prefix of $CUDNN_PYTHON.
# In a venv, prefix != base_prefix (the venv's python links into base_prefix); both must
# be visible inside the sid root.
cudnn_python_paths() {
  "$CUDNN_PYTHON" -c 'import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix)'
}

# Names the Python environment that tests import from: the interpreter plus a hash of the
# pinned requirements. Bazel cannot see site-packages, so tools/bazel exports this as
# CUDNN_PYTHON_ENV and .bazelrc passes it to tests, making a different environment a
# different test input (no stale cached results). Args: repository root.
cudnn_python_env_key() {
  local exe
  exe=$(cudnn_python_paths) || return 1
  exe=${exe%%$'\n'*}
  printf '%s-%s\n' "$exe" "$( (cat "$1/requirements.txt" "$1/requirements-headers.txt"; echo "$exe") | sha256sum | cut -c1-16)"
}
