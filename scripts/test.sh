#!/usr/bin/env bash
# The README's second command: installs what the tests need, then runs every test of the workspace.
#
# Installs (idempotent): Debian's searx and documentation packages plus the docs index
# (scripts/install-test-deps.sh) and the small real model with its server
# (scripts/install-real-model.sh; skip with QUARRY_REAL_MODEL=0).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# Only nextest can run the ignored tests by the filter built below (and the test groups of
# .config/nextest.toml); `cargo test` would silently leave them out, so nextest is required.
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "==> cargo-nextest is missing: installing it (cargo install --locked cargo-nextest)"
  if ! cargo install --locked cargo-nextest || ! cargo nextest --version >/dev/null 2>&1; then
    echo "scripts/test.sh needs cargo-nextest, and installing it failed." >&2
    echo "Install it yourself (cargo install --locked cargo-nextest, or see https://nexte.st)" >&2
    echo "and run scripts/test.sh again; plain 'cargo test' would skip the ignored tests." >&2
    exit 1
  fi
fi

scripts/install-test-deps.sh
if [ "${QUARRY_REAL_MODEL:-1}" != 0 ]; then
  scripts/install-real-model.sh
  export QUARRY_REAL_MODEL=1
fi

# Tests that need a component are `#[ignore = "needs <component> ..."]`: a plain `cargo nextest run`
# shows them as skipped. Here they all run (--run-ignored all) except those whose component this
# machine lacks (scripts/ignored-tests.py lists them). The install scripts above provide searx, the
# docs corpus, redis-server, moto, lua, the MCP Inspector and rotel (the OTLP collector of the
# trace test) (or fail); the rest may be absent:
# - a kube-apiserver: $KUBE_APISERVER_BIN, or the compressed one the CI machine keeps beside this
#   repository; under CI the
#   JUnit report must show the kube suite run, or the test command fails;
# - the real model: QUARRY_REAL_MODEL=0 skips it;
# - the 1.5B model's deep run (40 min on 2 cores): only with QUARRY_REAL_MODEL_DEEP=1;
# - root, for the tmpfs of the full-disk test;
# - prometheus and promtool (Debian's prometheus package, which the install script adds): the
#   dashboard and alert tests need them on PATH.
# - a node (tests/tests/kube_node.rs: ../shared/k8s/node/node.sh, root, and the packages of
#   scripts/install-node-deps.sh, installed here); the images are built first (scripts/build-images.sh
#   around the debug binary, cached in /var/cache/quarry-images); under CI the node suite must run
#   when the node can start.
apiserver=""
if [ -n "${KUBE_APISERVER_BIN:-}" ] && [ -x "$KUBE_APISERVER_BIN" ]; then
  apiserver="$KUBE_APISERVER_BIN"
elif [ -f "$repo/../shared/k8s/kube-apiserver.xz" ]; then
  apiserver="$repo/../shared/k8s/kube-apiserver.xz"
fi
missing=()
if [ -n "$apiserver" ]; then
  echo "==> kube suite: running against $apiserver"
else
  echo "==> kube suite: NOT RUN (no kube-apiserver: set KUBE_APISERVER_BIN)"
  missing+=("a kube-apiserver")
fi
if [ "${QUARRY_REAL_MODEL:-1}" = 0 ]; then
  echo "==> real-model tests: NOT RUN (QUARRY_REAL_MODEL=0)"
  missing+=("the real model")
fi
if [ "${QUARRY_REAL_MODEL_DEEP:-}" != 1 ]; then
  echo "==> deep real-model run: NOT RUN (40 min; set QUARRY_REAL_MODEL_DEEP=1 to run it)"
  missing+=("the 1.5B model")
fi
if [ "$(id -u)" != 0 ]; then
  echo "==> full-disk test: NOT RUN (mounting its tmpfs needs root)"
  missing+=("root")
fi
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  echo "==> Prometheus tests: NOT RUN (no prometheus/promtool on PATH: Debian's prometheus package)"
  missing+=("prometheus")
fi
node_sh=${QUARRY_NODE_SH:-$repo/../shared/k8s/node/node.sh}
node=""
if [ "$(id -u)" != 0 ]; then
  echo "==> node suite: NOT RUN (the node needs root)"
elif [ ! -f "$node_sh" ]; then
  echo "==> node suite: NOT RUN (no $node_sh)"
else
  scripts/install-node-deps.sh
  node_started=$(date +%s)
  # The image wraps the debug `quarry` the suite builds anyway (the Dockerfile's prebuilt target):
  # seconds, where a release build inside buildah took over an hour on a busy 2-core machine.
  if cargo build --quiet -p quarry --bin quarry \
    && QUARRY_BINARY="${CARGO_TARGET_DIR:-$repo/target}/debug/quarry" scripts/build-images.sh >/dev/null; then
    echo "==> node suite: image ready in $(( $(date +%s) - node_started )) s; running against $node_sh"
  else
    echo "==> node suite: the image build FAILED (above); its tests will fail" >&2
  fi
  node=1
fi
[ -n "$node" ] || missing+=("a node")
filter=$(/usr/bin/python3 scripts/ignored-tests.py filter "${missing[@]}")

# nextest's store is `target/nextest` under the workspace root whatever CARGO_TARGET_DIR says; an
# old report is removed first so that it can never stand in for this run's.
junit="$repo/target/nextest/ci/junit.xml"
rm -f "$junit"
status=0
cargo nextest run --workspace --profile ci --run-ignored all -E "$filter" "$@" || status=$?
# How many tests of the binaries whose name starts with $1 (and named $2, when given) ran (not
# skipped), from the JUnit report.
ran_in() {
  /usr/bin/python3 - "$junit" "$1" "${2:-}" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0); sys.exit()
print(sum(1 for suite in root.iter("testsuite") if suite.get("name", "").split("::")[-1].startswith(sys.argv[2])
          for case in suite.iter("testcase") if case.find("skipped") is None
          and sys.argv[3] in ("", case.get("name"))))
PY
}
if [ -n "$apiserver" ] && [ "${CI:-}" = true ]; then
  ran=$(ran_in kube_)
  echo "==> kube suite: $ran tests ran against the real API server"
  if [ "$ran" -lt 1 ]; then
    echo "the kube-apiserver is present but the kube suite did not run" >&2
    status=1
  fi
fi
if [ -n "$node" ] && [ "${CI:-}" = true ]; then
  ran=$(ran_in kube_node)
  echo "==> node suite: $ran tests ran on the real node"
  if [ "$ran" -lt 1 ]; then
    echo "the node can start here but the node suite did not run" >&2
    status=1
  fi
  # The real model is installed above unless QUARRY_REAL_MODEL=0: its run in a Pod must run too.
  if [ "${QUARRY_REAL_MODEL:-1}" != 0 ] \
    && [ "$(ran_in kube_node a_quick_run_in_a_pod_with_the_real_model_completes_or_fails_honestly)" -lt 1 ]; then
    echo "the node and the real model are here but the real-model run in a Pod did not run" >&2
    status=1
  fi
fi
exit $status
