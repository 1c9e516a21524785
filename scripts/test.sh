#!/usr/bin/env bash
# The README's second command: installs what the tests need, then runs every test of the workspace.
#
# Installs (idempotent): Debian's searx and documentation packages plus the docs index
# (scripts/install-test-deps.sh) and the small real model with its server
# (scripts/install-real-model.sh; skip with QUARRY_REAL_MODEL=0).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

scripts/install-test-deps.sh
if [ "${QUARRY_REAL_MODEL:-1}" != 0 ]; then
  scripts/install-real-model.sh
  export QUARRY_REAL_MODEL=1
fi

# The kube suite (tests/tests/kube_*.rs) needs a kube-apiserver: $KUBE_APISERVER_BIN or the shared
# one beside this repository. Its tests are #[ignore]d, so without one they show as skipped; with
# one they run (--run-ignored all: they are the workspace's only ignored tests), and under CI the
# JUnit report must show them run, or the test command fails.
apiserver=""
if [ -n "${KUBE_APISERVER_BIN:-}" ] && [ -x "$KUBE_APISERVER_BIN" ]; then
  apiserver="$KUBE_APISERVER_BIN"
elif [ -f "$repo/../shared/k8s/kube-apiserver.xz" ]; then
  apiserver="$repo/../shared/k8s/kube-apiserver.xz"
fi
ignored=()
if [ -n "$apiserver" ]; then
  echo "==> kube suite: running against $apiserver"
  ignored=(--run-ignored all)
else
  echo "==> kube suite: SKIPPED (no kube-apiserver: set KUBE_APISERVER_BIN or provide ../shared/k8s)"
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  if [ -n "$apiserver" ]; then
    cargo test --workspace --no-fail-fast "$@" -- --include-ignored
  else
    cargo test --workspace --no-fail-fast "$@"
  fi
  exit $?
fi

status=0
cargo nextest run --workspace --profile ci "${ignored[@]}" "$@" || status=$?
junit="${CARGO_TARGET_DIR:-$repo/target}/nextest/ci/junit.xml"
if [ -n "$apiserver" ] && [ "${CI:-}" = true ]; then
  ran=$(/usr/bin/python3 - "$junit" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0); sys.exit()
print(sum(1 for suite in root.iter("testsuite") if suite.get("name", "").split("::")[-1].startswith("kube_")
          for case in suite.iter("testcase") if case.find("skipped") is None))
PY
)
  echo "==> kube suite: $ran tests ran against the real API server"
  if [ "$ran" -lt 1 ]; then
    echo "the kube-apiserver is present but the kube suite did not run" >&2
    status=1
  fi
fi
exit $status
