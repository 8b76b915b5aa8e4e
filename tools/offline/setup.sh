#!/usr/bin/env bash
# Idempotent set-up of the offline Bazel 7.7.1 toolchain and the pinned Python packages.
#
#   tools/offline/setup.sh [--python-only | --root-only]
#
# Steps (each skipped when its stamp exists, so a second run does nothing):
#   1. host: debootstrap and g++ (bookworm packages; never a sid package on the host)
#   2. a Debian sid root file system under the cache (debootstrap --variant=minbase)
#   3. inside that root: bazel-bootstrap 7.7.1, g++, and the shared libraries the host
#      Python's C extensions need there (the root has sid's newer ones)
#   4. the host Python: requirements.txt, then requirements-headers.txt with --no-deps
# Everything that mounts (debootstrap, apt in the root) runs in a private mount namespace,
# so an interrupted step cannot leave mounts behind on the host.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
. "$here/common.sh"

want_root=1
want_python=1
case "${1:-}" in
  "") ;;
  --python-only) want_root=0 ;;
  --root-only) want_python=0 ;;
  *) cudnn_die "setup.sh: unknown option '$1' (expected --python-only or --root-only)" ;;
esac

# Packages installed inside the sid root. The lib* ones are what the host's pyenv CPython
# 3.11 and its extension modules (ssl, ctypes, sqlite3, bz2, lzma, readline, curses, uuid,
# dbm) link against; g++ is the C++ toolchain Bazel auto-configures.
SID_PACKAGES="bazel-bootstrap g++ libssl3t64 libffi8 libsqlite3-0 libbz2-1.0 liblzma5 zlib1g
 libreadline8t64 libncursesw6 libuuid1 libgdbm6t64"

mkdir -p "$CUDNN_BAZEL_STAMPS"
# Several checkouts may run tools/bazel at once for the first time: set up one at a time.
exec 9>"$CUDNN_BAZEL_CACHE/setup.lock"
flock 9

need_root_user() {
  [ "$(id -u)" = 0 ] || cudnn_die "$1 needs root (debootstrap, chroot and mount); run as root or install Bazel 7 on the host"
}

# Refuses to delete a folder that has something mounted below it in this namespace.
assert_no_mounts_under() {
  if awk -v p="$1" '$5 == p || index($5, p "/") == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
    cudnn_die "something is mounted under $1; not deleting it (see /proc/self/mountinfo)"
  fi
}

# Runs a shell command inside the sid root with /proc and /dev, in a private mount namespace.
in_root() {
  unshare --mount --propagation private /bin/sh -c '
    root=$1; shift
    mount --bind /proc "$root/proc" && mount --rbind /dev "$root/dev" &&
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 /bin/sh -c "$1"' sh "$CUDNN_BAZEL_ROOT" "$1"
}

step_host_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  need_root_user "installing debootstrap"
  cudnn_log "setup 1/4: installing debootstrap on the host (apt, bookworm package)"
  apt-get install -y -q debootstrap >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q debootstrap >/dev/null; }
}

# The machine's own gcc compiles and links C++ for the Bazel in the root (bin/cudnn-host-gcc).
step_host_compiler() {
  [ -x /usr/bin/gcc ] && [ -x /usr/bin/g++ ] && return 0
  need_root_user "installing g++"
  cudnn_log "setup 1/4: installing g++ on the host (apt, bookworm package)"
  apt-get install -y -q g++ >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q g++ >/dev/null; }
}

step_sid_root() {
  [ -e "$CUDNN_BAZEL_STAMPS/sid-root" ] && return 0
  need_root_user "creating the sid root"
  cudnn_log "setup 2/4: creating a Debian sid root in $CUDNN_BAZEL_ROOT (debootstrap, ~30 s)"
  local partial=$CUDNN_BAZEL_ROOT.partial
  assert_no_mounts_under "$partial"
  assert_no_mounts_under "$CUDNN_BAZEL_ROOT"
  rm -rf "$partial"
  unshare --mount --propagation private \
    debootstrap --variant=minbase sid "$partial" "$CUDNN_SID_MIRROR" >"$CUDNN_BAZEL_CACHE/debootstrap.log" 2>&1 ||
    cudnn_die "debootstrap failed; see $CUDNN_BAZEL_CACHE/debootstrap.log"
  # sid's Release file is past its Valid-Until date on these machines' mirror.
  echo 'Acquire::Check-Valid-Until "false";' >"$partial/etc/apt/apt.conf.d/99cudnn-no-valid-until"
  rm -rf "$CUDNN_BAZEL_ROOT"
  mv "$partial" "$CUDNN_BAZEL_ROOT"
  rm -f "$CUDNN_BAZEL_STAMPS"/sid-packages-*
  touch "$CUDNN_BAZEL_STAMPS/sid-root"
}

step_sid_packages() {
  local key
  key=$(printf '%s' "$SID_PACKAGES" | sha256sum | cut -c1-16)
  [ -e "$CUDNN_BAZEL_STAMPS/sid-packages-$key" ] && return 0
  need_root_user "installing packages into the sid root"
  cudnn_log "setup 3/4: installing bazel-bootstrap, g++ and Python runtime libraries into the sid root (apt, ~40 s)"
  # shellcheck disable=SC2086  # the list is meant to split into words
  in_root "apt-get update -q && apt-get install -y -q --no-install-recommends $(echo $SID_PACKAGES) && apt-get clean" \
    >"$CUDNN_BAZEL_CACHE/apt.log" 2>&1 || cudnn_die "apt-get in the sid root failed; see $CUDNN_BAZEL_CACHE/apt.log"
  local got want
  got=$(in_root "bazel --version" | awk '{print $2}')
  want=$(cat "$repo/.bazelversion")
  if [ "${got%%.*}" != "${want%%.*}" ]; then
    cudnn_die "sid now packages Bazel $got, but this repository needs $want (.bazelversion)"
  elif [ "$got" != "$want" ]; then
    cudnn_log "warning: sid packages Bazel $got, .bazelversion says $want; continuing (same major)"
  fi
  rm -f "$CUDNN_BAZEL_STAMPS"/sid-packages-*
  touch "$CUDNN_BAZEL_STAMPS/sid-packages-$key"
}

step_python_packages() {
  local env_key key exe
  env_key=$(cudnn_python_env_key "$repo") || cudnn_die "cannot run '$CUDNN_PYTHON'"
  exe=${env_key%-*}
  key=${env_key##*-}
  [ -e "$CUDNN_BAZEL_STAMPS/python-$key" ] && return 0
  cudnn_log "setup 4/4: installing the pinned Python packages for $exe (pip, ~30 s)"
  local log=$CUDNN_BAZEL_CACHE/pip.log
  { PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
      "$exe" -m pip install -r "$repo/requirements.txt" &&
    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
      "$exe" -m pip install --no-deps -r "$repo/requirements-headers.txt"; } >"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; cudnn_die "pip install failed; full log in $log"; }
  touch "$CUDNN_BAZEL_STAMPS/python-$key"
}

if [ "$want_root" = 1 ]; then
  step_host_debootstrap
  step_host_compiler
  step_sid_root
  step_sid_packages
fi
if [ "$want_python" = 1 ]; then
  step_python_packages
fi
