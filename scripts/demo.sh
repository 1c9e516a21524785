#!/usr/bin/env bash
# The README's first command: installs the local demo services (searx over Debian's Python and
# PostgreSQL documentation, and the small Qwen2.5-Coder-0.5B model), then researches a question
# with `quarry run` and prints the report. Everything runs on 127.0.0.1; no API key needed.
#
# Usage: scripts/demo.sh ["your question"]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
question="${1:-How do I decode JSON with the json module in Python?}"
work="$repo/.work"
mkdir -p "$work"

scripts/install-test-deps.sh
scripts/install-real-model.sh

echo "==> building quarry"
cargo build --quiet -p quarry --bin quarry -p quarry-e2e --bin demo-services
bin="${CARGO_TARGET_DIR:-$repo/target}/debug"

profile="$work/demo-profile.yaml"
rm -f "$profile"
"$bin/demo-services" "$profile" &
services=$!
trap 'kill -INT "$services" 2>/dev/null; wait "$services" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  [ -s "$profile" ] && break
  kill -0 "$services" 2>/dev/null || { echo "demo services failed to start" >&2; exit 1; }
  sleep 1
done
[ -s "$profile" ] || { echo "demo services did not become ready" >&2; exit 1; }

report="$work/demo-report.md"
echo "==> quarry run \"$question\" (a small model on 2 cores takes a few minutes)"
"$bin/quarry" run "$question" --mode quick --profile "$profile" --out "$report" --timeout 30m
echo
cat "$report"
