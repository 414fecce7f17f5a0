#!/usr/bin/env bash
# Builds the helm v3 CLI from Go modules (helm.sh/helm/v3) into a cache directory outside git, at the
# version pinned in versions.env, for the chart tests (charts/vgpu-warden) on machines without helm.
#
# Usage: tools/helm/build.sh [--print-bin-dir | --print-path]
#   VGPU_WARDEN_HELM_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/helm)
#
# One progress line per step; the full Go output goes to a log file that is named on failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
: "${HELM_VERSION:?versions.env must set HELM_VERSION}"

cache_root=${VGPU_WARDEN_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/helm}
build_key="helm-${HELM_VERSION}"
out_dir="$cache_root/$build_key"
bin_dir="$out_dir/bin"
stamp="$out_dir/.complete"

case "${1:-}" in
  --print-bin-dir) echo "$bin_dir"; exit 0 ;;
  --print-path) echo "$bin_dir/helm"; exit 0 ;;
  "") ;;
  *) echo "build.sh: unknown argument '$1' (allowed: --print-bin-dir, --print-path)" >&2; exit 2 ;;
esac

tool_name=helm-build
# shellcheck source=../lib/steps.sh
source "$here/../lib/steps.sh"

# The stamp records exactly what was built; a binary without a matching stamp is rebuilt.
if [[ -f "$stamp" && "$(cat "$stamp")" == "$build_key" && -x "$bin_dir/helm" ]]; then
  step "cached: $bin_dir/helm ($build_key)"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: Go is not installed or not on PATH; install Go >= 1.24 to build helm" >&2
  exit 1
fi

mkdir -p "$out_dir"
log="$out_dir/build.log"
: >"$log"
# Install into a staging directory and swap it in at the end: tests running meanwhile keep finding
# the old binary until the new one is complete.
new_bin="$out_dir/bin.partial"
rm -rf "$new_bin"
mkdir -p "$new_bin"

export CGO_ENABLED=0 GOFLAGS=-mod=mod
ldflags=""

resolve() {
  # What helm's own Makefile stamps in: its version, and the Kubernetes version `helm template`
  # assumes without --kube-version (client-go's minor, so a chart's kubeVersion is judged right).
  local mod_file client_go minor
  mod_file=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [[ -n "$mod_file" ]] || { echo "could not locate go.mod of helm.sh/helm/v3@$HELM_VERSION"; return 1; }
  client_go=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$mod_file")
  [[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || { echo "no k8s.io/client-go v0.x requirement in $mod_file (found '$client_go')"; return 1; }
  minor=${BASH_REMATCH[1]}
  echo "client-go $client_go: default Kubernetes version 1.$minor"
  local p=helm.sh/helm/v3
  ldflags="-s -w -X $p/internal/version.version=$HELM_VERSION -X $p/internal/version.gitTreeState=clean"
  ldflags+=" -X $p/pkg/lint/rules.k8sVersionMajor=1 -X $p/pkg/lint/rules.k8sVersionMinor=$minor"
  ldflags+=" -X $p/pkg/chartutil.k8sVersionMajor=1 -X $p/pkg/chartutil.k8sVersionMinor=$minor"
}

install_helm() {
  GOBIN="$new_bin" go install -trimpath -ldflags="$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

check_version() {
  # Captured, not piped into grep -q: with pipefail an early-exiting grep fails the step via SIGPIPE.
  local version
  version=$("$new_bin/helm" version --template '{{.Version}}')
  echo "$version"
  [[ "$version" == "$HELM_VERSION" ]] || { echo "expected helm $HELM_VERSION, got $version"; return 1; }
}

step "building into $out_dir (log: $log)"
# run() groups with braces, not a subshell, so resolve sets $ldflags for the next step.
run "resolve helm.sh/helm/v3 $HELM_VERSION" resolve
run "compile helm" install_helm
run "check the binary's version" check_version
rm -rf "$bin_dir"
mv "$new_bin" "$bin_dir"
echo "$build_key" >"$stamp"
step "done: $bin_dir/helm"
