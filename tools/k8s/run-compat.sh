#!/usr/bin/env bash
# The compatibility suite: the tests of .mocharc.compat.json (the kustomize base and the chart applied
# server-side, the admission policies enforcing, webhook CREATE and DELETE, filter/prioritize/bind
# through that version's kube-scheduler, real nodes on that version's kubelet and the seed scenario on
# them) on each Kubernetes version of KUBERNETES_COMPAT_VERSIONS in versions.env: the oldest and the
# newest the README and the chart claim. Builds a version first when the cache lacks it.
#
# Usage: tools/k8s/run-compat.sh [version ...]   (default: every KUBERNETES_COMPAT_VERSIONS entry)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || read -r -a versions <<<"$KUBERNETES_COMPAT_VERSIONS"
for version in "${versions[@]}"; do
  echo "[compat] Kubernetes $version"
  started=$SECONDS
  VGPU_WARDEN_KUBERNETES_VERSION=$version bash "$here/build.sh"
  VGPU_WARDEN_KUBERNETES_VERSION=$version npx mocha --config "$here/../../.mocharc.compat.json"
  echo "[compat] Kubernetes $version passed in $((SECONDS - started)) s"
done
