#!/usr/bin/env bash
# Build times of the workspace on this machine, for docs/architecture.md and BENCHMARKS.md:
# a clean build and test build in a fresh target directory, then incremental ones after an edit
# of one engine file and of one controller file (a function appended, then removed again: a
# mere `touch` is nearly free under incremental compilation and would measure nothing).
#
#   scripts/measure-build.sh [TARGET_DIR]            (default: a new directory under /tmp)
#   scripts/measure-build.sh --incremental TARGET_DIR  (skip the clean steps)
#
# Prints one line per step: "<step> <seconds>". Uses cargo nextest for the test build when present.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
clean=1
if [ "${1:-}" = --incremental ]; then clean=0; shift; fi
target="${1:-$(mktemp -d /tmp/quarry-build-XXXX)}"
export CARGO_TARGET_DIR="$target" CARGO_TERM_COLOR=never

# The files a change to the engine and to the controller touches (first that exists: the layout
# before and after the crate split).
first() { for f in "$@"; do [ -f "$f" ] && { echo "$f"; return; }; done; }
engine_file=$(first operator/engine/src/research/machine/reducer.rs operator/engine/src/research/reducer.rs operator/src/research/reducer.rs)
controller_file=$(first operator/controller/src/research_run/mod.rs operator/controller/src/controller/mod.rs)

test_build() {
  if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-run >/dev/null 2>&1
  else
    cargo test --workspace --no-run >/dev/null 2>&1
  fi
}
step() {
  local name="$1"; shift
  local start end
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  awk -v n="$name" -v s="$start" -v e="$end" 'BEGIN { printf "%-32s %6.0f s\n", n, e - s }'
}

# Appends a private function to FILE (restored on exit), as an edit of one function would.
edit() {
  local file="$1" rc=0
  shift
  cp "$file" "$file.orig"
  printf '\n#[allow(dead_code)]\nfn build_time_probe() -> u64 {\n    %s\n}\n' "$(date +%s%N)" >>"$file"
  "$@" || rc=$?
  mv "$file.orig" "$file"
  return $rc
}
edited_build() { edit "$1" cargo build --workspace --quiet; }
edited_test_build() { edit "$1" test_build; }

if [ "$clean" = 1 ]; then
  step "clean build" cargo build --workspace --quiet
  step "clean test build" test_build
fi
step "engine edited: build" edited_build "$engine_file"
step "engine edited: test build" edited_test_build "$engine_file"
step "controller edited: build" edited_build "$controller_file"
step "controller edited: test build" edited_test_build "$controller_file"
