#!/usr/bin/env bash
# The set-up a fresh Debian machine needs before `npm test`, `npm start` or `npm run release`: the
# Debian packages their steps run, installed with apt-get where missing (as root), or named in one
# line with the command that installs them (as any other user). The Go builds of the control plane
# and helm are steps of `npm test` themselves (tools/k8s/build.sh, tools/helm/build.sh).
#
# Usage: tools/setup/setup.sh [--for test|start|release] [--check]
#   --for test     (default) every package below: what `npm test` needs
#   --for start    the real-node packages; `npm start` runs simulated nodes without them, so a
#                  missing one is said, not fatal, when not root
#   --for release  buildah and debootstrap (the image archive)
#   --check        install nothing: print the missing packages (one line) and exit 1 if any
# Environment (for the tests of this script):
#   VGPU_WARDEN_SETUP_ROOT  directory the file checks look under (default: /)
#   VGPU_WARDEN_SETUP_LOG   where apt-get's output goes
#     (default ${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/setup.log)
#
# The packages, and who needs them:
# - tmux: the live-view terminal test drives a real terminal (test/e2e/live-view-terminal.test.ts);
# - buildah, debootstrap: the image test and `npm run release` build the image
#   (tools/image/build.sh), on a base made from Debian packages where no registry image is reachable;
# - containerd, runc, containernetworking-plugins, busybox-static: the real nodes (kubelet with its
#   own containerd per node, a loopback CNI, a tiny image of static busybox; packages/stand-ins/src/real-node/)
#   of the e2e, compatibility and chaos suites, and of `npm start` when run as root.
set -euo pipefail

purpose=test check_only=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --for) purpose=${2:-}; shift 2 || { echo "setup.sh: --for needs a value (test, start or release)" >&2; exit 2; } ;;
    --for=*) purpose=${1#--for=}; shift ;;
    --check) check_only=true; shift ;;
    *) echo "setup.sh: unknown argument '${1:0:60}' (allowed: --for test|start|release, --check)" >&2; exit 2 ;;
  esac
done

readonly REAL_NODE_PACKAGES=(containerd runc containernetworking-plugins busybox-static)
case "$purpose" in
  test) wanted=(tmux buildah debootstrap "${REAL_NODE_PACKAGES[@]}") ;;
  start) wanted=("${REAL_NODE_PACKAGES[@]}") ;;
  release) wanted=(buildah debootstrap) ;;
  *) echo "setup.sh: --for must be test, start or release (got '${purpose:0:60}')" >&2; exit 2 ;;
esac

root=${VGPU_WARDEN_SETUP_ROOT:-}
root=${root%/}

# Whether a package's part the project uses is there (by what it installs, not by dpkg: a
# containerd from elsewhere on PATH serves as well).
present() {
  case "$1" in
    containernetworking-plugins) [[ -x "$root/usr/lib/cni/loopback" ]] ;;
    # Static: a dynamic busybox (Debian's `busybox`) cannot run inside the real nodes' tiny image.
    busybox-static) [[ -x "$root/bin/busybox" ]] && "$root/bin/busybox" --list >/dev/null 2>&1 && ! ldd "$root/bin/busybox" >/dev/null 2>&1 ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

missing=()
for package in "${wanted[@]}"; do
  present "$package" || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  $check_only && echo "[setup] nothing missing for $purpose"
  exit 0
fi

install_line="apt-get update && apt-get install -y ${missing[*]}"
if $check_only; then
  echo "[setup] missing Debian packages for $purpose: ${missing[*]} (install: $install_line)"
  exit 1
fi
is_root=false
[[ "$(id -u)" == 0 ]] && is_root=true
if ! $is_root || ! command -v apt-get >/dev/null 2>&1; then
  why="not root"
  $is_root && why="no apt-get on this machine"
  if [[ "$purpose" == start ]]; then
    echo "[setup] real nodes need root and ${missing[*]} ($why): local mode runs simulated nodes; for real ones, as root: $install_line" >&2
    exit 0
  fi
  echo "[setup] missing Debian packages for npm $purpose: ${missing[*]} ($why); as root run: $install_line" >&2
  exit 1
fi

log=${VGPU_WARDEN_SETUP_LOG:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/setup.log}
mkdir -p "$(dirname "$log")"
: >"$log"
tool_name=setup
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/steps.sh
source "$here/../lib/steps.sh"
step "installing with apt-get: ${missing[*]} (log: $log)"
run "apt-get update" apt-get update -qq
run "apt-get install ${missing[*]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
still=()
for package in "${missing[@]}"; do
  present "$package" || still+=("$package")
done
if [[ ${#still[@]} -gt 0 ]]; then
  echo "[setup] apt-get installed ${missing[*]} but ${still[*]} still not found (log: $log)" >&2
  exit 1
fi
step "installed: ${missing[*]}"
