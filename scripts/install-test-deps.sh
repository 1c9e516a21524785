#!/usr/bin/env bash
# Installs what the end-to-end search tests need and builds the docs index. Idempotent.
#
#   Debian packages: searx (the metasearch engine), redis-server (the shared cache tests), python3.11-doc and postgresql-doc-15 (the HTML
#   pages it searches, served from /usr/share/doc by the tests' docs server), lua5.4 (runs the Argo CD
#   health checks in deploy/argocd/).
#   helm and kubectl (the chart and Kustomize tests): scripts/install-kube-tools.sh, from npm.
#   Index: SQLite FTS5 over those pages, written to $QUARRY_WORK_DIR/docs-index.sqlite
#   (default: <repo>/.work/docs-index.sqlite, gitignored); rebuilt only when missing or stale.
#
# Env: QUARRY_WORK_DIR  where to write the index (relative paths are taken from the repo root,
#                       as the tests do)
#      QUARRY_FORCE_APT=1  run apt-get even when the packages are already installed
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${QUARRY_WORK_DIR:-.work}"
case "$work" in
  /*) ;;
  *) work="$repo/$work" ;;
esac
packages=(searx python3.11-doc postgresql-doc-15 redis-server lua5.4)

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
echo "==> docs index in $work"
/usr/bin/python3 "$repo/tests/tools/build_docs_index.py" --if-stale --out "$work/docs-index.sqlite"

"$repo/scripts/install-kube-tools.sh"
