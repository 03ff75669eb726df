// The gateway's own cost, measured alone: a Hearth gateway, a pass-through byte proxy (the floor: a hop with no
// logic) and LiteLLM's proxy, each in front of the same synthetic upstream (bench/synthetic-upstream.ts: tokens as
// fast as they are read), driven by the same client, interleaved. The cost is the relaying process's CPU time
// (user + sys, its whole process tree), which other load on the machine does not inflate the way it does wall time.
// `node --import tsx bench/gateway.ts` prints the section; bench/run.ts embeds it (phase `gateway`).
//
//   BENCH_GATEWAY_STREAMS   concurrent streams per level (default 1,64,512)
//   BENCH_GATEWAY_PACED     concurrent paced streams per level (default 64,256): one token per stream every 10 ms,
//                           as a GPU engine's decode steps deliver them, so every token is a read and a write of its own
//   BENCH_GATEWAY_TOKENS    tokens per stream (default 256)
//   BENCH_GATEWAY_ROUNDS    interleaved rounds per level and target (default 2; the median is shown)
//   BENCH_GATEWAY_RATES     fixed request rates of short non-streamed requests (default 50,100,…,3200)
//   BENCH_GATEWAY_BEFORE    another checkout's bin/hearth.js (built): its gateway runs beside, as "before"
//   BENCH_GATEWAY_TARGETS   which to run (default hearth,hearth-pg,floor,litellm; hearth-pg needs PostgreSQL on
//                           127.0.0.1:5432, litellm needs scripts/setup-litellm-proxy.sh)
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { Agent, request } from "undici";
import { type ServerProcess, startServerProcess } from "../test/support/server-process.js";
import { type Backend, postgresBackend } from "../test/support/store-backends.js";
import { processTreeCpuMs } from "./cpu-noise.js";
import { median, percentile } from "./stats.js";
import { PACE_MS, PACED_MODEL, SYNTHETIC_MODEL } from "./synthetic-upstream.js";

export interface GatewayBenchOptions {
  streams?: number[];
  paced?: number[];
  tokens?: number;
  rounds?: number;
  rates?: number[];
  /** Seconds at each fixed rate. */
  rateSeconds?: number;
  targets?: TargetName[];
}

type TargetName = "hearth" | "hearth-pg" | "floor" | "litellm";

interface Target {
  name: string;
  /** Base URL ending in /v1. */
  url: string;
  apiKey: string;
  model: string;
  /** The relaying process (its tree's CPU is the cost); undefined for the upstream itself. */
  pid: number | undefined;
  stop(): Promise<void>;
}

const log = (line: string) => process.stderr.write(`${line}\n`);
const here = import.meta.dirname;
const ROOT = join(here, "..");

/** A child that prints its URL as its first stdout line. */
async function startPrinting(command: string, args: string[], env: NodeJS.ProcessEnv = process.env) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"], env });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const line = out.split("\n")[0];
      if (out.includes("\n") && line !== undefined) resolve(line.trim());
    });
    child.once("exit", (code) => reject(new Error(`${command} exited with ${code}`)));
  });
  return { child, url };
}

function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

async function startUpstream(): Promise<{ child: ChildProcess; url: string }> {
  return startPrinting(process.execPath, [...process.execArgv, join(here, "synthetic-upstream.ts")]);
}

async function startFloor(upstream: string): Promise<Target> {
  // The proxy forwards each POST to <its argument><path>: the upstream's root, as the client's path has /v1.
  const { child, url } = await startPrinting(process.execPath, [
    ...process.execArgv,
    join(here, "pass-through-proxy.ts"),
    upstream.replace(/\/v1$/, ""),
  ]);
  return {
    name: "pass-through proxy (floor)",
    url: `${url}/v1`,
    apiKey: "none",
    model: SYNTHETIC_MODEL,
    pid: child.pid,
    stop: () => killed(child),
  };
}

/** A Hearth gateway on the embedded store (as `npm start` runs), or on PostgreSQL (as a fleet's replicas run). */
async function startHearth(upstream: string, dir: string, postgres: boolean, bin?: string): Promise<Target> {
  const config = join(dir, "hearth.yaml");
  writeFileSync(
    config,
    [
      "models:",
      ...[SYNTHETIC_MODEL, PACED_MODEL].flatMap((model) => [
        `  - id: ${model}`,
        "    upstream:",
        `      model: ${model}`,
        "      kind: vllm",
        "      endpoints:",
        `        - url: ${upstream}`,
        "      maxInFlight: 4096",
        "      maxQueue: 4096",
      ]),
      "",
    ].join("\n"),
  );
  const database: Backend | undefined = postgres ? await postgresBackend() : undefined;
  const server: ServerProcess = await startServerProcess({
    args: ["--config", config],
    ...(bin === undefined ? {} : { bin }),
    ...(database === undefined ? {} : { env: { HEARTH_DATABASE_URL: database.options.databaseUrl ?? "" } }),
  });
  return {
    name: `Hearth gateway${bin === undefined ? "" : " before"}${postgres ? " (PostgreSQL)" : ""}`,
    url: `${server.url}/v1`,
    apiKey: server.apiKey,
    model: SYNTHETIC_MODEL,
    pid: server.child.pid,
    stop: async () => {
      await server.stop();
      await database?.cleanup();
    },
  };
}

/** The LiteLLM proxy's virtualenv from scripts/setup-litellm-proxy.sh, or undefined when it was not set up. */
function litellmVenv(): string | undefined {
  try {
    const out = execFileSync(join(ROOT, "scripts", "setup-litellm-proxy.sh"), ["--check"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    return out.toString().trim().split("\n").at(-1);
  } catch {
    return undefined;
  }
}

async function startLitellm(upstream: string, dir: string, cache: string): Promise<Target> {
  const config = join(dir, "litellm.yaml");
  const masterKey = "sk-bench-litellm";
  writeFileSync(
    config,
    [
      "model_list:",
      ...[SYNTHETIC_MODEL, PACED_MODEL].flatMap((model) => [
        `  - model_name: ${model}`,
        "    litellm_params:",
        `      model: openai/${model}`,
        `      api_base: ${upstream}`,
        "      api_key: none",
      ]),
      "general_settings:",
      `  master_key: ${masterKey}`,
      "litellm_settings:",
      "  telemetry: false",
      "",
    ].join("\n"),
  );
  const port = await freePort();
  const child = spawn(
    join(cache, "venv", "bin", "litellm"),
    ["--config", config, "--host", "127.0.0.1", "--port", String(port), "--num_workers", "1"],
    {
      stdio: ["ignore", "ignore", "pipe"],
      // Its cost map from the package, never fetched; no telemetry.
      env: { ...process.env, LITELLM_LOCAL_MODEL_COST_MAP: "True", LITELLM_LOG: "ERROR" },
    },
  );
  let err = "";
  child.stderr?.on("data", (d: Buffer) => {
    err = (err + d.toString()).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`litellm exited with ${child.exitCode}:\n${err}`);
    const ok = await fetch(`${url}/health/liveliness`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`litellm did not start:\n${err}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return {
    name: "LiteLLM proxy",
    url: `${url}/v1`,
    apiKey: masterKey,
    model: SYNTHETIC_MODEL,
    pid: child.pid,
    stop: () => killed(child),
  };
}

async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The client: one keep-alive agent, no connection limit (every stream has its own connection). */
const agent = new Agent({ connections: null, pipelining: 1, keepAliveTimeout: 30_000 });

interface Sent {
  ms: number;
  tokens: number;
  ok: boolean;
}

/** A content delta of one of the synthetic tokens (each starts with a space; the role chunk's content is empty). */
const TOKEN_MARK = /"content": ?" [a-z]/g;

async function send(target: Target, stream: boolean, tokens: number, model = target.model): Promise<Sent> {
  const started = performance.now();
  const body = {
    model,
    messages: [{ role: "user", content: "Say something." }],
    max_tokens: tokens,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  };
  try {
    const response = await request(`${target.url}/chat/completions`, {
      method: "POST",
      dispatcher: agent,
      headers: { authorization: `Bearer ${target.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.body.text();
    const received = stream
      ? (text.match(TOKEN_MARK)?.length ?? 0)
      : response.statusCode === 200
        ? tokens
        : 0;
    return { ms: performance.now() - started, tokens: received, ok: response.statusCode === 200 };
  } catch {
    return { ms: performance.now() - started, tokens: 0, ok: false };
  }
}

interface StreamRound {
  cpuMs: number;
  tokens: number;
  failed: number;
  seconds: number;
}

/** `concurrency` clients each streaming `perClient` requests of `tokens` tokens back to back. */
async function streamRound(
  target: Target,
  concurrency: number,
  tokens: number,
  requests: number,
  model: string,
) {
  const cpuBefore = target.pid === undefined ? 0 : processTreeCpuMs(target.pid);
  const started = performance.now();
  let next = 0;
  let received = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests) {
        next++;
        const sent = await send(target, true, tokens, model);
        received += sent.tokens;
        if (!sent.ok || sent.tokens !== tokens) failed++;
      }
    }),
  );
  const cpuMs = target.pid === undefined ? 0 : processTreeCpuMs(target.pid) - cpuBefore;
  return {
    cpuMs,
    tokens: received,
    failed,
    seconds: (performance.now() - started) / 1000,
  } satisfies StreamRound;
}

/** Short non-streamed requests, `concurrency` at a time: CPU per request. */
async function shortRound(target: Target, concurrency: number, requests: number) {
  const cpuBefore = target.pid === undefined ? 0 : processTreeCpuMs(target.pid);
  let next = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests) {
        next++;
        if (!(await send(target, false, 8)).ok) failed++;
      }
    }),
  );
  const cpuMs = target.pid === undefined ? 0 : processTreeCpuMs(target.pid) - cpuBefore;
  return { cpuUs: (1000 * cpuMs) / requests, failed };
}

interface RateRun {
  p50: number;
  p99: number;
  /** Requests answered 200 ÷ requests sent. */
  okShare: number;
  /** Answers per second over the run (it lags the offered rate when the target cannot keep up). */
  achieved: number;
}

/** Open loop: `rate` short requests a second for `seconds`, whatever the answers' pace. */
async function rateRun(target: Target, rate: number, seconds: number): Promise<RateRun> {
  const total = Math.round(rate * seconds);
  const started = performance.now();
  const pending: Promise<Sent>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + (1000 * i) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    pending.push(send(target, false, 8));
  }
  const results = await Promise.all(pending);
  const elapsed = (performance.now() - started) / 1000;
  const ms = results.filter((r) => r.ok).map((r) => r.ms);
  return {
    p50: median(ms),
    p99: percentile(ms, 99),
    okShare: ms.length / total,
    achieved: ms.length / elapsed,
  };
}

function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : "—");

export async function benchGateway(options: GatewayBenchOptions = {}): Promise<string> {
  const streams = options.streams ?? [1, 64, 512];
  const paced = options.paced ?? [64, 256];
  const tokens = options.tokens ?? 256;
  const rounds = options.rounds ?? 2;
  const rates = options.rates ?? [50, 100, 200, 400, 800, 1600, 3200];
  const rateSeconds = options.rateSeconds ?? 5;
  const names = options.targets ?? ["hearth", "hearth-pg", "floor", "litellm"];
  const dir = mkdtempSync(join(tmpdir(), "hearth-gateway-bench-"));
  const upstream = await startUpstream();
  const direct: Target = {
    name: "upstream directly",
    url: upstream.url,
    apiKey: "none",
    model: SYNTHETIC_MODEL,
    pid: undefined,
    stop: async () => undefined,
  };
  const targets: Target[] = [];
  const notes: string[] = [];
  try {
    if (names.includes("hearth")) targets.push(await startHearth(upstream.url, dir, false));
    if (names.includes("hearth-pg")) targets.push(await startHearth(upstream.url, dir, true));
    const before = process.env.BENCH_GATEWAY_BEFORE;
    if (before !== undefined && before !== "") {
      targets.push(await startHearth(upstream.url, dir, true, before));
      notes.push(`"before" is the gateway of ${before}, on PostgreSQL like the row above it.`);
    }
    if (names.includes("floor")) targets.push(await startFloor(upstream.url));
    if (names.includes("litellm")) {
      const venv = litellmVenv();
      if (venv === undefined) notes.push("LiteLLM left out: run scripts/setup-litellm-proxy.sh first.");
      else targets.push(await startLitellm(upstream.url, dir, venv));
    }
    // Warm every path (connections, JIT, LiteLLM's first-request set-up) before anything is measured, as a
    // long-running server is: with 200 mixed requests only, every target's first round of short requests cost
    // nearly twice its later rounds (its request path still being compiled).
    for (const target of [direct, ...targets]) {
      for (let i = 0; i < 200; i++) await send(target, true, 32);
      await shortRound(target, 16, 1000);
    }

    const lines: string[] = [
      `Synthetic upstream; ${tokens} tokens per stream (paced: one every ${PACE_MS} ms per stream); ${rounds} interleaved rounds per level and target (median ` +
        "shown). CPU is the relaying process tree's user + sys time ÷ tokens (or requests) it relayed.",
      "",
      "| target | streams | µs CPU / token | rounds (µs) | tokens/s through | failed streams |",
      "| --- | ---: | ---: | --- | ---: | ---: |",
    ];
    const perToken = new Map<string, number[]>();
    const levels = [
      ...streams.map((concurrency) => ({ concurrency, model: SYNTHETIC_MODEL, label: `${concurrency}` })),
      ...paced.map((concurrency) => ({ concurrency, model: PACED_MODEL, label: `${concurrency} paced` })),
    ];
    for (const { concurrency, model, label } of levels) {
      // Paced streams take 2.56 s each whatever the target: one apiece. As fast as read: enough to amortise start-up.
      const requests = model === PACED_MODEL ? concurrency : Math.max(concurrency, 64);
      const results = new Map<Target, StreamRound[]>();
      for (let round = 0; round < rounds; round++) {
        for (const target of rotate(targets, round)) {
          log(`gateway: ${target.name}, ${label} streams, round ${round + 1}`);
          const run = await streamRound(target, concurrency, tokens, requests, model);
          results.set(target, [...(results.get(target) ?? []), run]);
        }
      }
      for (const target of targets) {
        const runs = results.get(target) ?? [];
        const us = runs.map((r) => (1000 * r.cpuMs) / Math.max(1, r.tokens));
        perToken.set(`${target.name}@${label}`, us);
        const rate = median(runs.map((r) => r.tokens / r.seconds));
        const failed = runs.reduce((sum, r) => sum + r.failed, 0);
        lines.push(
          `| ${target.name} | ${label} | ${fmt(median(us), 1)} | ${us.map((u) => fmt(u, 1)).join(", ")} | ${fmt(rate)} | ${failed} |`,
        );
      }
    }

    lines.push(
      "",
      "Short non-streamed requests (8 tokens), 16 at a time, 2,000 per round:",
      "",
      "| target | µs CPU / request | rounds (µs) | failed |",
      "| --- | ---: | --- | ---: |",
    );
    const perRequest = new Map<Target, number[]>();
    let failedShort = new Map<Target, number>();
    for (let round = 0; round < rounds; round++) {
      for (const target of rotate(targets, round)) {
        log(`gateway: ${target.name}, short requests, round ${round + 1}`);
        const run = await shortRound(target, 16, 2000);
        perRequest.set(target, [...(perRequest.get(target) ?? []), run.cpuUs]);
        failedShort = failedShort.set(target, (failedShort.get(target) ?? 0) + run.failed);
      }
    }
    for (const target of targets) {
      const us = perRequest.get(target) ?? [];
      lines.push(
        `| ${target.name} | ${fmt(median(us))} | ${us.map((u) => fmt(u)).join(", ")} | ${failedShort.get(target) ?? 0} |`,
      );
    }

    lines.push(
      "",
      `Added latency at a fixed rate of short requests (open loop, ${rateSeconds} s per rate; added = the target's ` +
        "percentile − the upstream's own at the same rate, measured just before it):",
      "",
      "| requests/s | upstream p50 / p99 ms | " +
        targets.map((t) => `${t.name}: added p50 / p99 ms, answered`).join(" | ") +
        " |",
      `| ---: | ---: | ${targets.map(() => "---:").join(" | ")} |`,
    );
    const sustained = new Map<Target, number>();
    const out = new Set<Target>();
    for (const rate of rates) {
      if (out.size === targets.length) break;
      const base = await rateRun(direct, rate, rateSeconds);
      const cells: string[] = [];
      for (const target of targets) {
        if (out.has(target)) {
          cells.push("(stopped)");
          continue;
        }
        log(`gateway: ${target.name}, ${rate} requests/s`);
        const run = await rateRun(target, rate, rateSeconds);
        const addedP50 = run.p50 - base.p50;
        const addedP99 = run.p99 - base.p99;
        cells.push(`${fmt(addedP50, 1)} / ${fmt(addedP99, 1)}, ${fmt(100 * run.okShare)} %`);
        // Sustained: every request answered, the pace kept, p99 added under 50 ms.
        if (addedP99 < 50 && run.okShare === 1 && run.achieved >= 0.95 * rate) sustained.set(target, rate);
        else out.add(target);
      }
      lines.push(`| ${rate} | ${fmt(base.p50, 1)} / ${fmt(base.p99, 1)} | ${cells.join(" | ")} |`);
    }
    lines.push(
      "",
      "Highest rate sustained (every request answered, pace kept, p99 added < 50 ms): " +
        targets.map((t) => `${t.name} ${sustained.get(t) ?? "none"}/s`).join(", ") +
        (out.size === 0 ? " (every rate tried was sustained)" : ""),
    );

    const ratios: string[] = [];
    const hearth = targets.find((t) => t.name === "Hearth gateway");
    const litellm = targets.find((t) => t.name === "LiteLLM proxy");
    if (hearth !== undefined && litellm !== undefined) {
      for (const { label } of levels) {
        const h = median(perToken.get(`${hearth.name}@${label}`) ?? []);
        const l = median(perToken.get(`${litellm.name}@${label}`) ?? []);
        ratios.push(`${label} streams ${fmt(l / h, 1)}×`);
      }
      lines.push("", `LiteLLM's CPU per token ÷ Hearth's: ${ratios.join(", ")}.`);
    }
    if (notes.length > 0) lines.push("", ...notes);
    return lines.join("\n");
  } finally {
    for (const target of targets) await target.stop();
    await killed(upstream.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

function list(name: string): number[] | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  return raw.split(",").map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must list positive integers, got "${s}"`);
    return n;
  });
}

/** The phase's options from BENCH_GATEWAY_* (see the top of this file). */
export function gatewayOptionsFromEnv(): GatewayBenchOptions {
  const targets = process.env.BENCH_GATEWAY_TARGETS?.split(",").map((s) => s.trim()) as
    | TargetName[]
    | undefined;
  const streams = list("BENCH_GATEWAY_STREAMS");
  const paced = process.env.BENCH_GATEWAY_PACED === "0" ? [] : list("BENCH_GATEWAY_PACED");
  const tokens = list("BENCH_GATEWAY_TOKENS")?.[0];
  const rounds = list("BENCH_GATEWAY_ROUNDS")?.[0];
  const rates = list("BENCH_GATEWAY_RATES");
  return {
    ...(streams === undefined ? {} : { streams }),
    ...(paced === undefined ? {} : { paced }),
    ...(tokens === undefined ? {} : { tokens }),
    ...(rounds === undefined ? {} : { rounds }),
    ...(rates === undefined ? {} : { rates }),
    ...(targets === undefined ? {} : { targets }),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  benchGateway(gatewayOptionsFromEnv())
    .then((text) => {
      process.stdout.write(`${text}\n`);
      process.exit(0);
    })
    .catch((err: unknown) => {
      log(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exit(1);
    });
}
