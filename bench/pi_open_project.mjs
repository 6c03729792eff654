#!/usr/bin/env node
// Times Pi 1.3.0 opening a session file and projecting its context, for bench_open_project.py.
//
// Only *calls* the published @earendil-works/pi-coding-agent@1.3.0 modules (loaded by file URL:
// the package root import needs Node >= 22). Module loading happens before the clock starts;
// the timed work is SessionManager.open + buildSessionProjection + estimateProjectedContextTokens.
//
// usage: node bench/pi_open_project.mjs FILE   (env PI_ORACLE_DIR = dir holding node_modules/)
// prints one JSON object: {ms, messages, tokens, entries}

import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";

const file = process.argv[2];
if (!file) {
    console.error("usage: node pi_open_project.mjs FILE");
    process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const fallback = existsSync("/tmp/pi13") ? "/tmp/pi13" : join(here, "..", ".pi-oracle");
const oracleDir = resolve(process.env.PI_ORACLE_DIR || fallback);
const core = pathToFileURL(join(oracleDir, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "core") + "/");
const { SessionManager } = await import(new URL("session-manager.js", core));
const { estimateProjectedContextTokens } = await import(new URL("compaction/compaction.js", core));

const t0 = performance.now();
const sm = SessionManager.open(file);
const projection = sm.buildSessionProjection();
const estimate = estimateProjectedContextTokens(projection, sm.getBranch());
const t1 = performance.now();

console.log(
    JSON.stringify({
        ms: t1 - t0,
        messages: projection.messages.length,
        tokens: estimate.tokens,
        lastUsageIndex: estimate.lastUsageIndex,
        entries: sm.getEntryCount(),
    }),
);
