#!/usr/bin/env bash
# Starts the local OpenAI-compatible model server (tools/llm-server) in the background and waits
# until /health answers. Install first with scripts/install-real-model.sh.
#
# Usage: scripts/start-real-model.sh [PORT]        (default: $QUARRY_LLM_PORT, else 8080)
# Prints the base URL (http://127.0.0.1:PORT/v1) on stdout when ready.
# Stop it with: kill "$(cat <server dir>/server.pid)"
#
# Environment: QUARRY_MODEL_DIR, QUARRY_LLM_SERVER_DIR (as for the install script),
# QUARRY_LLM_START_TIMEOUT seconds to wait for the model to load (default 300).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVER_DIR="${QUARRY_LLM_SERVER_DIR:-$ROOT/.work/llm-server}"
PORT="${1:-${QUARRY_LLM_PORT:-8080}}"
TIMEOUT="${QUARRY_LLM_START_TIMEOUT:-300}"
HEALTH="http://127.0.0.1:$PORT/health"
PID_FILE="$SERVER_DIR/server.pid"
LOG_FILE="$SERVER_DIR/server.log"

die() { echo "start-real-model: ERROR: $*" >&2; exit 1; }

health_ok() { curl -fsS --max-time 5 "$HEALTH" >/dev/null 2>&1; }

command -v node >/dev/null || die "node is not installed"
command -v curl >/dev/null || die "curl is not installed"
[[ -d "$SERVER_DIR/node_modules/node-llama-cpp" ]] \
    || die "node-llama-cpp is not installed in $SERVER_DIR; run scripts/install-real-model.sh"

if health_ok; then
    echo "start-real-model: a model server is already healthy on port $PORT" >&2
    echo "http://127.0.0.1:$PORT/v1"
    exit 0
fi

mkdir -p "$SERVER_DIR"
# setsid: the server outlives this script and the shell that ran it.
setsid node "$ROOT/tools/llm-server/server.mjs" --port "$PORT" --modules "$SERVER_DIR" \
    >"$LOG_FILE" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$PID_FILE"
echo "start-real-model: started pid $pid (log: $LOG_FILE), waiting up to ${TIMEOUT}s for the model to load" >&2

deadline=$((SECONDS + TIMEOUT))
until health_ok; do
    if ! kill -0 "$pid" 2>/dev/null; then
        tail -n 20 "$LOG_FILE" >&2 || true
        die "the server exited before becoming healthy (see $LOG_FILE)"
    fi
    if ((SECONDS >= deadline)); then
        kill "$pid" 2>/dev/null || true
        die "the server was not healthy after ${TIMEOUT}s (see $LOG_FILE)"
    fi
    sleep 1
done
echo "start-real-model: ready on port $PORT" >&2
echo "http://127.0.0.1:$PORT/v1"
