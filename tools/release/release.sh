#!/usr/bin/env bash
# Builds a release into release/ (`npm run release`, which runs tools/setup/setup.sh --for release
# first): the packaged Helm chart, the image as an OCI archive, and their SHA-256 sums, then checks
# that they agree.
#
#   release/vgpu-warden-<v>.tgz         helm package of charts/vgpu-warden
#   release/vgpu-warden-<v>.oci.tar     the image of tools/image/build.sh (localhost/vgpu-warden:<v>),
#                                       as an OCI archive whose image is named vgpu-warden:<v>
#   release/SHA256SUMS                  sha256sum of both (check with `sha256sum -c SHA256SUMS`)
#
# <v> is package.json's version; Chart.yaml's version and appVersion must be the same, and the
# chart's default image (image.repository:appVersion as rendered) must be the archive's image name.
# Usage: tools/release/release.sh [--out DIR]   (default: release/ in the repository; run as root:
# the image build needs it)
#   VGPU_WARDEN_HELM   helm to use (default: the one tools/helm/build.sh builds into its cache)
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$repo/release
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:-}; shift 2 || { echo "release.sh: --out needs a directory" >&2; exit 2; } ;;
    --out=*) out=${1#--out=}; shift ;;
    *) echo "release.sh: unknown argument '${1:0:60}' (allowed: --out DIR)" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "release.sh: --out needs a directory" >&2; exit 2; }

tool_name=release
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/release.log"
: >"$log"
# shellcheck source=../lib/steps.sh
source "$here/../lib/steps.sh"
fail() { echo "[release] FAILED: $*" >&2; exit 1; }
started=$SECONDS

# One version: package.json, Chart.yaml's version and appVersion.
version=$(sed -n 's/^  "version": "\([^"]*\)",$/\1/p' "$repo/package.json")
chart_yaml="$repo/charts/vgpu-warden/Chart.yaml"
chart_field() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\} *\$/\1/p" "$chart_yaml"; }
chart_version=$(chart_field version)
app_version=$(chart_field appVersion)
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || fail "package.json's version '$version' is not a semantic version"
if [[ "$chart_version" != "$version" || "$app_version" != "$version" ]]; then
  fail "versions differ: package.json $version, Chart.yaml version $chart_version and appVersion $app_version"
fi
step "version $version (package.json, Chart.yaml version and appVersion)"

chart="vgpu-warden-$version.tgz"
archive="vgpu-warden-$version.oci.tar"
image="localhost/vgpu-warden:$version"
archive_name="vgpu-warden:$version"
rm -f "$out/$chart" "$out/$archive" "$out/SHA256SUMS"

helm=${VGPU_WARDEN_HELM:-}
if [[ -z "$helm" ]]; then
  bash "$repo/tools/helm/build.sh"
  helm=$(bash "$repo/tools/helm/build.sh" --print-path)
fi
helm_home=$(mktemp -d)
trap 'rm -rf "$helm_home"' EXIT
helm_run() { HOME=$helm_home HELM_CACHE_HOME=$helm_home/cache HELM_CONFIG_HOME=$helm_home/config HELM_DATA_HOME=$helm_home/data "$helm" "$@"; }

run "helm package charts/vgpu-warden" helm_run package "$repo/charts/vgpu-warden" --destination "$out"
[[ -f "$out/$chart" ]] || fail "helm package wrote no $chart (log: $log)"

bash "$repo/tools/image/build.sh" --tag "$image"
run "buildah push $image to $archive" buildah push --quiet "$image" "oci-archive:$out/$archive:$archive_name"

# Agreement: the archive's image name and the image the packaged chart deploys by default.
archive_ref=$(tar -xOf "$out/$archive" index.json | sed -n 's/.*"org\.opencontainers\.image\.ref\.name":"\([^"]*\)".*/\1/p')
[[ "$archive_ref" == "$archive_name" ]] || fail "$archive names its image '$archive_ref', expected '$archive_name'"
chart_image=$(helm_run template vgpu-warden "$out/$chart" --namespace vgpu-warden --show-only templates/deployment.yaml \
  | sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' | head -n 1)
[[ "$chart_image" == "$archive_name" ]] || fail "the chart's default image is '$chart_image', the archive's '$archive_name'"
packaged_app_version=$(helm_run show chart "$out/$chart" | sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p')
[[ "$packaged_app_version" == "$version" ]] || fail "the packaged chart's appVersion is '$packaged_app_version', not $version"
step "agree: the chart deploys $chart_image by default, the archive holds $archive_ref"

(cd "$out" && sha256sum "$chart" "$archive" >SHA256SUMS && sha256sum --check --quiet SHA256SUMS)
step "done in $((SECONDS - started))s: $out/{$chart,$archive,SHA256SUMS}"
