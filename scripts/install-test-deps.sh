#!/usr/bin/env bash
# Installs what the end-to-end search tests need and builds the docs index. Idempotent.
#
# Usage: scripts/install-test-deps.sh [--demo]
#   --demo  only what scripts/demo.sh uses: searx, python3.11-doc, postgresql-doc-15 and git-doc,
#           and the docs index (the model comes from scripts/install-real-model.sh). None of the rest:
#           redis, lua, openssl, xz-utils, curl, helm/kubectl, etcd, moto, the MCP Inspector, rotel.
#
#   Debian packages: searx (the metasearch engine), redis-server (the shared cache tests), python3.11-doc and postgresql-doc-15 (the HTML
#   pages it searches, served from /usr/share/doc by the tests' docs server), git-doc (Git's
#   AsciiDoc-generated HTML manual: the third tree of the frozen eval set, tests/eval/README.md), lua5.4 (runs the Argo CD
#   health checks in deploy/argocd/), prometheus (promtool and a real Prometheus for the dashboard and
#   alert tests), chromium and chromium-driver (the console's browser tests, headless).
#   helm and kubectl (the chart and Kustomize tests): scripts/install-kube-tools.sh, from npm.
#   etcd 3.6 (the test control plane, with the kube-apiserver of KUBE_APISERVER_BIN): crates.io's
#   etcd-bin-vendored-linux-amd64, checksum-verified, into $QUARRY_WORK_DIR/etcd; openssl and
#   xz-utils (the control plane's certificates and the compressed apiserver) from Debian.
#   PyPI: moto's S3-compatible server (moto[s3] plus Flask) in a venv at $QUARRY_WORK_DIR/moto, for
#   the object-store tests (~140 MB, about a minute to install; skipped when already there).
#   rotel, an OpenTelemetry collector (PyPI's wheel ships its binary), in a venv at
#   $QUARRY_WORK_DIR/rotel: the real OTLP receiver of tests/tests/otlp.rs (~50 MB, seconds).
#   Index: SQLite FTS5 over the trees of $QUARRY_DOC_TREES (default: the Python and PostgreSQL
#   docs), written to $QUARRY_WORK_DIR/docs-index.sqlite (default: <repo>/.work/, gitignored), or
#   for other trees to docs-index-<tree>+<tree>....sqlite beside it, the name the test harness and
#   demo-services look for; and always the index of the frozen eval set's three trees (the
#   defaults and git-doc). Each is rebuilt only when missing or stale (15 s for the three trees).
#   npm: the MCP Inspector (tools/mcp-inspector, pinned by its package-lock.json) into
#   $QUARRY_WORK_DIR/mcp-inspector/node_modules; its CLI mode is the real MCP client that
#   tests/tests/mcp.rs drives `quarry mcp` with. About 20 s and 77 MB; skipped when up to date.
#
# Env: QUARRY_WORK_DIR  where to write the index (relative paths are taken from the repo root,
#                       as the tests do)
#      QUARRY_DOC_TREES  the documentation trees to index, separated by `:` or `,` (relative to
#                       /usr/share/doc, or absolute), e.g.
#                       python3.11-doc/html:postgresql-doc-15/html:git-doc
#      QUARRY_FORCE_APT=1  run apt-get even when the packages are already installed
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${QUARRY_WORK_DIR:-.work}"
case "$work" in
  /*) ;;
  *) work="$repo/$work" ;;
esac
demo=0
case "${1:-}" in
  --demo) demo=1 ;;
  "") ;;
  *) echo "usage: scripts/install-test-deps.sh [--demo]" >&2; exit 2 ;;
esac
# The demo's packages first; the tests need the rest as well.
packages=(searx python3.11-doc postgresql-doc-15 git-doc)
if [ "$demo" = 0 ]; then
  packages+=(redis-server lua5.4 openssl xz-utils curl prometheus chromium chromium-driver)
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi

installed() {
  local p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}

if [ "${QUARRY_FORCE_APT:-0}" = 1 ] || ! installed; then
  echo "==> apt-get install ${packages[*]}"
  "${sudo[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y "${packages[@]}"
else
  echo "==> ${packages[*]} already installed"
fi

# Debian's interpreter on purpose: a pyenv python3 may be first on PATH. Its sqlite3 has FTS5.
tree_args=()
IFS=':,' read -r -a trees <<<"${QUARRY_DOC_TREES:-}"
for tree in "${trees[@]}"; do
  tree="${tree#"${tree%%[![:space:]]*}"}"
  tree="${tree%"${tree##*[![:space:]]}"}"
  if [ -n "$tree" ]; then tree_args+=(--tree "$tree"); fi
done
echo "==> docs index in $work (trees: ${QUARRY_DOC_TREES:-the defaults})"
/usr/bin/python3 "$repo/tests/tools/build_docs_index.py" --if-stale --out-dir "$work" "${tree_args[@]}"
# The frozen eval set's corpus (tests/eval/README.md, `EVAL_FROZEN_DOC_TREES` in
# tests/src/doc_trees.rs): the default trees plus Git's manual. A no-op when it is the one above.
echo "==> docs index of the frozen eval set's trees in $work"
/usr/bin/python3 "$repo/tests/tools/build_docs_index.py" --if-stale --out-dir "$work" \
  --tree python3.11-doc/html --tree postgresql-doc-15/html --tree git-doc

if [ "$demo" = 1 ]; then
  exit 0
fi

"$repo/scripts/install-kube-tools.sh"

# etcd for the test control plane (tests/src/control_plane.rs), from the crates.io crate that ships
# the prebuilt binary; the checksum is the one crates.io's index lists for this version.
etcd_version="3.6.15"
etcd_sha256="7bb225058cf5b867a836143cb10dbd7ceedc5e459fed89979db0c10e66fe8b1f"
etcd_dir="$work/etcd"
if [ -x "$etcd_dir/etcd" ] && [ "$(cat "$etcd_dir/.quarry-version" 2>/dev/null)" = "$etcd_version" ]; then
  echo "==> etcd $etcd_version already installed in $etcd_dir"
else
  echo "==> etcd $etcd_version from crates.io (etcd-bin-vendored-linux-amd64)"
  tmp="$(mktemp -d)"
  crate="etcd-bin-vendored-linux-amd64-$etcd_version"
  curl -fsSL "https://static.crates.io/crates/etcd-bin-vendored-linux-amd64/$crate.crate" -o "$tmp/etcd.crate"
  echo "$etcd_sha256  $tmp/etcd.crate" | sha256sum -c --quiet -
  tar -xzf "$tmp/etcd.crate" -C "$tmp" "$crate/bin/etcd"
  mkdir -p "$etcd_dir"
  mv "$tmp/$crate/bin/etcd" "$etcd_dir/etcd"
  rm -rf "$tmp"
  echo "$etcd_version" > "$etcd_dir/.quarry-version"
fi
# moto's server mode: the S3-compatible server the object-store tests start on 127.0.0.1. Only the
# S3 extra and the server's web framework, not moto[server] (which pulls every AWS service's
# dependencies: 317 MB and twice the install time).
moto_spec="moto[s3]==5.2.5 Flask==3.1.3 flask-cors==6.0.5"
moto_venv="$work/moto"
if [ -x "$moto_venv/bin/moto_server" ] && [ "$(cat "$moto_venv/.quarry-spec" 2>/dev/null)" = "$moto_spec" ]; then
  echo "==> moto already installed in $moto_venv"
else
  echo "==> pip install $moto_spec into $moto_venv"
  rm -rf "$moto_venv"
  python3 -m venv "$moto_venv"
  # shellcheck disable=SC2086 # the spec is a list of requirements
  "$moto_venv/bin/pip" install --quiet --disable-pip-version-check $moto_spec
  echo "$moto_spec" > "$moto_venv/.quarry-spec"
fi

# The MCP Inspector for the `quarry mcp` test: `npm ci` from the checked-in lock file, optional
# dependencies left out (the CLI mode needs none of them).
inspector_src="$repo/tools/mcp-inspector"
inspector_dir="$work/mcp-inspector"
if [ -d "$inspector_dir/node_modules/@modelcontextprotocol/inspector" ] \
    && cmp -s "$inspector_src/package-lock.json" "$inspector_dir/package-lock.json"; then
  echo "==> MCP Inspector already installed in $inspector_dir"
else
  command -v npm >/dev/null || { echo "npm is not installed (need Node.js >= 20 with npm)" >&2; exit 1; }
  echo "==> npm ci @modelcontextprotocol/inspector into $inspector_dir"
  mkdir -p "$inspector_dir"
  cp "$inspector_src/package.json" "$inspector_src/package-lock.json" "$inspector_dir/"
  (cd "$inspector_dir" && npm ci --omit=dev --omit=optional --no-audit --no-fund --loglevel=error)
fi

# --- rotel: the OTLP receiver of the trace test (tests/tests/otlp.rs) ----------------------------
# Rotel, a lightweight OpenTelemetry collector written in Rust, from PyPI: the `rotel` wheel ships
# its prebuilt collector (rotel/rotel-agent). It receives OTLP over HTTP and gRPC; the test reads
# the spans back from its detailed debug output. The binary links Debian's libpython3.11 (its
# Python processor support), hence Debian's interpreter for the venv and the cp311 wheel. Into
# $QUARRY_WORK_DIR/rotel, with bin/rotel-agent linked to the binary; about 50 MB and a few
# seconds; skipped when already there.
rotel_spec="rotel==0.0.1a15"
rotel_venv="$work/rotel"
if [ -x "$rotel_venv/bin/rotel-agent" ] && [ "$(cat "$rotel_venv/.quarry-spec" 2>/dev/null)" = "$rotel_spec" ]; then
  echo "==> rotel already installed in $rotel_venv"
else
  if ! dpkg-query -W -f='${Status}' libpython3.11 2>/dev/null | grep -q "install ok installed"; then
    echo "==> apt-get install libpython3.11 (rotel-agent links it)"
    "${sudo[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y libpython3.11
  fi
  echo "==> pip install $rotel_spec into $rotel_venv"
  rm -rf "$rotel_venv"
  /usr/bin/python3 -m venv "$rotel_venv"
  "$rotel_venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: "$rotel_spec"
  # A relative link: the venv's own bin/ to the binary in its site-packages.
  agent=$("$rotel_venv/bin/python" -c 'import os, sys, rotel; print(os.path.relpath(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"), sys.argv[1]))' "$rotel_venv/bin")
  ln -sf "$agent" "$rotel_venv/bin/rotel-agent"
  "$rotel_venv/bin/rotel-agent" --version
  echo "$rotel_spec" > "$rotel_venv/.quarry-spec"
fi
# --- end rotel ------------------------------------------------------------------------------------
