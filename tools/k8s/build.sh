#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler, kube-controller-manager, kubelet (k8s.io/kubernetes) and etcd (go.etcd.io/etcd/server/v3)
# from Go modules into a cache directory outside git, at the versions pinned in versions.env.
#
# Usage: tools/k8s/build.sh [--print-bin-dir] [--compat]
#   --compat                          build (or print the bin dirs of) every version of
#                                     KUBERNETES_COMPAT_VERSIONS instead of the main one, one per line
#   VGPU_WARDEN_K8S_CACHE             cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/k8s)
#   VGPU_WARDEN_KUBERNETES_VERSION    build this Kubernetes version instead of KUBERNETES_VERSION
#                                     (the compatibility suite runs each claimed version this way)
#
# One progress line per step; the full Go output goes to a log file that is named on failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
: "${KUBERNETES_VERSION:?versions.env must set KUBERNETES_VERSION}"
: "${KUBERNETES_COMPAT_VERSIONS:?versions.env must set KUBERNETES_COMPAT_VERSIONS}"
: "${ETCD_VERSION:?versions.env must set ETCD_VERSION}"

print_bin_dir=false compat=false
for arg in "$@"; do
  case "$arg" in
    --print-bin-dir) print_bin_dir=true ;;
    --compat) compat=true ;;
    *) echo "build.sh: unknown argument '$arg' (allowed: --print-bin-dir, --compat)" >&2; exit 2 ;;
  esac
done
if $compat; then
  # One build per claimed version, each into its own cache entry; the first failure stops.
  for version in $KUBERNETES_COMPAT_VERSIONS; do
    if $print_bin_dir; then
      VGPU_WARDEN_KUBERNETES_VERSION=$version bash "$here/build.sh" --print-bin-dir
    else
      VGPU_WARDEN_KUBERNETES_VERSION=$version bash "$here/build.sh"
    fi
  done
  exit 0
fi
if [[ -n "${VGPU_WARDEN_KUBERNETES_VERSION:-}" ]]; then
  if [[ ! "$VGPU_WARDEN_KUBERNETES_VERSION" =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
    echo "build.sh: VGPU_WARDEN_KUBERNETES_VERSION must look like v1.37.2, got '${VGPU_WARDEN_KUBERNETES_VERSION:0:40}'" >&2
    exit 2
  fi
  KUBERNETES_VERSION=$VGPU_WARDEN_KUBERNETES_VERSION
fi

cache_root=${VGPU_WARDEN_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/k8s}
build_key="kube-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}"
out_dir="$cache_root/$build_key"
bin_dir="$out_dir/bin"
stamp="$out_dir/.complete"

if $print_bin_dir; then
  echo "$bin_dir"
  exit 0
fi

tool_name=k8s-build
# shellcheck source=../lib/steps.sh
source "$here/../lib/steps.sh"

# The stamp records exactly what was built; binaries without a matching stamp are rebuilt.
if [[ -f "$stamp" && "$(cat "$stamp")" == "$build_key" ]] \
   && [[ -x "$bin_dir/kube-apiserver" && -x "$bin_dir/kube-scheduler" && -x "$bin_dir/kube-controller-manager" && -x "$bin_dir/kubelet" && -x "$bin_dir/etcd" ]]; then
  step "cached: $bin_dir ($build_key)"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: Go is not installed or not on PATH; install Go >= 1.24 to build the test control plane" >&2
  exit 1
fi

mkdir -p "$out_dir"
log="$out_dir/build.log"
: >"$log"
work="$out_dir/work"
# Compile into a staging directory and swap it in at the end: control planes started from the old
# binaries (tests running meanwhile) keep finding them until the new ones are complete.
new_bin="$out_dir/bin.partial"
rm -rf "$work" "$new_bin"
mkdir -p "$work/kube" "$work/etcd" "$new_bin"

kube_minor=${KUBERNETES_VERSION#v1.}; kube_minor=${kube_minor%%.*}
staging_version="v0.${KUBERNETES_VERSION#v1.}"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

make_kube_module() {
  cd "$work/kube"
  go mod init vgpu-warden.local/k8sbins
  # Replace every staging module that k8s.io/kubernetes maps to ./staging with its published twin;
  # replaces of a dependency are ignored, so without this the build asks for k8s.io/api@v0.0.0.
  local mod_file
  mod_file=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [[ -n "$mod_file" ]] || { echo "could not locate go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION"; return 1; }
  local staging
  staging=$(awk '$1 ~ /^k8s\.io\// && $2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$mod_file" | sort -u)
  [[ -n "$staging" ]] || { echo "no staging replaces found in $mod_file"; return 1; }
  local m
  for m in $staging; do go mod edit "-replace=$m=$m@$staging_version"; done
  cat >tools.go <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  go get "k8s.io/kubernetes@$KUBERNETES_VERSION"
  go mod tidy
}

make_etcd_module() {
  cd "$work/etcd"
  go mod init vgpu-warden.local/etcdbin
  cat >tools.go <<GO
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go mod tidy
}

build_kube() {
  cd "$work/kube"
  local v=$KUBERNETES_VERSION
  go build -trimpath -tags=selinux,notest,grpcnotrace \
    -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/client-go/pkg/version.gitVersion=$v" \
    -o "$new_bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubelet
}

build_etcd() {
  # etcd does not depend on the Kubernetes version: take it from a complete entry of another version.
  local other
  for other in "$cache_root"/kube-*_etcd-"$ETCD_VERSION"; do
    if [[ -f "$other/.complete" && -x "$other/bin/etcd" ]]; then
      cp "$other/bin/etcd" "$new_bin/etcd"
      echo "copied etcd $ETCD_VERSION from $other"
      return 0
    fi
  done
  cd "$work/etcd"
  go build -trimpath -ldflags="-s -w" -o "$new_bin/etcd" go.etcd.io/etcd/server/v3
}

check_versions() {
  # Captured, not piped into grep -q: with pipefail an early-exiting grep fails the step via SIGPIPE.
  local apiserver scheduler controller_manager kubelet etcd
  apiserver=$("$new_bin/kube-apiserver" --version)
  scheduler=$("$new_bin/kube-scheduler" --version)
  controller_manager=$("$new_bin/kube-controller-manager" --version)
  kubelet=$("$new_bin/kubelet" --version)
  etcd=$("$new_bin/etcd" --version)
  printf '%s\n' "$apiserver" "$scheduler" "$controller_manager" "$kubelet" "$etcd"
  [[ "$apiserver" == *"$KUBERNETES_VERSION"* && "$scheduler" == *"$KUBERNETES_VERSION"* && "$controller_manager" == *"$KUBERNETES_VERSION"* \
     && "$kubelet" == *"$KUBERNETES_VERSION"* ]] \
    || { echo "expected Kubernetes $KUBERNETES_VERSION"; return 1; }
  [[ "$etcd" == *"${ETCD_VERSION#v}"* ]] || { echo "expected etcd $ETCD_VERSION"; return 1; }
}

step "building into $out_dir (log: $log)"
run "resolve k8s.io/kubernetes $KUBERNETES_VERSION modules" make_kube_module
if ! compgen -G "$cache_root/kube-*_etcd-$ETCD_VERSION/.complete" >/dev/null; then
  run "resolve go.etcd.io/etcd/server/v3 $ETCD_VERSION modules" make_etcd_module
fi
run "compile kube-apiserver, kube-scheduler, kube-controller-manager and kubelet" build_kube
run "compile etcd" build_etcd
run "check binary versions" check_versions
rm -rf "$bin_dir"
mv "$new_bin" "$bin_dir"
echo "$build_key" >"$stamp"
rm -rf "$work"
step "done: $bin_dir"
