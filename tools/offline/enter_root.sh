#!/usr/bin/env bash
# Runs one command inside the sid root, seeing host folders at their own paths.
#
#   unshare --mount --propagation private tools/offline/enter_root.sh \
#       --root DIR --cwd DIR --path-prefix DIRS [--mount DIR]... -- COMMAND [ARG]...
#   nsenter --mount=/proc/PID/ns/mnt tools/offline/enter_root.sh --joined \
#       --root DIR --cwd DIR --path-prefix DIRS -- COMMAND [ARG]...
#
# Meant to run in a fresh private mount namespace (tools/bazel starts it with unshare): the
# bind mounts made here exist only in that namespace, which lives exactly as long as the
# processes in it. A Bazel server started from here keeps the namespace (and so its view of
# the workspace and the host Python) alive until it shuts down; then the kernel drops the
# mounts. Later calls join that namespace (--joined: the mounts are already there).
# Nothing is ever mounted in the host's namespace, so nothing can leak there.
set -euo pipefail

root= cwd= path_prefix= joined=0
mounts=()
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; shift 2 ;;
    --cwd) cwd=$2; shift 2 ;;
    --path-prefix) path_prefix=$2; shift 2 ;;
    --mount) mounts+=("$2"); shift 2 ;;
    --joined) joined=1; shift ;;
    --) shift; break ;;
    *) echo "enter_root.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$root" ] && [ -n "$cwd" ] && [ $# -gt 0 ] || { echo "enter_root.sh: missing arguments" >&2; exit 2; }

# Refuse to run in the host's namespace: the mounts below would outlive us there.
if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
  echo "enter_root.sh: must run in a private mount namespace (unshare --mount)" >&2
  exit 2
fi

if [ "$joined" = 0 ]; then
  # The machine's own tree, for its compiler (tools/offline/bin/cudnn-host-gcc); first, so that it
  # holds none of the mounts below.
  mkdir -p "$root/run/cudnn-host"
  mount --rbind / "$root/run/cudnn-host"
  mount --bind /proc "$root/proc"
  mount --rbind /dev "$root/dev"
  # Parents before children, so a mount inside another mounted folder is not hidden by it.
  while IFS= read -r dir; do
    [ -n "$dir" ] || continue
    mkdir -p "$root$dir"
    mount --rbind "$dir" "$root$dir"
  done < <(printf '%s\n' "${mounts[@]}" | sort -u | awk '{print length($0) "\t" $0}' | sort -n | cut -f2-)
fi

export PATH="$path_prefix:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A host TMPDIR may not exist inside the root.
export TMPDIR=/tmp
exec chroot "$root" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$cwd" "$@"
