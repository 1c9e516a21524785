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

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
