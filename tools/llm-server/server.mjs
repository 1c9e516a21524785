#!/usr/bin/env node
// OpenAI-compatible chat-completions server for Quarry's local test model, built on node-llama-cpp.
//
// Endpoints: POST /v1/chat/completions (stream and non-stream, json_object and json_schema modes),
// GET /v1/models, GET /health (503 while the model loads, 200 once ready).
// One generation at a time (a FIFO queue): the machine has 2 cores and one context.
// No native tool calling: Quarry talks to this model through its JSON action protocol.
//
// Options (flag, then environment, then default):
//   --port N            QUARRY_LLM_PORT       8080 (0 picks a free port)
//   --host H            QUARRY_LLM_HOST       127.0.0.1
//   --model PATH        QUARRY_MODEL_PATH     $QUARRY_MODEL_DIR/<model file>, else <repo>/.work/model/<model file>
//   --modules DIR       QUARRY_LLM_SERVER_DIR <repo>/.work/llm-server (holds node_modules/node-llama-cpp)
//   --context-size N    QUARRY_LLM_CONTEXT    8192
//   --threads N         QUARRY_LLM_THREADS    2
//   --model-name NAME   QUARRY_LLM_MODEL_NAME the model file name without .gguf
//
// Once the socket is bound it prints one line on stdout: `quarry-llm-server listening on http://HOST:PORT`
// (so a parent that passed port 0 can read the port), and `quarry-llm-server ready` once the model is loaded.

import http from "node:http";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, "..", "..");
const MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/** Largest request body accepted; an 8k-token context is ~32 KB of text, so this is generous. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Output cap when a request names none: a small model without a cap can loop for thousands of tokens. */
const DEFAULT_MAX_TOKENS = 512;
/** Requests allowed to wait in the queue behind the running one; beyond that the server answers 429. */
const MAX_QUEUED = 32;
/** Distinct JSON-schema grammars kept compiled; callers reuse a handful of schemas, so a small cache suffices. */
const MAX_SCHEMA_GRAMMARS = 16;

function parseArgs(argv) {
    const out = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith("--")) throw new Error(`unexpected argument: ${a}`);
        const eq = a.indexOf("=");
        if (eq > 0) {
            out[a.slice(2, eq)] = a.slice(eq + 1);
        } else {
            if (i + 1 >= argv.length) throw new Error(`missing value for ${a}`);
            out[a.slice(2)] = argv[++i];
        }
    }
    return out;
}

function intOption(name, raw, min, max) {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max)
        throw new Error(`--${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
    return n;
}

function loadConfig() {
    const args = parseArgs(process.argv.slice(2));
    const known = ["port", "host", "model", "modules", "context-size", "threads", "model-name"];
    for (const k of Object.keys(args))
        if (!known.includes(k)) throw new Error(`unknown option --${k} (known: ${known.map((k) => "--" + k).join(", ")})`);
    const env = process.env;
    const modelDir = env.QUARRY_MODEL_DIR || path.join(REPO_ROOT, ".work", "model");
    const modelPath = args.model ?? env.QUARRY_MODEL_PATH ?? path.join(modelDir, MODEL_FILE);
    return {
        port: intOption("port", args.port ?? env.QUARRY_LLM_PORT ?? "8080", 0, 65535),
        host: args.host ?? env.QUARRY_LLM_HOST ?? "127.0.0.1",
        modelPath,
        modulesDir: args.modules ?? env.QUARRY_LLM_SERVER_DIR ?? path.join(REPO_ROOT, ".work", "llm-server"),
        contextSize: intOption("context-size", args["context-size"] ?? env.QUARRY_LLM_CONTEXT ?? "8192", 256, 131072),
        threads: intOption("threads", args.threads ?? env.QUARRY_LLM_THREADS ?? "2", 1, 256),
        modelName: args["model-name"] ?? env.QUARRY_LLM_MODEL_NAME ?? path.basename(modelPath).replace(/\.gguf$/i, ""),
    };
}

/** Imports node-llama-cpp from the install directory (it lives under .work/, outside this source tree). */
async function importNodeLlamaCpp(modulesDir) {
    const req = createRequire(path.join(modulesDir, "package.json"));
    let entry;
    try {
        entry = req.resolve("node-llama-cpp");
    } catch (e) {
        throw new Error(`node-llama-cpp is not installed under ${modulesDir}/node_modules; run scripts/install-real-model.sh (${e.code ?? e.message})`);
    }
    return import(pathToFileURL(entry).href);
}

class HttpError extends Error {
    constructor(status, message, type = "invalid_request_error", code = null) {
        super(message);
        this.status = status;
        this.type = type;
        this.code = code;
    }
}

function sendJson(res, status, body) {
    const data = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
    res.end(data);
}

function sendError(res, err) {
    const status = err instanceof HttpError ? err.status : 500;
    const type = err instanceof HttpError ? err.type : "server_error";
    const code = err instanceof HttpError ? err.code : null;
    if (res.headersSent) {
        // Mid-stream: report in-band and close; the status line is long gone.
        try {
            res.write(`data: ${JSON.stringify({ error: { message: err.message, type, code } })}\n\n`);
        } catch { /* client already gone */ }
        res.end();
        return;
    }
    sendJson(res, status, { error: { message: err.message, type, code } });
}

function readBody(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        let size = 0;
        const onData = (c) => {
            size += c.length;
            if (size > MAX_BODY_BYTES) {
                // Stop reading; the 413 is sent and the connection closed after it (see sendError).
                req.off("data", onData);
                req.pause();
                reject(new HttpError(413, `request body exceeds ${MAX_BODY_BYTES} bytes`));
                return;
            }
            chunks.push(c);
        };
        req.on("data", onData);
        req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        req.on("error", reject);
    });
}

/** Text of an OpenAI message `content`: a string, null, or an array of parts (text parts kept). */
function contentText(content, where) {
    if (content == null) return "";
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
        return content.map((p, i) => {
            if (typeof p === "string") return p;
            if (p && typeof p === "object" && p.type === "text" && typeof p.text === "string") return p.text;
            throw new HttpError(400, `${where}.content[${i}]: only text parts are supported`);
        }).join("");
    }
    throw new HttpError(400, `${where}.content must be a string, null or an array of text parts`);
}

/**
 * Maps OpenAI messages to node-llama-cpp chat history. Tool results become user text (the model has
 * no tool role); assistant tool calls are rendered as text so the model sees what it asked for.
 * The history ends with a model item that generation fills in (continued, when the last message is
 * the assistant's).
 */
function toChatHistory(messages) {
    if (!Array.isArray(messages) || messages.length === 0)
        throw new HttpError(400, "messages must be a non-empty array");
    const history = [];
    messages.forEach((m, i) => {
        const where = `messages[${i}]`;
        if (!m || typeof m !== "object") throw new HttpError(400, `${where} must be an object`);
        const text = contentText(m.content, where);
        switch (m.role) {
            case "system":
            case "developer":
                history.push({ type: "system", text });
                break;
            case "user":
                history.push({ type: "user", text });
                break;
            case "assistant": {
                let t = text;
                if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
                    const calls = m.tool_calls.map((c) => JSON.stringify({
                        tool: c?.function?.name ?? null,
                        arguments: c?.function?.arguments ?? null,
                    }));
                    t = [t, ...calls].filter((s) => s !== "").join("\n");
                }
                history.push({ type: "model", response: [t] });
                break;
            }
            case "tool":
            case "function": {
                const label = m.name ?? m.tool_call_id ?? "tool";
                history.push({ type: "user", text: `Tool result (${label}):\n${text}` });
                break;
            }
            default:
                throw new HttpError(400, `${where}.role ${JSON.stringify(m.role)} is not one of system, developer, user, assistant, tool`);
        }
    });
    if (history[history.length - 1].type !== "model") history.push({ type: "model", response: [] });
    return history;
}

function parseRequest(body, contextSize) {
    let req;
    try {
        req = JSON.parse(body);
    } catch (e) {
        throw new HttpError(400, `request body is not valid JSON: ${e.message}`);
    }
    if (!req || typeof req !== "object" || Array.isArray(req)) throw new HttpError(400, "request body must be a JSON object");

    const history = toChatHistory(req.messages);

    const rawMax = req.max_tokens ?? req.max_completion_tokens ?? DEFAULT_MAX_TOKENS;
    if (!Number.isInteger(rawMax) || rawMax < 1)
        throw new HttpError(400, `max_tokens must be a positive integer, got ${JSON.stringify(rawMax)}`);

    const temperature = req.temperature ?? 0.8;
    if (typeof temperature !== "number" || !(temperature >= 0 && temperature <= 2))
        throw new HttpError(400, `temperature must be a number in [0, 2], got ${JSON.stringify(req.temperature)}`);
    const topP = req.top_p;
    if (topP != null && (typeof topP !== "number" || !(topP > 0 && topP <= 1)))
        throw new HttpError(400, `top_p must be a number in (0, 1], got ${JSON.stringify(topP)}`);
    const seed = req.seed;
    if (seed != null && !Number.isInteger(seed)) throw new HttpError(400, "seed must be an integer");

    let stop = req.stop ?? [];
    if (typeof stop === "string") stop = [stop];
    if (!Array.isArray(stop) || stop.length > 4 || stop.some((s) => typeof s !== "string" || s === ""))
        throw new HttpError(400, "stop must be a non-empty string or an array of at most 4 non-empty strings");

    const rf = req.response_format?.type ?? "text";
    if (!["text", "json_object", "json_schema"].includes(rf))
        throw new HttpError(400, `response_format.type ${JSON.stringify(rf)} is not supported (text, json_object, json_schema)`);
    const jsonSchema = rf === "json_schema" ? parseJsonSchemaFormat(req.response_format) : null;

    const n = req.n ?? 1;
    if (n !== 1) throw new HttpError(400, "only n = 1 is supported");

    const penalties = {};
    for (const [key, name] of [["frequency_penalty", "frequencyPenalty"], ["presence_penalty", "presencePenalty"]]) {
        const v = req[key];
        if (v == null) continue;
        if (typeof v !== "number" || !(v >= -2 && v <= 2)) throw new HttpError(400, `${key} must be a number in [-2, 2]`);
        penalties[name] = v;
    }

    return {
        history,
        maxTokens: Math.min(rawMax, contextSize),
        temperature,
        topP: topP ?? undefined,
        seed: seed ?? undefined,
        stop,
        json: rf === "json_object",
        jsonSchema,
        stream: req.stream === true,
        includeUsage: req.stream_options?.include_usage === true,
        penalties,
    };
}

/**
 * The schema of an OpenAI `response_format: {type: "json_schema", json_schema: {name, schema, strict}}`.
 * `strict` is accepted and needs no handling: the grammar always holds the output to the schema.
 */
function parseJsonSchemaFormat(rf) {
    const js = rf.json_schema;
    if (!js || typeof js !== "object" || Array.isArray(js))
        throw new HttpError(400, "response_format.json_schema must be an object with a schema");
    if (js.name != null && typeof js.name !== "string") throw new HttpError(400, "response_format.json_schema.name must be a string");
    if (js.strict != null && typeof js.strict !== "boolean") throw new HttpError(400, "response_format.json_schema.strict must be a boolean");
    const schema = js.schema;
    if (!schema || typeof schema !== "object" || Array.isArray(schema))
        throw new HttpError(400, "response_format.json_schema.schema must be a JSON schema object");
    return schema;
}

/**
 * The compiled grammar for a JSON schema, cached by the schema's JSON text: the engine sends the
 * same schema on every grounded answer, so each schema is turned into a grammar once.
 * A schema node-llama-cpp cannot turn into a grammar is the caller's error (400).
 */
async function grammarForSchema(engine, schema) {
    const key = JSON.stringify(schema);
    const cached = engine.schemaGrammars.get(key);
    if (cached) {
        // Re-insert so the Map's order is least recently used first.
        engine.schemaGrammars.delete(key);
        engine.schemaGrammars.set(key, cached);
        return cached;
    }
    let grammar;
    try {
        grammar = await engine.llama.createGrammarForJsonSchema(schema);
    } catch (e) {
        throw new HttpError(400, `response_format.json_schema.schema is not supported: ${e?.message ?? e}`);
    }
    engine.schemaGrammars.set(key, grammar);
    if (engine.schemaGrammars.size > MAX_SCHEMA_GRAMMARS)
        engine.schemaGrammars.delete(engine.schemaGrammars.keys().next().value);
    return grammar;
}

/** Serialises generations: one context sequence, one request at a time, FIFO. */
class Queue {
    #tail = Promise.resolve();
    #waiting = 0;
    get waiting() { return this.#waiting; }
    run(fn) {
        this.#waiting++;
        const result = this.#tail.then(() => { this.#waiting--; return fn(); });
        this.#tail = result.catch(() => {});
        return result;
    }
}

async function main() {
    const cfg = loadConfig();
    const state = { ready: false, error: null };
    const queue = new Queue();
    let engine = null; // { llama, model, chat, jsonGrammar, schemaGrammars, contextSize }

    const server = http.createServer(async (req, res) => {
        try {
            const url = new URL(req.url ?? "/", "http://localhost");
            if (req.method === "GET" && url.pathname === "/health") {
                if (state.ready) return sendJson(res, 200, { status: "ok", model: cfg.modelName });
                return sendJson(res, 503, { status: state.error ? "error" : "loading", error: state.error });
            }
            if (req.method === "GET" && url.pathname === "/v1/models") {
                return sendJson(res, 200, {
                    object: "list",
                    data: [{ id: cfg.modelName, object: "model", created: 0, owned_by: "quarry" }],
                });
            }
            if (url.pathname === "/v1/chat/completions") {
                if (req.method !== "POST") throw new HttpError(405, "use POST");
                const body = await readBody(req);
                if (!state.ready) throw new HttpError(503, "model is still loading", "server_error");
                const parsed = parseRequest(body, engine.contextSize);
                // Compiled before queueing so a bad schema is a plain 400, never a broken stream.
                parsed.schemaGrammar = parsed.jsonSchema ? await grammarForSchema(engine, parsed.jsonSchema) : null;
                if (queue.waiting >= MAX_QUEUED) throw new HttpError(429, "too many queued requests", "rate_limit_error");
                const abort = new AbortController();
                res.on("close", () => { if (!res.writableFinished) abort.abort(new Error("client disconnected")); });
                await queue.run(() => complete(engine, cfg, parsed, res, abort.signal));
                return;
            }
            throw new HttpError(404, `no route for ${req.method} ${url.pathname}`);
        } catch (err) {
            if (!(err instanceof HttpError)) console.error("quarry-llm-server: request failed:", err);
            if (err instanceof HttpError && err.status === 413) {
                // The rest of the body is unread: close the connection once the answer is out.
                res.setHeader("connection", "close");
                res.on("finish", () => req.socket?.destroy());
            }
            sendError(res, err);
        }
    });
    // A generation of 512 tokens on 2 cores, queued behind others, can take minutes: no socket timeout.
    server.requestTimeout = 0;
    server.timeout = 0;

    await new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(cfg.port, cfg.host, resolve);
    });
    const addr = server.address();
    console.log(`quarry-llm-server listening on http://${cfg.host}:${addr.port}`);

    const shutdown = () => { server.close(); process.exit(0); };
    process.on("SIGTERM", shutdown);
    process.on("SIGINT", shutdown);

    try {
        engine = await loadEngine(cfg);
        state.ready = true;
        console.log(`quarry-llm-server ready (model ${cfg.modelName}, context ${engine.contextSize}, threads ${cfg.threads}, chat wrapper ${engine.chat.chatWrapper.wrapperName})`);
    } catch (err) {
        state.error = String(err?.message ?? err);
        console.error(`quarry-llm-server: failed to load the model: ${state.error}`);
        process.exit(2);
    }
}

async function loadEngine(cfg) {
    if (!fs.existsSync(cfg.modelPath))
        throw new Error(`model file ${cfg.modelPath} does not exist; run scripts/install-real-model.sh`);
    const { getLlama, LlamaChat } = await importNodeLlamaCpp(cfg.modulesDir);
    // CPU only, prebuilt binary only: never compile and never download anything at run time.
    const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, progressLogs: false, logLevel: "error", maxThreads: cfg.threads });
    const model = await llama.loadModel({ modelPath: cfg.modelPath, gpuLayers: 0 });
    const contextSize = Math.min(cfg.contextSize, model.trainContextSize ?? cfg.contextSize);
    const context = await model.createContext({ contextSize, sequences: 1, threads: cfg.threads });
    const chat = new LlamaChat({ contextSequence: context.getSequence() });
    const jsonGrammar = await llama.getGrammarFor("json");
    return { llama, model, chat, jsonGrammar, schemaGrammars: new Map(), contextSize };
}

function countPromptTokens(engine, history) {
    const { contextText } = engine.chat.chatWrapper.generateContextState({ chatHistory: history });
    return contextText.tokenize(engine.model.tokenizer).length;
}

async function complete(engine, cfg, p, res, signal) {
    if (signal.aborted) return; // client left while queued
    const promptTokens = countPromptTokens(engine, p.history);
    if (promptTokens >= engine.contextSize)
        throw new HttpError(400, `prompt is ${promptTokens} tokens, the context holds ${engine.contextSize}`, "invalid_request_error", "context_length_exceeded");
    // Never let generation run past the context: node-llama-cpp would shift (drop) the prompt.
    const maxTokens = Math.min(p.maxTokens, engine.contextSize - promptTokens);

    const id = `chatcmpl-${crypto.randomBytes(12).toString("hex")}`;
    const created = Math.floor(Date.now() / 1000);
    const chunkBase = { id, object: "chat.completion.chunk", created, model: cfg.modelName };
    const writeChunk = (obj) => { if (!res.destroyed) res.write(`data: ${JSON.stringify(obj)}\n\n`); };

    if (p.stream) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
        writeChunk({ ...chunkBase, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] });
    }

    let completionTokens = 0;
    let firstTokenAt = null;
    const started = Date.now();
    const result = await engine.chat.generateResponse(p.history, {
        maxTokens,
        temperature: p.temperature,
        topP: p.topP,
        seed: p.seed,
        grammar: p.schemaGrammar ?? (p.json ? engine.jsonGrammar : undefined),
        customStopTriggers: p.stop.length > 0 ? p.stop : undefined,
        repeatPenalty: Object.keys(p.penalties).length > 0 ? p.penalties : undefined,
        signal,
        stopOnAbortSignal: true,
        onToken: (tokens) => { firstTokenAt ??= Date.now(); completionTokens += tokens.length; },
        onTextChunk: p.stream
            ? (text) => { if (text !== "") writeChunk({ ...chunkBase, choices: [{ index: 0, delta: { content: text }, finish_reason: null }] }); }
            : undefined,
    });
    const finishReason = result.metadata.stopReason === "maxTokens" ? "length" : signal.aborted ? "abort" : "stop";
    const usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
    const ended = Date.now();
    const firstToken = ((firstTokenAt ?? ended) - started) / 1000;
    console.error(`quarry-llm-server: ${p.stream ? "stream" : "completion"} prompt=${promptTokens} completion=${completionTokens} finish=${finishReason} in ${((ended - started) / 1000).toFixed(1)}s (first token after ${firstToken.toFixed(1)}s)`);

    // QUARRY_LLM_TRANSCRIPT=FILE: one JSON line per answer (the system prompt's opening and the
    // raw output), so tests can keep what a real model produced as parser fixtures.
    if (process.env.QUARRY_LLM_TRANSCRIPT) {
        const system = p.history.find((h) => h.type === "system")?.text ?? "";
        const line = JSON.stringify({ model: cfg.modelName, finish: finishReason, system: system.slice(0, 300), output: result.response });
        try { fs.appendFileSync(process.env.QUARRY_LLM_TRANSCRIPT, line + "\n"); } catch (e) { console.error(`quarry-llm-server: transcript: ${e.message}`); }
    }

    if (signal.aborted) return;
    if (p.stream) {
        writeChunk({ ...chunkBase, choices: [{ index: 0, delta: {}, finish_reason: finishReason }] });
        if (p.includeUsage) writeChunk({ ...chunkBase, choices: [], usage });
        res.write("data: [DONE]\n\n");
        res.end();
        return;
    }
    sendJson(res, 200, {
        id,
        object: "chat.completion",
        created,
        model: cfg.modelName,
        choices: [{ index: 0, message: { role: "assistant", content: result.response }, finish_reason: finishReason }],
        usage,
    });
}

main().catch((err) => {
    console.error(`quarry-llm-server: ${err?.message ?? err}`);
    process.exit(2);
});
