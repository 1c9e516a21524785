#!/usr/bin/env bash
# Builds the Quarry image from the repository's Dockerfile without any container registry, for the
# real-node tests (tests/tests/kube_node.rs): Debian bookworm base images made with debootstrap and
# committed with buildah stand in for the Dockerfile's public bases (its BUILD_IMAGE and
# RUNTIME_IMAGE build arguments):
#   quarry-runtime-base  bookworm minbase + ca-certificates, for distroless/cc-debian12
#   quarry-build-base    the runtime base + build-essential + this machine's Rust toolchain, for rust:bookworm
#                        (only for a build from source)
#   quarry-searx         bookworm minbase + Debian's searx, with tests/images/searx/entrypoint.sh mapping
#                        what the operator's SearchEngine Deployment sets (SearXNG's interface) onto it
#   quarry-redis         the runtime base + Debian's redis-server (tests/images/redis/), for the workers
# Every image is tagged with a hash of its inputs and the quarry image is kept as an OCI archive in
# the cache directory ($QUARRY_IMAGE_CACHE, default /var/cache/quarry-images: outside the clone, so
# another clone on the same machine, CI's included, reuses it). Only what changed is rebuilt; within
# a rebuild buildah's layer cache keeps the Dockerfile's dependency layer while Cargo.lock is unchanged.
#
#   scripts/build-images.sh    -> prints `image=localhost/quarry:<hash>`, `archive=<file>`,
#                                 `searx_image=localhost/quarry-searx:<hash>`, `searx_archive=<file>`,
#                                 `redis_image=localhost/quarry-redis:<hash>`, `redis_archive=<file>`
#
# QUARRY_BINARY=PATH: the image is the Dockerfile's `prebuilt` target around that binary (a
# stripped copy), e.g. the debug `target/debug/quarry` the test suite builds anyway on this bookworm
# host: seconds instead of a release build of the workspace inside buildah (68 min cold on the
# shared 2-core machine). Without it, the Dockerfile's default target builds from source, as a
# user's `docker build` does; QUARRY_IMAGE_OPT_LEVEL (default 1) is then the release build's
# opt-level (cargo's default 3 is what a plain `docker build` uses).
# Needs root, debootstrap, buildah (Debian packages).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache=${QUARRY_IMAGE_CACHE:-/var/cache/quarry-images}
opt=${QUARRY_IMAGE_OPT_LEVEL:-1}
mirror=${QUARRY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache/debs" "$cache/tmp"
log() { echo "build-images: $*" >&2; }
have_image() { buildah images --quiet "$1" >/dev/null 2>&1; }
binary=${QUARRY_BINARY:-}
if [ -n "$binary" ] && [ ! -x "$binary" ]; then
  echo "build-images: QUARRY_BINARY=$binary is not an executable file" >&2
  exit 1
fi
key_of() { sha256sum | cut -c1-16; }

# A bookworm minbase root filesystem with extra packages, committed as NAME:KEY.
debian_image() {
  local name=$1 packages=$2 key=$3 rootfs tarball ctr
  have_image "localhost/$name:$key" && { log "$name:$key cached"; return; }
  rootfs="$cache/tmp/$name-rootfs"; rm -rf "$rootfs"
  log "debootstrap $name ($packages)"
  debootstrap --variant=minbase --cache-dir="$cache/debs" --include="$packages" bookworm "$rootfs" "$mirror" >"$cache/tmp/$name.log" 2>&1 \
    || { tail -n 20 "$cache/tmp/$name.log" >&2; exit 1; }
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
  # /dev is the runtime's to populate; device nodes in a layer are refused by rootless tools.
  tarball="$cache/tmp/$name.tar"
  tar -C "$rootfs" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf "$tarball" .
  ctr=$(buildah from scratch)
  buildah add --quiet "$ctr" "$tarball" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah commit --quiet "$ctr" "localhost/$name:$key" >/dev/null
  buildah rm "$ctr" >/dev/null
  rm -rf "$rootfs" "$tarball"
}

runtime_pkgs=ca-certificates
runtime_key=$(echo "v1 bookworm $runtime_pkgs $mirror" | key_of)
debian_image quarry-runtime-base "$runtime_pkgs" "$runtime_key"

# The build base: the Dockerfile's build stage expects cargo on PATH and CARGO_HOME=/usr/local/cargo,
# as in the official rust image. The toolchain is this machine's (Debian's rustc is too old for
# edition 2024); its version is part of the key.
sysroot=$(rustc --print sysroot)
build_pkgs=ca-certificates,build-essential,pkg-config,perl
rust_version=$(rustc -V)
build_key=$(echo "v1 bookworm $build_pkgs $mirror $rust_version" | key_of)
if [ -z "$binary" ] && ! have_image "localhost/quarry-build-base:$build_key"; then
  debian_image quarry-build-debian "$build_pkgs" "$build_key"
  ctr=$(buildah from "localhost/quarry-build-debian:$build_key")
  log "copying the Rust toolchain ($rust_version)"
  buildah copy --quiet "$ctr" "$sysroot/bin" /usr/local/rust/bin >/dev/null
  buildah copy --quiet "$ctr" "$sysroot/lib" /usr/local/rust/lib >/dev/null
  buildah config --env CARGO_HOME=/usr/local/cargo \
    --env PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah commit --quiet "$ctr" "localhost/quarry-build-base:$build_key" >/dev/null
  buildah rm "$ctr" >/dev/null
  buildah rmi "localhost/quarry-build-debian:$build_key" >/dev/null
fi

# The quarry image's inputs: what .dockerignore admits into the build context (or, prebuilt, the
# binary and config/), the Dockerfile, the bases and the opt-level.
cd "$repo"
if [ -n "$binary" ]; then
  inputs=$( { sha256sum "$binary"; find config -type f -print0 | sort -z | xargs -0 sha256sum
    sha256sum Dockerfile .dockerignore; echo "prebuilt $runtime_key"; } | key_of)
else
  mapfile -t admitted < <(sed -n 's/^!//p' .dockerignore)
  inputs=$( { find "${admitted[@]}" -type f -print0 | sort -z | xargs -0 sha256sum
    sha256sum Dockerfile .dockerignore; echo "$runtime_key $build_key $opt"; } | key_of)
fi
image="localhost/quarry:$inputs"
# Prebuilt and from-source archives are superseded separately (a from-source build is the costly one).
kind=$([ -n "$binary" ] && echo prebuilt- || true)
archive="$cache/quarry-$kind$inputs.oci.tar"
if [ ! -f "$archive" ] && [ -n "$binary" ]; then
  log "building $image around $binary (prebuilt)"
  start=$(date +%s)
  bindir="$cache/tmp/quarry-bin"; rm -rf "$bindir"; mkdir -p "$bindir"
  # Debug sections are most of a debug binary; the image does not need them.
  strip --strip-debug -o "$bindir/quarry" "$binary"
  buildah bud --layers --target prebuilt --build-context "quarry-bin=$bindir" \
    --build-arg "RUNTIME_IMAGE=localhost/quarry-runtime-base:$runtime_key" \
    -t "$image" -f Dockerfile . >"$cache/tmp/quarry-build.log" 2>&1 \
    || { tail -n 40 "$cache/tmp/quarry-build.log" >&2; exit 1; }
  rm -rf "$bindir"
  buildah push --quiet "$image" "oci-archive:$archive.tmp:$image" >/dev/null
  mv "$archive.tmp" "$archive"
  log "built $image in $(( $(date +%s) - start )) s"
elif [ ! -f "$archive" ]; then
  # Crates come from crates.io through the host network, cached between builds; seeded from this
  # machine's cargo cache when it has one.
  registry="$cache/cargo-registry"
  if [ ! -d "$registry" ] && [ -d "${CARGO_HOME:-$HOME/.cargo}/registry/cache" ]; then
    mkdir -p "$registry.tmp"
    cp -r "${CARGO_HOME:-$HOME/.cargo}/registry/index" "${CARGO_HOME:-$HOME/.cargo}/registry/cache" "$registry.tmp/"
    mv "$registry.tmp" "$registry"
  fi
  mkdir -p "$registry"
  log "building $image (opt-level $opt)"
  start=$(date +%s)
  buildah bud --layers --network host --volume "$registry:/usr/local/cargo/registry" \
    --build-arg "BUILD_IMAGE=localhost/quarry-build-base:$build_key" \
    --build-arg "RUNTIME_IMAGE=localhost/quarry-runtime-base:$runtime_key" \
    --build-arg "CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt" \
    -t "$image" -f Dockerfile . >"$cache/tmp/quarry-build.log" 2>&1 \
    || { tail -n 40 "$cache/tmp/quarry-build.log" >&2; exit 1; }
  log "built $image in $(( $(date +%s) - start )) s"
  buildah push --quiet "$image" "oci-archive:$archive.tmp:$image" >/dev/null
  mv "$archive.tmp" "$archive"
fi
# Earlier archives of the quarry image are superseded (and their images: a debug binary's image is
# a new one for every source change).
for old in "$cache"/quarry-"$kind"[0-9a-f]*.oci.tar; do
  [ -e "$old" ] && [ "$old" != "$archive" ] || continue
  old_tag=${old##*/quarry-"$kind"}; old_tag=${old_tag%.oci.tar}
  buildah rmi "localhost/quarry:$old_tag" >/dev/null 2>&1 || true
  rm -f "$old"
done

# The search-engine image: Debian's searx behind SearXNG's interface (tests/images/searx/).
# debootstrap's resolver does not follow virtual packages: python3-cryptography's
# python3-cffi-backend-api-min/max are provided by python3-cffi-backend, named here.
searx_pkgs=ca-certificates,searx,python3-searx,python3-cffi-backend
searx_base_key=$(echo "v1 bookworm $searx_pkgs $mirror" | key_of)
debian_image quarry-searx-base "$searx_pkgs" "$searx_base_key"
searx_inputs=$( { find tests/images/searx -type f -print0 | sort -z | xargs -0 sha256sum
  echo "$searx_base_key"; } | key_of)
searx_image="localhost/quarry-searx:$searx_inputs"
searx_archive="$cache/quarry-searx-$searx_inputs.oci.tar"
if [ ! -f "$searx_archive" ]; then
  log "building $searx_image"
  start=$(date +%s)
  buildah bud --layers --build-arg "BASE_IMAGE=localhost/quarry-searx-base:$searx_base_key" \
    -t "$searx_image" -f tests/images/searx/Containerfile tests/images/searx >"$cache/tmp/searx-build.log" 2>&1 \
    || { tail -n 40 "$cache/tmp/searx-build.log" >&2; exit 1; }
  buildah push --quiet "$searx_image" "oci-archive:$searx_archive.tmp:$searx_image" >/dev/null
  mv "$searx_archive.tmp" "$searx_archive"
  for old in "$cache"/quarry-searx-*.oci.tar; do
    [ -e "$old" ] && [ "$old" != "$searx_archive" ] || continue
    old_tag=${old##*/quarry-searx-}; old_tag=${old_tag%.oci.tar}
    buildah rmi "localhost/quarry-searx:$old_tag" >/dev/null 2>&1 || true
    rm -f "$old"
  done
  log "built $searx_image in $(( $(date +%s) - start )) s"
fi
# The Redis image of the workers' test: Debian's redis-server over the runtime base
# (tests/images/redis/), so a machine debootstraps once for both; apt-get fetches it through the
# host network, as the from-source quarry build fetches crates.
redis_inputs=$( { find tests/images/redis -type f -print0 | sort -z | xargs -0 sha256sum
  echo "$runtime_key"; } | key_of)
redis_image="localhost/quarry-redis:$redis_inputs"
redis_archive="$cache/quarry-redis-$redis_inputs.oci.tar"
if [ ! -f "$redis_archive" ]; then
  log "building $redis_image"
  start=$(date +%s)
  buildah bud --layers --network host --build-arg "BASE_IMAGE=localhost/quarry-runtime-base:$runtime_key" \
    -t "$redis_image" -f tests/images/redis/Containerfile tests/images/redis >"$cache/tmp/redis-build.log" 2>&1 \
    || { tail -n 40 "$cache/tmp/redis-build.log" >&2; exit 1; }
  buildah push --quiet "$redis_image" "oci-archive:$redis_archive.tmp:$redis_image" >/dev/null
  mv "$redis_archive.tmp" "$redis_archive"
  for old in "$cache"/quarry-redis-*.oci.tar; do
    [ -e "$old" ] && [ "$old" != "$redis_archive" ] || continue
    old_tag=${old##*/quarry-redis-}; old_tag=${old_tag%.oci.tar}
    buildah rmi "localhost/quarry-redis:$old_tag" >/dev/null 2>&1 || true
    rm -f "$old"
  done
  log "built $redis_image in $(( $(date +%s) - start )) s"
fi
echo "image=$image"
echo "archive=$archive"
echo "searx_image=$searx_image"
echo "searx_archive=$searx_archive"
echo "redis_image=$redis_image"
echo "redis_archive=$redis_archive"
