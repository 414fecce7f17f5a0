#!/usr/bin/env bash
# Builds the vgpu-warden OCI image with buildah, no Docker engine needed (`npm run image`).
#
# Usage: tools/image/build.sh [--base auto|registry|local] [--tag NAME]
#   --base auto      (default) the registry's node:24-slim if it is in local storage or can be pulled
#                    within 20 s, else the local base
#          registry  the registry's node:24-slim (VGPU_WARDEN_NODE_IMAGE), pulled if missing
#          local     a Debian bookworm minbase root made by debootstrap plus the project's pinned
#                    Node 24 (node_modules/node), committed as localhost/vgpu-warden-base:...
#   --tag NAME       image name (default localhost/vgpu-warden:<package.json version>)
# Environment:
#   VGPU_WARDEN_IMAGE_BASE   default for --base
#   VGPU_WARDEN_IMAGE_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/image)
#   VGPU_WARDEN_NODE_IMAGE   registry base (default docker.io/library/node:24-slim)
#   DEBIAN_MIRROR            mirror for debootstrap (default http://deb.debian.org/debian)
#   BUILDAH_ISOLATION        buildah's isolation (default chroot: works where runc/crun cannot start)
#
# The build has no network: the app is built on the host (npm ci, npm run build, npm prune
# --omit=dev without the stand-ins workspace package and its gRPC, in a staging copy of the files
# .dockerignore lets into a Docker build), so npm uses the
# host's own registry settings and CA, and nothing of them reaches the image. The image is the
# Dockerfile's runtime stage with each `COPY --from=build /app/X` turned into `COPY X` of that staged
# build. An image built from the same sources on the same base is reused (tag src-<hash>).
# One progress line per step; the full output goes to a log file that is named on failure.
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

# Bump when the way the local base is made changes, so cached roots and bases are not reused.
readonly BASE_RECIPE=1
readonly SUITE=bookworm
readonly PULL_TIMEOUT_S=20

base_mode=${VGPU_WARDEN_IMAGE_BASE:-auto}
tag=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) base_mode=${2:-}; shift 2 || { echo "build.sh: --base needs a value (auto, registry or local)" >&2; exit 2; } ;;
    --base=*) base_mode=${1#--base=}; shift ;;
    --tag) tag=${2:-}; shift 2 || { echo "build.sh: --tag needs a value" >&2; exit 2; } ;;
    --tag=*) tag=${1#--tag=}; shift ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument '${1:0:60}' (allowed: --base auto|registry|local, --tag NAME)" >&2; exit 2 ;;
  esac
done
case "$base_mode" in
  auto|registry|local) ;;
  *) echo "build.sh: --base must be auto, registry or local (got '${base_mode:0:60}')" >&2; exit 2 ;;
esac

cache_root=${VGPU_WARDEN_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-warden/image}
registry_base=${VGPU_WARDEN_NODE_IMAGE:-docker.io/library/node:24-slim}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
isolation=${BUILDAH_ISOLATION:-chroot}
mkdir -p "$cache_root"
log="$cache_root/build.log"
: >"$log"
started=$SECONDS

tool_name=image
# shellcheck source=../lib/steps.sh
source "$here/../lib/steps.sh"
fail() { echo "[image] FAILED: $*" >&2; exit 1; }

command -v buildah >/dev/null 2>&1 || fail "buildah is not installed (Debian: apt-get install buildah debootstrap)"
package_field() { node -e 'const p = require(process.argv[1]); console.log(process.argv[2].split(".").reduce((o, k) => o?.[k], p) ?? "")' "$repo/package.json" "$1"; }
version=$(package_field version)
[[ -n "$tag" ]] || tag="localhost/vgpu-warden:$version"

image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }
image_id() { buildah inspect --type image --format '{{.FromImageID}}' "$1"; }
sha() { sha256sum | cut -c1-16; }

# --- the base --------------------------------------------------------------------------------

registry_base_available() {
  if image_exists "$registry_base"; then return 0; fi
  step "pulling $registry_base (at most ${PULL_TIMEOUT_S}s)"
  timeout "$PULL_TIMEOUT_S" buildah pull --quiet --retry 0 "$registry_base" >>"$log" 2>&1
}

pinned_node() {
  # The node@24 devDependency's binary: the official Linux build, packaged on npm as node-<os>-<arch>.
  local bin="$repo/node_modules/node/bin/node" wanted found
  [[ -x "$bin" ]] || fail "$bin is missing: run npm ci first (the local base uses the project's pinned Node)"
  wanted=$(package_field devDependencies.node | grep -o '[0-9]\+' | sed -n 1p)
  found=$("$bin" --version)
  [[ "$found" == "v$wanted."* ]] || fail "node_modules/node is $found but package.json pins node@${wanted}: run npm ci"
  node_bin=$(realpath "$bin")
  node_version=$found
}

make_rootfs() {
  # A Debian minbase root as a tar, kept in the cache: debootstrap is the slow part (about a minute).
  local tar=$1 work=$2
  command -v debootstrap >/dev/null 2>&1 || fail "debootstrap is not installed (Debian: apt-get install debootstrap), or use --base registry"
  [[ $(id -u) -eq 0 ]] || fail "debootstrap needs root to make the local base; run as root or use --base registry"
  run "debootstrap $SUITE minbase from $mirror" debootstrap --variant=minbase --arch="$arch" "$SUITE" "$work/root" "$mirror"
  # What an image never needs: downloaded packages, package lists, logs, documentation.
  rm -rf "$work"/root/var/cache/apt/archives/*.deb "$work"/root/var/lib/apt/lists/* "$work"/root/var/log/* \
    "$work"/root/usr/share/doc/* "$work"/root/usr/share/man/* "$work"/root/usr/share/info/*
  # /dev, /proc and /sys are provided by the runtime; debootstrap's device nodes stay out.
  run "archiving the root" tar --numeric-owner -C "$work/root" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf "$tar.partial" .
  mv "$tar.partial" "$tar"
  rm -rf "$work/root"
}

local_base() {
  # Sets base. No subshell: base_container must reach the EXIT trap.
  local root_key tar base_key ref
  arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
  pinned_node
  root_key=$(printf 'recipe=%s suite=%s variant=minbase arch=%s mirror=%s\n' "$BASE_RECIPE" "$SUITE" "$arch" "$mirror" | sha)
  tar="$cache_root/rootfs-$SUITE-minbase-$arch-$root_key.tar"
  base_key=$( { echo "$root_key"; sha256sum <"$node_bin"; } | sha)
  ref="localhost/vgpu-warden-base:$SUITE-node${node_version#v}-$base_key"
  base=$ref
  if image_exists "$ref"; then
    step "base: $ref (cached)"
    return
  fi
  if [[ -f "$tar" ]]; then step "root: $tar (cached)"; else make_rootfs "$tar" "$work"; fi
  base_container=$(buildah from --quiet scratch)
  run "base: Debian root + Node $node_version" buildah add --quiet "$base_container" "$tar" /
  run "base: adding node" buildah copy --quiet --chmod 0755 "$base_container" "$node_bin" /usr/local/bin/node
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env "NODE_VERSION=${node_version#v}" --cmd '["node"]' \
    --label "io.vgpu-warden.base=debian-$SUITE-minbase+node-$node_version" "$base_container"
  run "base: commit $ref" buildah commit --quiet --rm "$base_container" "$ref"
  base_container=""
}

base_container=""
work=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-warden-image.XXXXXX")
cleanup() {
  [[ -z "$base_container" ]] || buildah rm "$base_container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

case "$base_mode" in
  registry)
    registry_base_available || fail "cannot pull $registry_base (see $log); use --base local to make a base from Debian packages"
    base=$registry_base ;;
  local)
    local_base ;;
  auto)
    if registry_base_available; then
      base=$registry_base
    else
      step "$registry_base is not reachable: making the base from Debian packages"
      local_base
    fi ;;
esac

# --- the app ---------------------------------------------------------------------------------

# The files a Docker build's context holds: the `!` lines of .dockerignore.
mapfile -t context_files < <(sed -n 's/^!\(.*[^/]\)\/*$/\1/p' "$repo/.dockerignore")
[[ ${#context_files[@]} -gt 0 ]] || fail ".dockerignore lists no files to build from"

# Everything that decides the image's content: the sources, the Dockerfile, this tool, the base.
source_hash=$(
  cd "$repo"
  {
    image_id "$base"
    find "${context_files[@]}" Dockerfile .dockerignore tools/image -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha
)
hash_ref="localhost/vgpu-warden:src-$source_hash"

if image_exists "$hash_ref"; then
  buildah tag "$hash_ref" "$tag"
  step "cached: $tag is $hash_ref (same sources and base), $((SECONDS - started))s"
  exit 0
fi

app="$work/app"
mkdir -p "$app"
# --parents: nested entries (packages/stand-ins/src) keep their path.
(cd "$repo" && cp -R --parents "${context_files[@]}" "$app/")
run "app: npm ci (host)" bash -c "cd '$app' && npm ci --no-audit --no-fund"
run "app: npm run build" bash -c "cd '$app' && npm run build"
# `npm prune --workspaces=false` keeps the workspace link: the package leaves the tree (and package.json's
# workspaces) first, so that prune finds it and its gRPC extraneous; empty scope folders go too.
run "app: npm prune --omit=dev, without the stand-ins package" bash -c "cd '$app' && npm pkg delete workspaces \
  && rm -rf packages node_modules/@vgpu-warden && npm prune --omit=dev --no-audit --no-fund && find node_modules -maxdepth 1 -type d -empty -delete"
# The stand-ins package (a workspace) and its gRPC are for tests and local mode, never for the image.
for left in node_modules/@vgpu-warden node_modules/@grpc; do
  [[ ! -e "$app/$left" ]] || fail "$left is still in the pruned build: the image must not hold the stand-ins package or gRPC"
done
# node_modules built here runs on the image's libc only if it is pure JavaScript.
native=$(find "$app/node_modules" -name '*.node' -type f | sed -n 1,3p)
[[ -z "$native" ]] || fail "native addons in the production dependencies (${native//$'\n'/, }): a host build would not match the image; use docker build"

# The Dockerfile's global ARGs and its last (runtime) stage, copying from the staged build.
containerfile="$work/Containerfile"
awk '
  /^[[:space:]]*FROM[[:space:]]/ { froms++; stage = "" }
  froms == 0 && /^[[:space:]]*ARG[[:space:]]/ { header = header $0 "\n" }
  froms > 0 { stage = stage $0 "\n" }
  END { printf "%s\n%s", header, stage }
' "$repo/Dockerfile" | sed -E 's#^COPY --from=build /app/([^ ]+) #COPY \1 #' >"$containerfile"
if grep -q -- '--from=' "$containerfile" || [[ $(grep -c '^COPY ' "$containerfile") -lt 3 ]]; then
  fail "the Dockerfile's runtime stage must copy package.json, node_modules and dist with 'COPY --from=build /app/X ...' lines; generated: $(tr '\n' ' ' <"$containerfile")"
fi
cp "$containerfile" "$cache_root/Containerfile.last"

run "image: buildah bud ($isolation isolation) on $base" buildah bud --quiet --isolation "$isolation" --pull=never \
  --build-arg "NODE_IMAGE=$base" \
  --label "org.opencontainers.image.title=vgpu-warden" --label "org.opencontainers.image.version=$version" \
  --label "io.vgpu-warden.source-hash=$source_hash" --label "io.vgpu-warden.base=$base" \
  -f "$containerfile" -t "$hash_ref" -t "$tag" "$app"

# Older src-<hash> tags only pin images nobody asks for any more.
while read -r old; do
  [[ "$old" == "$hash_ref" ]] || buildah rmi "$old" >>"$log" 2>&1 || true
done < <(buildah images --noheading --format '{{.Name}}:{{.Tag}}' localhost/vgpu-warden 2>/dev/null | grep ':src-' || true)

# sed, not head: under pipefail a reader that stops early can kill the writer with SIGPIPE (exit
# 141), which failed a fresh-clone CI run right after a successful buildah bud.
size=$(buildah images --noheading --format '{{.Size}}' "$tag" | sed -n 1p)
step "built $tag ($size, base $base) in $((SECONDS - started))s"
