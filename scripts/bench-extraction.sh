#!/usr/bin/env bash
# Extraction benchmark: Quarry's extractor and trafilatura 2.0.0 (Python) on the same labelled
# pages, scored by the same metric code in one run (operator/engine/benches/extraction.rs).
#
# Creates its own venv (.work/bench-venv, gitignored) with trafilatura from PyPI, extracts every
# page with it (timed inside Python, single-threaded, extraction calls only), then runs the Rust
# benchmark, which adds the Python results to its table.
#
# Environment:
#   QUARRY_EXTRACTION_BENCH  the benchmark directory (default: a shared/bench/article-extraction
#                            directory above the repository)
#   QUARRY_BENCH_PASSES      passes over the pages on each side; the fastest counts (default 3)
#   CARGO_TARGET_DIR         as usual
# Arguments are passed to the benchmark (a part of a candidate's name selects it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.work/bench-venv"
OUT="$ROOT/.work/bench/trafilatura.json"
TRAFILATURA_VERSION="2.0.0"

log() { echo "bench-extraction: $*" >&2; }
die() { echo "bench-extraction: ERROR: $*" >&2; exit 1; }

BENCH="${QUARRY_EXTRACTION_BENCH:-}"
if [[ -z "$BENCH" ]]; then
    dir="$ROOT"
    while [[ "$dir" != "/" ]]; do
        if [[ -f "$dir/shared/bench/article-extraction/ground-truth.json" ]]; then
            BENCH="$dir/shared/bench/article-extraction"
            break
        fi
        dir="$(dirname "$dir")"
    done
fi
[[ -n "$BENCH" && -f "$BENCH/ground-truth.json" ]] \
    || die "benchmark data not found; set QUARRY_EXTRACTION_BENCH"

if ! "$VENV/bin/python" -c "import trafilatura, sys; sys.exit(trafilatura.__version__ != '$TRAFILATURA_VERSION')" 2>/dev/null; then
    log "creating $VENV with trafilatura==$TRAFILATURA_VERSION"
    python3 -m venv "$VENV"
    # lxml 6 no longer ships lxml.html.clean (nor the `html_clean` extra trafilatura's jusText
    # asks for): it is the separate lxml_html_clean package.
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "trafilatura==$TRAFILATURA_VERSION" lxml_html_clean
fi

mkdir -p "$(dirname "$OUT")"
PASSES="${QUARRY_BENCH_PASSES:-3}"
"$VENV/bin/python" "$ROOT/scripts/bench/trafilatura_extract.py" "$BENCH" "$OUT" "$PASSES"

cd "$ROOT"
QUARRY_EXTRACTION_BENCH="$BENCH" QUARRY_PYTHON_EXTRACTION="$OUT" QUARRY_BENCH_PASSES="$PASSES" \
    cargo bench -p quarry-engine --bench extraction -- "$@"
