#!/usr/bin/env node
// Pi oracle for pi_nb's compatibility tests (Pi 1.3.0 and 1.6.0).
//
// This script only *calls* the published @earendil-works/pi-coding-agent modules (loaded by
// file URL because the package root import needs Node >= 22). It contains no Pi code.
// Location of the install: env PI_ORACLE_DIR (the directory that contains node_modules/);
// default <repo>/.pi-oracle. Env PI_ORACLE_VERSION (default 1.3.0) is the version the
// install must hold, so a test never compares against another release than it names.
//
// Subcommands (each prints one JSON document to stdout):
//   context FILE [--leaf ID]
//   cut FILE [--leaf ID] [--keep N] [--reserve N]
//   gen OUTDIR [--seed N] [--count N]
//   serialize        (stdin: JSON list of lists of context messages; stdout: for each list,
//                     serializeConversation(convertToLlm(list)): the text a summary call reads)
//   batch            (stdin: JSON list of {"cmd":"context"|"cut", "file", "leaf"?, "keep"?, "reserve"?};
//                     stdout: list of results, an {"error": msg} object for a failed request)
//                     also {"cmd":"branchPrep", "file", "leaf"?, "last"?, "budget"?}: Pi's
//                     prepareBranchEntries of the last `last` entries of the branch, and
//                     {"cmd":"summaryRequests", "file", "leaf"?, "keep"?, "reserve"?, "focus"?,
//                     "thinking"?, "model": {contextWindow, maxTokens, reasoning}, "branchLast"?}:
//                     what Pi's own compact() and generateBranchSummary() send (captured by a
//                     streamFn: options, prompt, and the maxTokens pi-ai's clampMaxTokensToContext
//                     makes of them); no model is called.

import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const ORACLE_DIR = resolve(process.env.PI_ORACLE_DIR || join(HERE, "..", "..", "..", ".pi-oracle"));
const PKG_DIR = join(ORACLE_DIR, "node_modules", "@earendil-works", "pi-coding-agent");
const CORE = pathToFileURL(join(PKG_DIR, "dist", "core") + "/").href;
// Releases whose session-manager / compaction modules this script is known to drive.
const SUPPORTED = ["1.3.0", "1.6.0"];
const EXPECTED = process.env.PI_ORACLE_VERSION || "1.3.0";

let pi = null;
async function loadPi() {
    if (pi) return pi;
    const pkg = JSON.parse(readFileSync(join(PKG_DIR, "package.json"), "utf8"));
    if (!SUPPORTED.includes(EXPECTED)) {
        throw new Error(`PI_ORACLE_VERSION=${EXPECTED} is not one of ${SUPPORTED.join(", ")}`);
    }
    if (pkg.version !== EXPECTED) {
        throw new Error(`expected pi-coding-agent ${EXPECTED} in ${PKG_DIR}, found ${pkg.version}`);
    }
    const sm = await import(new URL("session-manager.js", CORE));
    const comp = await import(new URL("compaction/compaction.js", CORE));
    const utils = await import(new URL("compaction/utils.js", CORE));
    const messages = await import(new URL("messages.js", CORE));
    const branch = await import(new URL("compaction/branch-summarization.js", CORE));
    const simple = await import(
        pathToFileURL(join(ORACLE_DIR, "node_modules", "@earendil-works", "pi-ai", "dist", "api", "simple-options.js")).href
    );
    const estimate = await import(
        pathToFileURL(join(ORACLE_DIR, "node_modules", "@earendil-works", "pi-ai", "dist", "utils", "estimate.js")).href
    );
    pi = {
        ...sm,
        ...comp,
        ...utils,
        convertToLlm: messages.convertToLlm,
        prepareBranchEntries: branch.prepareBranchEntries,
        generateBranchSummary: branch.generateBranchSummary,
        clampMaxTokensToContext: simple.clampMaxTokensToContext,
        estimateContextTokens: estimate.estimateContextTokens,
    };
    return pi;
}

// ---------------------------------------------------------------------------------------------
// argument parsing

function parseArgs(argv) {
    const positional = [];
    const opts = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a.startsWith("--")) {
            const key = a.slice(2);
            const val = argv[i + 1];
            if (val === undefined) throw new Error(`missing value for ${a}`);
            opts[key] = val;
            i++;
        } else {
            positional.push(a);
        }
    }
    return { positional, opts };
}

function intOpt(v, dflt) {
    if (v === undefined || v === null) return dflt;
    const n = Number(v);
    if (!Number.isSafeInteger(n)) throw new Error(`not an integer: ${v}`);
    return n;
}

// ---------------------------------------------------------------------------------------------
// context / cut

// Open a *copy* of the file: SessionManager.open may modify the file it opens (it appends a
// missing trailing newline and rewrites old-version files after migration). Within one process
// an opened file is reused (the leaf is reset before every request; nothing is appended).
const opened = new Map();
let scratchDir = null;
process.on("exit", () => {
    if (scratchDir) rmSync(scratchDir, { recursive: true, force: true });
});

function withOpenedCopy(P, file, leaf, fn) {
    const key = resolve(file);
    let rec = opened.get(key);
    if (!rec) {
        scratchDir ??= mkdtempSync(join(tmpdir(), "pi-oracle-"));
        const copyDir = join(scratchDir, String(opened.size));
        mkdirSync(copyDir);
        const copy = join(copyDir, basename(file));
        copyFileSync(file, copy);
        const sm = P.SessionManager.open(copy);
        rec = { sm, initialLeaf: sm.getLeafId() };
        opened.set(key, rec);
    }
    const { sm, initialLeaf } = rec;
    if (leaf !== undefined && leaf !== null) sm.branch(leaf); // throws "Entry X not found"
    else if (initialLeaf === null) sm.resetLeaf();
    else sm.branch(initialLeaf);
    return fn(sm);
}

function contextOf(P, file, leaf) {
    return withOpenedCopy(P, file, leaf, (sm) => {
        const projection = sm.buildSessionProjection();
        const ctx = sm.buildSessionContext();
        const tokens = P.estimateProjectedContextTokens(projection, sm.getBranch());
        return {
            leafId: sm.getLeafId(),
            model: ctx.model,
            thinkingLevel: ctx.thinkingLevel,
            messages: ctx.messages,
            tokens: {
                tokens: tokens.tokens,
                usageTokens: tokens.usageTokens,
                trailingTokens: tokens.trailingTokens,
                lastUsageIndex: tokens.lastUsageIndex,
            },
        };
    });
}

function cutOf(P, file, leaf, keep, reserve) {
    return withOpenedCopy(P, file, leaf, (sm) => {
        const settings = { enabled: true, reserveTokens: reserve ?? 16384, keepRecentTokens: keep ?? 20000 };
        const prep = P.prepareCompaction(sm.getBranch(), settings);
        if (prep === undefined) return { nothingToCompact: true };
        const { readFiles, modifiedFiles } = P.computeFileLists(prep.fileOps);
        return {
            firstKeptEntryId: prep.firstKeptEntryId,
            isSplitTurn: prep.isSplitTurn,
            tokensBefore: prep.tokensBefore,
            messagesToSummarize: prep.messagesToSummarize.length,
            turnPrefixMessages: prep.turnPrefixMessages.length,
            previousSummary: prep.previousSummary !== undefined,
            readFiles,
            modifiedFiles,
        };
    });
}

// ---------------------------------------------------------------------------------------------
// summary requests (no model is called: a capturing streamFn answers every call)

function branchPrepOf(P, file, leaf, last, budget) {
    return withOpenedCopy(P, file, leaf, (sm) => {
        const branch = sm.getBranch();
        const entries = last ? branch.slice(-last) : branch;
        const prep = P.prepareBranchEntries(entries, budget ?? 0);
        const { readFiles, modifiedFiles } = P.computeFileLists(prep.fileOps);
        return { ids: entries.map((e) => e.id), messages: prep.messages, totalTokens: prep.totalTokens, readFiles, modifiedFiles };
    });
}

async function summaryRequestsOf(P, r) {
    const calls = [];
    let phase = "compaction";
    const model = { id: "m", provider: "x", api: "x", ...r.model };
    const streamFn = async (m, context, options) => {
        const last = context.messages.at(-1);
        const prompt = last.content.map((b) => b.text ?? "").join("");
        const system = context.messages[0]?.role === "system" ? context.messages[0] : null;
        const kind = phase === "branch" ? "branch" : prompt.startsWith("# Conversation") ? "turn_prefix" : "history";
        calls.push({
            kind,
            maxTokens: options.maxTokens ?? null,
            reasoning: options.reasoning ?? null,
            prompt,
            // the system prompt: a leading system message (1.6.0) or context.systemPrompt (1.3.0)
            system: system ? system.content : (context.systemPrompt ?? null),
            inputTokens: P.estimateContextTokens(context).tokens,
            effectiveMaxTokens: P.clampMaxTokensToContext(m, context, options.maxTokens ?? m.maxTokens),
        });
        const reply = { role: "assistant", content: [{ type: "text", text: "S" }], api: "x", provider: "x", model: "m", usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop", timestamp: 1 };
        return { result: async () => reply };
    };
    const copyOf = (fn) => withOpenedCopy(P, r.file, r.leaf ?? undefined, fn);
    const prep = copyOf((sm) => P.prepareCompaction(sm.getBranch(), { enabled: true, reserveTokens: r.reserve ?? 16384, keepRecentTokens: r.keep ?? 20000 }));
    let compaction = null;
    if (prep) {
        compaction = { isSplitTurn: prep.isSplitTurn, firstKeptEntryId: prep.firstKeptEntryId };
        await P.compact(prep, model, "k", {}, r.focus ?? undefined, undefined, r.thinking ?? undefined, streamFn);
    }
    let branchIds = null;
    if (r.branchLast) {
        phase = "branch";
        const entries = copyOf((sm) => sm.getBranch().slice(-r.branchLast));
        branchIds = entries.map((e) => e.id);
        await P.generateBranchSummary(entries, { model, apiKey: "k", headers: {}, signal: new AbortController().signal, customInstructions: r.focus ?? undefined, thinkingLevel: r.thinking ?? undefined, reserveTokens: r.reserve ?? 16384, streamFn });
    }
    return { compaction, branchIds, calls };
}

// ---------------------------------------------------------------------------------------------
// gen: deterministic, varied sessions written through Pi's own SessionManager API

function mulberry32(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

class Rng {
    constructor(seed) {
        this.next = mulberry32(seed);
    }
    float() {
        return this.next();
    }
    int(lo, hi) {
        // inclusive
        return lo + Math.floor(this.next() * (hi - lo + 1));
    }
    chance(p) {
        return this.next() < p;
    }
    pick(arr) {
        return arr[Math.floor(this.next() * arr.length)];
    }
    hex(n) {
        let s = "";
        for (let i = 0; i < n; i++) s += "0123456789abcdef"[Math.floor(this.next() * 16)];
        return s;
    }
    weighted(table) {
        // table: [[weight, value], ...]
        const total = table.reduce((s, [w]) => s + w, 0);
        let r = this.next() * total;
        for (const [w, v] of table) {
            if ((r -= w) < 0) return v;
        }
        return table[table.length - 1][1];
    }
}

// Make Pi's ids, timestamps and session ids deterministic: its entry ids come from
// crypto.randomUUID() and its timestamps from `new Date()`.
function installDeterminism(seed) {
    const require = createRequire(import.meta.url);
    const crypto = require("node:crypto");
    const idRng = new Rng(seed ^ 0x5eed1d);
    crypto.randomUUID = () =>
        `${idRng.hex(8)}-${idRng.hex(4)}-4${idRng.hex(3)}-${idRng.pick(["8", "9", "a", "b"])}${idRng.hex(3)}-${idRng.hex(12)}`;
    syncBuiltinESMExports();
    const RealDate = Date;
    const clockRng = new Rng(seed ^ 0xc10c);
    const clock = { now: RealDate.UTC(2026, 0, 15, 9, 0, 0) + (seed % 1000) * 86400000 };
    const tick = () => {
        clock.now += 1 + Math.floor(clockRng.float() * 2500);
        return clock.now;
    };
    class FakeDate extends RealDate {
        constructor(...args) {
            if (args.length === 0) super(tick());
            else super(...args);
        }
        static now() {
            return tick();
        }
    }
    globalThis.Date = FakeDate;
    return { idRng, tick, clock };
}

const WORDS = [
    "the", "file", "function", "error", "test", "config", "parse", "value", "return", "module",
    "naïve", "café", "日本語", "Ω", "😀", "𝄞", "🧪", "a\"quote\"", "back\\slash", "tab\there",
    "line\nbreak", "<tag>", "&amp;", "ﬀ", "Ａ", "\u00a0nbsp", "", "ok", "yes", "no", "maybe",
    "refactor", "compile", "bash", "npm", "python", "zero\u200bwidth", "emoji👩‍💻", "é",
    "ctl\u0001x", "ls\u2028ep", "del\u007f",
];
const PATHS = [
    "src/main.py", "src/utils.py", "README.md", "tests/test_main.py", "package.json",
    "src/𝄞music.ts", "src/ﬀligature.ts", "src/Ａwide.ts", "docs/日本語.md", "a b/space.txt",
    "/etc/hosts", "src/zeta.rs", "src/Alpha.rs", "src/😀.txt",
];
const PROVIDERS = [
    ["anthropic", "claude-sonnet-4-5", "anthropic-messages"],
    ["openai", "gpt-5", "openai-responses"],
    ["google", "gemini-2.5-pro", "google-generative-ai"],
    ["local", "smollm2-135m", "openai-completions"],
];

class Gen {
    constructor(P, rng, det, profile) {
        this.P = P;
        this.r = rng;
        this.det = det;
        this.p = profile;
        this.provider = rng.pick(PROVIDERS);
        this.callN = 0;
    }

    now() {
        return Date.now();
    }

    text(min, max) {
        const n = this.r.int(min, max);
        const out = [];
        for (let i = 0; i < n; i++) out.push(this.r.pick(WORDS));
        return out.join(" ");
    }

    bigText(chars) {
        const parts = [];
        let len = 0;
        let line = 1;
        while (len < chars) {
            const s = `${String(line++).padStart(5, " ")}  ${this.text(4, 14)}`;
            parts.push(s);
            len += s.length + 1;
        }
        return parts.join("\n");
    }

    image() {
        const n = this.r.int(4, 40);
        const bytes = [];
        for (let i = 0; i < n; i++) bytes.push(this.r.int(0, 255));
        return {
            type: "image",
            data: Buffer.from(bytes).toString("base64"),
            mimeType: this.r.pick(["image/png", "image/jpeg", "image/webp"]),
        };
    }

    usage(zero) {
        if (zero) {
            return {
                input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
                cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
            };
        }
        const input = this.r.int(5, 60000);
        const output = this.r.int(1, 4000);
        const cacheRead = this.r.chance(0.5) ? this.r.int(0, 50000) : 0;
        const cacheWrite = this.r.chance(0.3) ? this.r.int(0, 5000) : 0;
        const sum = input + output + cacheRead + cacheWrite;
        const u = {
            input, output, cacheRead, cacheWrite,
            // totalTokens 0 with non-zero parts exercises the component fallback
            totalTokens: this.r.chance(0.15) ? 0 : sum,
            cost: {
                input: input * 3e-6, output: output * 1.5e-5, cacheRead: cacheRead * 3e-7,
                cacheWrite: cacheWrite * 3.75e-6, total: input * 3e-6 + output * 1.5e-5,
            },
        };
        if (this.r.chance(0.2)) u.reasoning = Math.min(output, this.r.int(0, 500));
        return u;
    }

    userMessage(opts = {}) {
        const ts = this.now();
        const style = opts.style ?? this.r.weighted([[5, "string"], [3, "array"], [1, "image"], [0.3, "empty"]]);
        let content;
        if (style === "string") content = this.text(1, 30);
        else if (style === "empty") content = this.r.chance(0.5) ? "" : [];
        else {
            content = [];
            const n = this.r.int(1, 3);
            for (let i = 0; i < n; i++) content.push({ type: "text", text: this.text(1, 20) });
            if (style === "image" || (this.p.images && this.r.chance(0.3))) {
                content.splice(this.r.int(0, content.length), 0, this.image());
            }
        }
        if (opts.bigChars) content = this.bigText(opts.bigChars);
        return { role: "user", content, timestamp: ts };
    }

    assistantMessage({ toolCalls = [], stopReason, zeroUsage, textBlocks } = {}) {
        const [provider, model, api] = this.r.chance(0.9) ? this.provider : this.r.pick(PROVIDERS);
        const content = [];
        if (this.r.chance(this.p.thinking ? 0.6 : 0.15)) {
            const th = { type: "thinking", thinking: this.text(3, 40) };
            if (this.r.chance(0.5)) th.thinkingSignature = `sig_${this.r.hex(24)}`;
            if (this.r.chance(0.05)) {
                th.redacted = true;
                th.thinking = "";
            }
            content.push(th);
        }
        const nText = textBlocks ?? (toolCalls.length ? this.r.int(0, 1) : this.r.int(1, 2));
        for (let i = 0; i < nText; i++) {
            const t = { type: "text", text: this.text(1, 50) };
            if (this.r.chance(0.1)) t.textSignature = `ts_${this.r.hex(10)}`;
            content.push(t);
        }
        content.push(...toolCalls);
        const sr =
            stopReason ??
            (toolCalls.length
                ? "toolUse"
                : this.r.weighted([[20, "stop"], [this.p.errors ? 3 : 0.3, "error"], [this.p.errors ? 2 : 0.2, "aborted"], [this.p.errors ? 2 : 0.2, "length"]]));
        const zero = zeroUsage ?? (sr === "aborted" || sr === "error" ? this.r.chance(0.7) : this.r.chance(0.12));
        const msg = {
            role: "assistant",
            content,
            api,
            provider,
            model,
            usage: this.usage(zero),
            stopReason: sr,
            timestamp: this.now(),
        };
        if (sr === "error") msg.errorMessage = this.r.pick(["prompt is too long: 210000 tokens > 200000 maximum", "overloaded_error", "fetch failed 😀"]);
        if (sr === "aborted") msg.errorMessage = "Request was aborted";
        if (this.r.chance(0.2)) msg.responseId = `resp_${this.r.hex(12)}`;
        if (this.r.chance(0.2)) msg.durationMs = this.r.int(100, 90000);
        return msg;
    }

    toolCall(name) {
        const id = `call_${this.r.hex(6)}_${this.callN++}`;
        const path = this.r.pick(PATHS);
        let args;
        switch (name) {
            case "read":
                args = this.r.chance(0.2) ? { path, offset: this.r.int(1, 100), limit: 50 } : { path };
                break;
            case "write":
                args = { path, content: this.text(2, 30) };
                break;
            case "edit":
                args = { path, oldText: this.text(1, 5), newText: this.text(1, 5) };
                break;
            case "bash":
                args = { command: this.r.pick(["ls -la", "npm test", "pytest -q", "echo 😀 𝄞", "cat 'a b/space.txt'"]) };
                if (this.r.chance(0.2)) args.path = path; // not a file op: only read/write/edit count
                break;
            default:
                args = this.r.chance(0.5) ? { path, pattern: "TODO" } : { query: this.text(1, 3), nested: { k: [1, 2, { z: null }] } };
        }
        return { type: "toolCall", id, name, arguments: args };
    }

    toolResult(call, { bigChars } = {}) {
        const content = [{ type: "text", text: bigChars ? this.bigText(bigChars) : this.text(1, 60) }];
        if (this.p.images && this.r.chance(0.15)) content.push(this.image());
        if (this.r.chance(0.05)) content.push({ type: "text", text: "" });
        const msg = {
            role: "toolResult",
            toolCallId: call.id,
            toolName: call.name,
            content,
            isError: this.r.chance(0.15),
            timestamp: this.now(),
        };
        if (this.r.chance(0.4)) msg.details = { exitCode: this.r.int(0, 2), diff: this.r.chance(0.5) ? "-a\n+b" : undefined };
        if (this.r.chance(0.05)) msg.durationMs = this.r.int(1, 5000);
        return msg;
    }

    bashExecution() {
        const cancelled = this.r.chance(0.15);
        const truncated = this.r.chance(0.2);
        const msg = {
            role: "bashExecution",
            command: this.r.pick(["ls", "git status", "echo 'héllo 𝄞'", "make -j8", "false"]),
            output: this.r.chance(0.15) ? "" : this.text(1, 40),
            exitCode: cancelled ? undefined : this.r.pick([0, 0, 0, 1, 2, 127]),
            cancelled,
            truncated,
            timestamp: this.now(),
        };
        if (truncated) msg.fullOutputPath = `/tmp/pi-bash-${this.r.hex(8)}.log`;
        if (this.r.chance(0.3)) msg.excludeFromContext = true;
        return msg;
    }

    systemMessage(first) {
        const msg = { role: "system", content: first ? `You are a helpful coding agent. ${this.text(3, 20)}` : this.r.chance(0.5) ? "" : [{ type: "text", text: this.text(1, 10) }], timestamp: this.now() };
        if (this.r.chance(0.6)) {
            msg.sections = first
                ? { tools: this.text(3, 12), "2": "numeric-looking section name", env: `cwd: /tmp/proj ${this.text(1, 4)}` }
                : { env: this.r.chance(0.5) ? null : this.text(1, 6), extra: this.text(1, 6) };
        }
        if (first || this.r.chance(0.4)) {
            msg.toolsAdded = ["read", "write", "edit", "bash"].filter(() => first || this.r.chance(0.3)).map((name) => ({
                name,
                description: `${name} tool ${this.text(1, 4)}`,
                parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
            }));
        }
        if (!first && this.r.chance(0.3)) msg.toolsRemoved = [{ name: this.r.pick(["bash", "edit", "nosuch"]) }];
        return msg;
    }

    // ------------------------------------------------------------------ operations

    branchEntries() {
        return this.sm.getBranch();
    }

    turn() {
        const sm = this.sm;
        const big = this.p.large && this.r.chance(0.6);
        sm.appendMessage(this.userMessage(big && this.r.chance(0.2) ? { bigChars: this.r.int(2000, 20000) } : {}));
        let steps = this.r.weighted([[4, 0], [4, 1], [2, 2], [this.p.large ? 2 : 0.5, 4]]);
        while (steps-- > 0) {
            const n = this.r.weighted([[6, 1], [2, 2], [1, 3]]);
            const calls = [];
            for (let i = 0; i < n; i++) calls.push(this.toolCall(this.r.weighted([[4, "read"], [2, "write"], [2, "edit"], [2, "bash"], [1, "grep"]])));
            const a = this.assistantMessage({ toolCalls: calls });
            sm.appendMessage(a);
            for (const c of calls) {
                if (this.r.chance(0.05)) continue; // missing tool result
                sm.appendMessage(this.toolResult(c, big && this.r.chance(0.5) ? { bigChars: this.r.int(3000, 40000) } : {}));
            }
            if (a.stopReason !== "toolUse") break;
        }
        sm.appendMessage(this.assistantMessage());
    }

    editableOnBranch() {
        return this.branchEntries().filter(
            (e) =>
                e.type === "custom_message" ||
                (e.type === "message" && ["user", "assistant", "toolResult"].includes(e.message.role)),
        );
    }

    contextEdit() {
        const targets = this.editableOnBranch();
        if (!targets.length) return;
        // prefer recent targets, sometimes anything on the branch
        const target = this.r.chance(0.6) ? targets[Math.max(0, targets.length - 1 - this.r.int(0, 6))] : this.r.pick(targets);
        const times = this.r.weighted([[5, 1], [2, 2], [1, 3]]);
        for (let i = 0; i < times; i++) {
            const kind = this.r.weighted([[3, "null"], [3, "string"], [2, "array"]]);
            let replacement;
            if (kind === "null") replacement = null;
            else if (kind === "string") replacement = { content: this.r.chance(0.1) ? "" : `[edited] ${this.text(1, 12)}` };
            else {
                const content = [{ type: "text", text: `[edited blocks] ${this.text(1, 8)}` }];
                if (this.r.chance(0.3)) content.push(this.image());
                if (this.r.chance(0.2)) content.push({ type: "text", text: this.text(1, 4) });
                replacement = { content };
            }
            this.sm.appendContextEdit(target.id, replacement);
            if (i + 1 < times && this.r.chance(0.4)) this.turn(); // edits of one target spread over time
        }
    }

    compaction(mode) {
        const sm = this.sm;
        const branch = this.branchEntries();
        if (!branch.length) return;
        let prevIdx = -1;
        for (let i = branch.length - 1; i >= 0; i--) if (branch[i].type === "compaction") { prevIdx = i; break; }
        const prev = prevIdx >= 0 ? branch[prevIdx] : null;
        const after = branch.slice(prevIdx + 1);
        mode ??= this.r.weighted([[6, "normal"], [1, "self"], [prev ? 2 : 0, "inPrevKept"], [prev ? 1 : 0, "beforePrevKept"], [1, "nonMessage"], [0.3, "unknown"], [0.5, "offBranch"], [1, "firstOfAfter"]]);
        let firstKept = null;
        const isVisibleMsg = (e) => e.type === "message" && e.message.role !== "toolResult";
        if (mode === "normal") {
            const cands = after.filter(isVisibleMsg);
            firstKept = cands.length ? cands[Math.max(0, cands.length - 1 - this.r.int(0, 5))].id : null;
        } else if (mode === "firstOfAfter") {
            firstKept = after.length ? after[0].id : null;
        } else if (mode === "inPrevKept" && prev) {
            const start = branch.findIndex((e) => e.id === prev.firstKeptEntryId);
            const kept = start >= 0 && start < prevIdx ? branch.slice(start, prevIdx) : [];
            firstKept = kept.length ? this.r.pick(kept).id : prev.id;
        } else if (mode === "beforePrevKept" && prev) {
            const start = branch.findIndex((e) => e.id === prev.firstKeptEntryId);
            const before = branch.slice(0, start >= 0 ? start : prevIdx);
            firstKept = before.length ? this.r.pick(before).id : null;
        } else if (mode === "nonMessage") {
            const cands = after.filter((e) => e.type !== "message");
            firstKept = cands.length ? this.r.pick(cands).id : null;
        } else if (mode === "unknown") {
            firstKept = "0badf00d";
        } else if (mode === "offBranch") {
            const onBranch = new Set(branch.map((e) => e.id));
            const cands = sm.getEntries().filter((e) => !onBranch.has(e.id));
            firstKept = cands.length ? this.r.pick(cands).id : null;
        }
        // mode "self" (and fallbacks): null => Pi stores the compaction's own id
        const details = this.r.chance(0.8)
            ? { readFiles: [this.r.pick(PATHS), this.r.pick(PATHS)].filter((x, i, a) => a.indexOf(x) === i), modifiedFiles: this.r.chance(0.5) ? [this.r.pick(PATHS)] : [] }
            : undefined;
        const fromHook = this.r.weighted([[6, undefined], [2, false], [1, true]]);
        const usage = this.r.chance(0.3) ? this.usage(false) : undefined;
        const summary = `## Goal\n${this.text(2, 20)}\n\n## Progress\n- [x] ${this.text(1, 10)}${this.p.large ? `\n${this.text(50, 300)}` : ""}`;
        sm.appendCompaction(summary, firstKept, this.r.int(100, 200000), details, fromHook, usage);
    }

    branchSomewhere() {
        const all = this.sm.getEntries();
        if (!all.length) return;
        const branch = this.branchEntries();
        const pool = this.r.chance(0.7) && branch.length ? branch : all;
        this.sm.branch(this.r.pick(pool).id);
    }

    branchSummary() {
        const all = this.sm.getEntries();
        const target = this.r.chance(0.1) || !all.length ? null : this.r.pick(this.r.chance(0.7) ? this.branchEntries() : all).id;
        const summary = this.r.chance(0.12) ? "" : `The user explored: ${this.text(2, 25)}`;
        const details = this.r.chance(0.7) ? { readFiles: [this.r.pick(PATHS)], modifiedFiles: [] } : undefined;
        const fromHook = this.r.weighted([[5, undefined], [2, false], [1, true]]);
        const usage = this.r.chance(0.2) ? this.usage(false) : undefined;
        this.sm.branchWithSummary(target, summary, details, fromHook, usage);
    }

    customMessage() {
        const content = this.r.chance(0.5)
            ? this.text(1, 20)
            : [{ type: "text", text: this.text(1, 10) }, ...(this.p.images && this.r.chance(0.4) ? [this.image()] : [])];
        const details = this.r.chance(0.5) ? { source: "ext", n: this.r.int(0, 9) } : undefined;
        this.sm.appendCustomMessageEntry(this.r.pick(["reminder", "plan-mode", "rag"]), content, this.r.chance(0.6), details);
    }

    label() {
        const all = this.sm.getEntries();
        if (!all.length) return;
        const target = this.r.pick(all).id;
        this.sm.appendLabelChange(target, this.r.chance(0.8) ? this.r.pick(["checkpoint", "bug 🐛", "good", "𝄞"]) : undefined);
    }

    op() {
        const p = this.p;
        const op = this.r.weighted([
            [10, "turn"],
            [p.bash ? 2 : 0.3, "bash"],
            [p.custom ? 1.5 : 0.2, "custom"],
            [p.custom ? 1.5 : 0.2, "customMessage"],
            [p.labels ? 1.5 : 0.2, "label"],
            [p.settings ? 1.5 : 0.2, "model"],
            [p.settings ? 1.5 : 0.2, "thinking"],
            [p.settings ? 0.5 : 0.05, "sessionInfo"],
            [p.settings ? 0.5 : 0.05, "usageEntry"],
            [p.edits ? 2.5 : 0, "edit"],
            [p.compactions ? 1.2 : 0, "compaction"],
            [p.branches ? 1.2 : 0, "branch"],
            [p.branches ? 1 : 0, "branchSummary"],
            [p.system ? 0.5 : 0, "system"],
            [p.branches ? 0.05 : 0, "resetLeaf"],
        ]);
        const sm = this.sm;
        switch (op) {
            case "turn": return this.turn();
            case "bash": return sm.appendMessage(this.bashExecution());
            case "custom": return sm.appendCustomEntry(this.r.pick(["state", "todo", "ext-data"]), this.r.chance(0.8) ? { items: [this.text(1, 3)], n: this.r.int(0, 100) } : undefined);
            case "customMessage": return this.customMessage();
            case "label": return this.label();
            case "model": {
                const [prov, model] = this.r.pick(PROVIDERS);
                sm.appendModelChange(prov, model);
                if (this.r.chance(0.5)) this.provider = PROVIDERS.find((x) => x[1] === model);
                return;
            }
            case "thinking": return sm.appendThinkingLevelChange(this.r.pick(["off", "minimal", "low", "medium", "high", "xhigh"]));
            case "sessionInfo": return sm.appendSessionInfo(this.r.chance(0.2) ? "" : `My session\n${this.text(1, 4)}`);
            case "usageEntry": {
                const [prov, model] = this.provider;
                return sm.appendUsage("cache_warm", prov, model, this.usage(false), this.r.chance(0.5) ? "warm" : undefined);
            }
            case "edit": return this.contextEdit();
            case "compaction": return this.compaction();
            case "branch": return this.branchSomewhere();
            case "branchSummary": return this.branchSummary();
            case "system": return sm.appendMessage(this.systemMessage(false));
            case "resetLeaf": return sm.resetLeaf();
        }
    }

    run(sm) {
        this.sm = sm;
        const p = this.p;
        if (p.settings && this.r.chance(0.7)) sm.appendModelChange(...this.provider.slice(0, 2));
        if (p.settings && this.r.chance(0.5)) sm.appendThinkingLevelChange(this.r.pick(["low", "high"]));
        if (p.system) sm.appendMessage(this.systemMessage(true));
        const forced = [...(p.forced ?? [])];
        const n = this.r.int(p.minOps, p.maxOps);
        const forcedAt = new Map();
        for (const f of forced) {
            let at = this.r.int(Math.floor(n / 4), n - 1);
            while (forcedAt.has(at)) at = (at + 1) % n;
            forcedAt.set(at, f);
        }
        for (let i = 0; i < n; i++) {
            const f = forcedAt.get(i);
            if (f) this.forcedOp(f);
            else this.op();
        }
        // make sure the file ends on a conversation (and exists: the file is flushed on the
        // first user/assistant message)
        if (p.endWithRecovery) this.forcedOp("overflowRecovery");
        else if (this.r.chance(0.7) || !sm.getEntries().some((e) => e.type === "message")) this.turn();
    }

    forcedOp(f) {
        switch (f) {
            case "compactionSelf": return this.compaction("self");
            case "compactionChain": {
                // compaction, more turns, compaction pointing into the previous kept range
                this.turn();
                this.compaction("normal");
                this.turn();
                this.turn();
                this.compaction("inPrevKept");
                this.turn();
                return;
            }
            case "compactionNormal": return this.compaction("normal");
            case "compactionNonMessage": return this.compaction("nonMessage");
            case "compactionUnknown": return this.compaction("unknown");
            case "compactionOffBranch": {
                // leave an abandoned path behind so there is an off-branch entry to point at
                const b = this.branchEntries();
                if (b.length > 3) {
                    this.turn();
                    this.sm.branch(b[b.length - 2].id);
                    this.turn();
                }
                return this.compaction("offBranch");
            }
            case "compactionBeforePrevKept": {
                this.compaction("normal");
                this.turn();
                return this.compaction("beforePrevKept");
            }
            case "multiEdit": {
                const t = this.editableOnBranch();
                if (!t.length) this.turn();
                const target = this.editableOnBranch().at(-1);
                this.sm.appendContextEdit(target.id, { content: "first replacement" });
                this.sm.appendContextEdit(target.id, null);
                this.sm.appendContextEdit(target.id, { content: [{ type: "text", text: "final replacement 𝄞" }] });
                return;
            }
            case "editAssistantString": {
                const a = this.branchEntries().filter((e) => e.type === "message" && (e.message.role === "assistant" || e.message.role === "toolResult"));
                if (a.length) this.sm.appendContextEdit(this.r.pick(a).id, { content: "string replacement for assistant/toolResult" });
                return;
            }
            case "editThenCompact": {
                this.contextEdit();
                this.turn();
                return this.compaction("normal");
            }
            case "branchSummaryEmpty": {
                const b = this.branchEntries();
                return this.sm.branchWithSummary(b.length > 2 ? b[b.length - 3].id : null, "", undefined, undefined);
            }
            case "branchSummaryRoot": return this.sm.branchWithSummary(null, "Summary of a branch abandoned back to the root.", { readFiles: [], modifiedFiles: ["x.py"] }, false);
            case "bashExcluded": {
                const m = this.bashExecution();
                m.excludeFromContext = true;
                return this.sm.appendMessage(m);
            }
            case "overflowRecovery": {
                // what Pi 1.3 does after a context overflow: the failed assistant (and its
                // tool results) are omitted with context_edit(null), raw history kept
                this.sm.appendMessage(this.userMessage({ bigChars: this.r.int(400, this.p.large ? 30000 : 3000) }));
                const calls = this.r.chance(0.5) ? [this.toolCall("read")] : [];
                const a = this.assistantMessage({ toolCalls: calls, stopReason: this.r.pick(["error", "length"]), zeroUsage: true });
                if (a.stopReason === "error") a.errorMessage = "prompt is too long: 201000 tokens > 200000 maximum";
                const aid = this.sm.appendMessage(a);
                const omit = [aid];
                for (const c of calls) omit.push(this.sm.appendMessage(this.toolResult(c)));
                for (const id of omit) this.sm.appendContextEdit(id, null);
                return;
            }
            case "systemDelta": {
                // JS truthiness: an empty toolsAdded array still costs JSON "[]" (2 chars)
                this.sm.appendMessage(this.userMessage({ style: "string" }));
                this.sm.appendMessage(this.assistantMessage({ stopReason: "stop", zeroUsage: false }));
                this.sm.appendMessage({ role: "system", content: "", sections: { env: null, "10": this.text(1, 5) }, toolsAdded: [], timestamp: this.now() });
                this.sm.appendMessage(this.userMessage({ style: "string" }));
                return;
            }
            case "errorTurns": {
                this.sm.appendMessage(this.userMessage({ style: "image" }));
                this.sm.appendMessage(this.assistantMessage({ stopReason: "error", zeroUsage: true }));
                this.sm.appendMessage(this.assistantMessage({ stopReason: "aborted", zeroUsage: false }));
                this.sm.appendMessage(this.assistantMessage({ stopReason: "length" }));
                this.sm.appendMessage(this.assistantMessage({ stopReason: "stop", zeroUsage: true }));
                return;
            }
            default:
                throw new Error(`unknown forced op ${f}`);
        }
    }
}

function profileFor(index, rng) {
    const all = { images: true, thinking: true, errors: false, bash: true, custom: true, labels: true, settings: true, edits: true, compactions: true, branches: true, system: false, large: false, minOps: 25, maxOps: 60, forced: [] };
    const kind = index === 13 ? 13 : index % 12;
    switch (kind) {
        case 0: // plain linear chat
            return { ...all, images: false, bash: false, custom: false, labels: false, settings: false, edits: false, compactions: false, branches: false, thinking: false, minOps: 6, maxOps: 14, forced: [] };
        case 1: // large linear chat with tools: cuts at every keep value
            return { ...all, edits: false, compactions: false, branches: false, large: true, minOps: 25, maxOps: 40, forced: ["errorTurns"] };
        case 13: // (second cycle) large linear chat ending in an overflow recovery
            return { ...all, compactions: false, branches: false, large: true, endWithRecovery: true, minOps: 20, maxOps: 30, forced: [] };
        case 2:
            return { ...all, system: true, forced: ["compactionSelf", "multiEdit", "bashExcluded", "systemDelta"] };
        case 3:
            return { ...all, large: true, forced: ["compactionChain", "editAssistantString", "branchSummaryEmpty"] };
        case 4:
            return { ...all, errors: true, endWithRecovery: true, forced: ["errorTurns", "editThenCompact", "branchSummaryRoot", "overflowRecovery"] };
        case 5:
            return { ...all, system: true, large: true, forced: ["compactionChain", "compactionNonMessage", "multiEdit"] };
        case 6:
            return { ...all, forced: ["compactionBeforePrevKept", "compactionUnknown", "bashExcluded"] };
        case 7:
            return { ...all, system: true, forced: ["compactionOffBranch", "editThenCompact", "compactionSelf", "multiEdit", "systemDelta"] };
        case 8: // heavy branching, no compaction
            return { ...all, compactions: false, forced: ["branchSummaryEmpty", "branchSummaryRoot", "editAssistantString"], minOps: 40, maxOps: 80 };
        case 9:
            return { ...all, large: true, system: true, errors: true, endWithRecovery: true, forced: ["compactionChain", "compactionSelf", "editThenCompact", "errorTurns", "overflowRecovery"] };
        case 10: // many edits
            return { ...all, forced: ["multiEdit", "multiEdit", "editAssistantString", "compactionNormal", "overflowRecovery"], minOps: 30, maxOps: 50 };
        default:
            return { ...all, system: rng.chance(0.5), large: rng.chance(0.5), errors: rng.chance(0.5), forced: ["compactionChain"], minOps: 30, maxOps: 90 };
    }
}

async function gen(outdir, seed, count) {
    const P = await loadPi();
    const det = installDeterminism(seed);
    const dir = resolve(outdir);
    mkdirSync(dir, { recursive: true });
    const files = [];
    for (let i = 0; i < count; i++) {
        const rng = new Rng((seed * 1000003 + i * 7919) >>> 0);
        const profile = profileFor(i, rng);
        const sessionId = `${det.idRng.hex(8)}-${det.idRng.hex(4)}-7${det.idRng.hex(3)}-8${det.idRng.hex(3)}-${det.idRng.hex(12)}`;
        const sm = P.SessionManager.create("/tmp/pi-oracle-gen/project", dir, { id: sessionId });
        const g = new Gen(P, rng, det, profile);
        g.run(sm);
        const file = sm.getSessionFile();
        files.push(file);
    }
    return files;
}

// ---------------------------------------------------------------------------------------------

async function main() {
    const [cmd, ...rest] = process.argv.slice(2);
    const { positional, opts } = parseArgs(rest);
    let out;
    if (cmd === "context") {
        if (positional.length !== 1) throw new Error("usage: context FILE [--leaf ID]");
        const P = await loadPi();
        out = contextOf(P, positional[0], opts.leaf);
    } else if (cmd === "cut") {
        if (positional.length !== 1) throw new Error("usage: cut FILE [--leaf ID] [--keep N] [--reserve N]");
        const P = await loadPi();
        out = cutOf(P, positional[0], opts.leaf, intOpt(opts.keep, 20000), intOpt(opts.reserve, 16384));
    } else if (cmd === "gen") {
        if (positional.length !== 1) throw new Error("usage: gen OUTDIR [--seed N] [--count N]");
        out = await gen(positional[0], intOpt(opts.seed, 1), intOpt(opts.count, 12));
    } else if (cmd === "serialize") {
        const P = await loadPi();
        const lists = JSON.parse(readFileSync(0, "utf8"));
        out = lists.map((msgs) => P.serializeConversation(P.convertToLlm(msgs)));
    } else if (cmd === "batch") {
        const P = await loadPi();
        const reqs = JSON.parse(readFileSync(0, "utf8"));
        out = [];
        for (const r of reqs) {
            try {
                if (r.cmd === "context") out.push(contextOf(P, r.file, r.leaf ?? undefined));
                else if (r.cmd === "cut") out.push(cutOf(P, r.file, r.leaf ?? undefined, intOpt(r.keep, 20000), intOpt(r.reserve, 16384)));
                else if (r.cmd === "branchPrep") out.push(branchPrepOf(P, r.file, r.leaf ?? undefined, intOpt(r.last, 0), intOpt(r.budget, 0)));
                else if (r.cmd === "summaryRequests") out.push(await summaryRequestsOf(P, r));
                else throw new Error(`unknown batch cmd ${r.cmd}`);
            } catch (e) {
                out.push({ error: String(e?.message ?? e) });
            }
        }
    } else {
        throw new Error("usage: pi_oracle.mjs context|cut|gen|serialize|batch ...");
    }
    // Exit explicitly once the output is flushed: some Pi modules leave timers/handles behind
    // that would otherwise keep the process alive for a while.
    process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(0));
}

main().catch((e) => {
    process.stderr.write(`pi_oracle: ${e?.stack ?? e}\n`, () => process.exit(1));
});
