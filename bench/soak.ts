// Soak: a real `hearth serve --parallel P --max-queue Q` driven at twice its capacity (2×P closed-loop clients) for
// minutes, by several organizations, with a mix of streams, non-streams, aborts mid-stream, slow readers and bad
// requests. Checks the issue's targets: refusals fast (p99 < 50 ms), RSS flat after warm-up, every admitted
// request finishes, usage records equal the responses, busy sequences back to 0.
// `node --import tsx bench/soak.ts` prints the section; bench/run.ts embeds it (phase `soak`).
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { seededRandom } from "../test/support/fuzz-requests.js";
import { createKeyWithCli, hearthCli, type ServerProcess } from "../test/support/server-process.js";
import { readBenchOptions } from "./options.js";
import { startDefaultServer } from "./serve-default.js";
import { percentile } from "./stats.js";

export interface SoakOptions {
  seconds?: number;
  /** Sequences of the server; the load is 2× this many closed-loop clients. */
  parallel?: number;
  maxQueue?: number;
  maxTokens?: number;
  model?: string;
  seed?: number;
  /** llama.cpp threads of the server (0: every core). */
  threads?: number;
}

type Kind = "stream" | "non-stream" | "abort" | "slow-reader" | "bad-request";

/** Share of each kind in the mix (cumulative draw). */
const MIX: readonly [Kind, number][] = [
  ["stream", 0.35],
  ["non-stream", 0.25],
  ["abort", 0.15],
  ["slow-reader", 0.1],
  ["bad-request", 0.15],
];

/** Bodies the schema refuses: each must come back 400 without touching the engine. */
const BAD_BODIES: readonly ((model: string) => string)[] = [
  (model) => JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], temperature: 7 }),
  (model) => JSON.stringify({ model, messages: [] }),
  (model) => JSON.stringify({ model, messages: [{ role: "wizard", content: "hi" }] }),
  () => "{not json",
  (model) => JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 0 }),
];

interface Outcome {
  kind: Kind;
  org: string;
  status: number;
  ms: number;
  /** A 200 read to its end ([DONE], or the whole JSON body with a finish_reason). */
  completed: boolean;
  /** A 200 stream the client left on purpose. */
  aborted: boolean;
  /** What went wrong with a 200 that should have completed (error event, cut off, timeout). */
  failure?: string;
}

/** Orgs of the soak: two unlimited, one with a small requests-per-minute limit so 429s are part of the mix. */
const ORGS: readonly { name: string; rpm?: number }[] = [
  { name: "soak-a" },
  { name: "soak-b" },
  { name: "soak-c", rpm: 30 },
];

/** Longest any single request may take before it counts as hung. */
const REQUEST_TIMEOUT_MS = 120_000;

function chatBody(model: string, maxTokens: number, stream: boolean, prompt: string): string {
  return JSON.stringify({
    model,
    messages: [{ role: "user", content: prompt }],
    max_tokens: maxTokens,
    temperature: 0.7,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

/** Reads an SSE body to its end; true when [DONE] came and no error event did. */
function sseComplete(text: string): { done: boolean; error: string | undefined } {
  let done = false;
  let error: string | undefined;
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (data === "[DONE]") done = true;
    else if (data.includes('"error"')) error = data.slice(0, 200);
  }
  return { done, error };
}

/** Builds a request's outcome when it ends: its latency is measured from `started` to that moment. */
function outcomeOf(kind: Kind, org: string, started: number) {
  return (status: number, rest: Partial<Outcome> = {}): Outcome => ({
    kind,
    org,
    status,
    ms: performance.now() - started,
    completed: false,
    aborted: false,
    ...rest,
  });
}

async function fetchOutcome(
  url: string,
  key: string,
  kind: Kind,
  org: string,
  body: string,
  abortAfterChunks: number,
): Promise<Outcome> {
  const started = performance.now();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error("timeout")), REQUEST_TIMEOUT_MS);
  const outcome = outcomeOf(kind, org, started);
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body,
      signal: controller.signal,
    });
    if (response.status !== 200 || response.body === null) {
      await response.arrayBuffer();
      return outcome(response.status);
    }
    if (kind === "non-stream") {
      const json = (await response.json()) as { choices?: { finish_reason?: string | null }[] };
      const finished = json.choices?.every((c) => typeof c.finish_reason === "string") === true;
      return finished ? outcome(200, { completed: true }) : outcome(200, { failure: "no finish_reason" });
    }
    const decoder = new TextDecoder();
    let text = "";
    let chunks = 0;
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      chunks++;
      if (kind === "abort" && chunks >= abortAfterChunks) {
        // Leaving mid-stream: the connection closes, which the server must see as the client gone.
        controller.abort();
        await reader.cancel().catch(() => {});
        return outcome(200, { aborted: true });
      }
    }
    const { done, error } = sseComplete(text);
    if (error !== undefined) return outcome(200, { failure: `error event: ${error}` });
    // A stream meant to be aborted that ended first simply completed.
    return done
      ? outcome(200, { completed: true })
      : outcome(200, { failure: "stream ended without [DONE]" });
  } catch (err) {
    const timedOut =
      controller.signal.reason instanceof Error && controller.signal.reason.message === "timeout";
    return outcome(-1, { failure: timedOut ? "timeout" : `client error: ${String(err)}` });
  } finally {
    clearTimeout(timer);
  }
}

/** A raw HTTP client that reads the stream slowly: paused for `pauseMs` after every chunk it receives. */
function slowReader(url: string, key: string, org: string, body: string, pauseMs: number): Promise<Outcome> {
  const started = performance.now();
  const target = new URL(`${url}/v1/chat/completions`);
  return new Promise((resolve) => {
    const outcome = outcomeOf("slow-reader", org, started);
    const finish = (status: number, rest: Partial<Outcome> = {}) => resolve(outcome(status, rest));
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
          res.pause();
          setTimeout(() => res.resume(), pauseMs);
        });
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          if (status !== 200) return finish(status);
          const { done, error } = sseComplete(text);
          if (error !== undefined) return finish(200, { failure: `error event: ${error}` });
          return done
            ? finish(200, { completed: true })
            : finish(200, { failure: "stream ended without [DONE]" });
        });
        res.on("error", (err) => finish(200, { failure: `response error: ${String(err)}` }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err) => finish(-1, { failure: `client error: ${String(err)}` }));
    req.end(body);
  });
}

function rssKb(pid: number): number | undefined {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

interface Gauges {
  busy: number;
  queued: number;
}

async function gauges(url: string, model: string): Promise<Gauges> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (name: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(`model="${model}"`));
    return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(" ") + 1));
  };
  return { busy: read("hearth_busy_sequences"), queued: read("hearth_queue_depth") };
}

interface UsageJson {
  requests: number;
  aborted: number;
  errors: number;
}

async function orgUsage(server: ServerProcess, org: string): Promise<UsageJson> {
  const { stdout } = await hearthCli(server, ["usage", "--org", org, "--json"]);
  return JSON.parse(stdout) as UsageJson;
}

const mark = (ok: boolean) => (ok ? "PASS" : "MISS");
const ms = (values: readonly number[], p: number) =>
  values.length === 0 ? "–" : percentile(values, p).toFixed(1);

/** Runs the soak against a fresh server and returns a Markdown section body. */
export async function benchSoak(options: SoakOptions = {}): Promise<string> {
  const seconds = options.seconds ?? 600;
  const parallel = options.parallel ?? 4;
  const maxQueue = options.maxQueue ?? 2;
  const maxTokens = options.maxTokens ?? 16;
  const model = options.model ?? "smollm2-135m-instruct";
  const rng = seededRandom(options.seed ?? 7);
  const clients = 2 * parallel;
  const server = await startDefaultServer({ model, parallel, maxQueue, threads: options.threads ?? 0 });
  const pid = server.child.pid as number;
  try {
    const keys = new Map<string, string>();
    for (const org of ORGS) {
      const limits = org.rpm === undefined ? [] : ["--rpm", String(org.rpm)];
      await hearthCli(server, ["orgs", "create", org.name, "--models", model, ...limits]);
      keys.set(org.name, await createKeyWithCli(server, org.name));
    }

    const rss: { at: number; kb: number }[] = [];
    const started = performance.now();
    const sampler = setInterval(() => {
      const kb = rssKb(pid);
      if (kb !== undefined) rss.push({ at: (performance.now() - started) / 1000, kb });
    }, 1000);
    const outcomes: Outcome[] = [];
    const deadline = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: clients }, async (_, client) => {
        const org = (ORGS[client % ORGS.length] as { name: string }).name;
        const key = keys.get(org) as string;
        for (let round = 0; performance.now() < deadline; round++) {
          const roll = rng();
          let kind: Kind = "stream";
          let acc = 0;
          for (const [k, share] of MIX) {
            acc += share;
            if (roll < acc) {
              kind = k;
              break;
            }
          }
          const prompt = `Client ${client}, round ${round}: tell me a short story about the number ${round}.`;
          let outcome: Outcome;
          if (kind === "bad-request") {
            const bad = (BAD_BODIES[round % BAD_BODIES.length] as (m: string) => string)(model);
            outcome = await fetchOutcome(server.url, key, kind, org, bad, 0);
          } else if (kind === "slow-reader") {
            outcome = await slowReader(server.url, key, org, chatBody(model, maxTokens, true, prompt), 150);
          } else {
            const body = chatBody(model, maxTokens, kind !== "non-stream", prompt);
            outcome = await fetchOutcome(server.url, key, kind, org, body, 2 + Math.floor(rng() * 4));
          }
          outcomes.push(outcome);
          // A refused or rejected client backs off a moment, as real clients do, instead of spinning.
          if (outcome.status !== 200) await sleep(25);
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;

    // The end state: busy sequences and queue back to 0 (bounded wait: aborted generations stop at their next step).
    let end = await gauges(server.url, model);
    for (let i = 0; i < 100 && (end.busy !== 0 || end.queued !== 0); i++) {
      await sleep(100);
      end = await gauges(server.url, model);
    }
    clearInterval(sampler);

    // Usage: records of admitted requests (200s, aborted ones too) per org, once the meter has flushed.
    const usageRows: string[] = [];
    let usageOk = true;
    for (const { name } of ORGS) {
      const admitted = outcomes.filter((o) => o.org === name && o.status === 200);
      const clientAborted = admitted.filter((o) => o.aborted).length;
      let usage = await orgUsage(server, name);
      for (let i = 0; i < 40 && usage.requests < admitted.length; i++) {
        await sleep(250);
        usage = await orgUsage(server, name);
      }
      const ok = usage.requests === admitted.length && usage.errors === 0;
      usageOk &&= ok;
      const sent = outcomes.filter((o) => o.org === name);
      const statuses = [...new Set(sent.map((o) => o.status))].sort((a, b) => a - b);
      const answers = statuses.map((s) => `${s}: ${sent.filter((o) => o.status === s).length}`).join(", ");
      usageRows.push(
        `| ${name} | ${answers} | ${admitted.length} | ${clientAborted} | ${usage.requests} | ${usage.aborted} | ${usage.errors} | ${mark(ok)} |`,
      );
    }

    const refusals = outcomes.filter((o) => o.status === 503 || o.status === 429);
    const refusalMs = refusals.map((o) => o.ms);
    const byStatus = new Map<number, number>();
    for (const o of outcomes) byStatus.set(o.status, (byStatus.get(o.status) ?? 0) + 1);
    const byKind = MIX.map(([kind]) => {
      const of = outcomes.filter((o) => o.kind === kind);
      const statuses = [...new Set(of.map((o) => o.status))].sort((a, b) => a - b);
      const counts = statuses.map((s) => `${s}: ${of.filter((o) => o.status === s).length}`).join(", ");
      return `| ${kind} | ${of.length} | ${counts} |`;
    });
    const unfinished = outcomes.filter((o) => o.failure !== undefined);
    const admittedMs = outcomes.filter((o) => o.completed).map((o) => o.ms);

    // RSS: warm-up is the first fifth of the run (at least 5 s): the model, caches and pools reach their size.
    const warmupEnd = Math.max(5, seconds / 5);
    const warm = rss.find((s) => s.at >= warmupEnd) ?? rss.at(-1);
    const after = rss.filter((s) => s.at >= warmupEnd).map((s) => s.kb);
    const mb = (kb: number | undefined) => (kb === undefined ? "–" : (kb / 1024).toFixed(1));
    const maxAfter = after.length === 0 ? undefined : Math.max(...after);
    const minAfter = after.length === 0 ? undefined : Math.min(...after);
    const rssFlat =
      warm !== undefined &&
      maxAfter !== undefined &&
      minAfter !== undefined &&
      maxAfter <= warm.kb * 1.1 &&
      minAfter >= warm.kb * 0.9;
    const refusalP99 = percentile(refusalMs, 99);
    const refusalsOk = refusals.length > 0 && refusalP99 < 50;
    const errorLines = server
      .output()
      .split("\n")
      .filter((l: string) => /"level":(50|60)/.test(l));

    return [
      `${clients} closed-loop clients (2× capacity) for ${elapsed.toFixed(0)} s against \`hearth serve --parallel ${parallel} ` +
        `--max-queue ${maxQueue}\`, organizations ${ORGS.map((o) => (o.rpm === undefined ? o.name : `${o.name} (rpm ${o.rpm})`)).join(", ")}; ` +
        `max_tokens ${maxTokens}; a refused or rejected client waits 25 ms before its next request; slow readers pause 150 ms ` +
        "after every chunk; aborts leave after 2–5 chunks. Latency from send to the whole response, in ms.",
      "",
      "| request kind | sent | by status |",
      "| --- | ---: | --- |",
      ...byKind,
      "",
      `All statuses: ${[...byStatus]
        .sort(([a], [b]) => a - b)
        .map(([s, n]) => `${s === -1 ? "no response" : s}: ${n}`)
        .join(", ")}.`,
      "",
      "| target | measured | result |",
      "| --- | --- | --- |",
      `| excess requests refused (503/429) in < 50 ms p99 | ${refusals.length} refusals, p50 ${ms(refusalMs, 50)} / p99 ${ms(refusalMs, 99)} / max ${refusals.length === 0 ? "–" : Math.max(...refusalMs).toFixed(1)} ms (completed 200s: p50 ${ms(admittedMs, 50)} / p99 ${ms(admittedMs, 99)} ms) | ${mark(refusalsOk)} |`,
      `| RSS flat within 10 % after warm-up (${warmupEnd.toFixed(0)} s) | warm-up ${mb(warm?.kb)} MB, end ${mb(rss.at(-1)?.kb)} MB, max ${mb(maxAfter)} MB, min ${mb(minAfter)} MB after warm-up (${rss.length} samples) | ${mark(rssFlat)} |`,
      `| every admitted request finishes | ${unfinished.length} of ${outcomes.filter((o) => o.status === 200).length} 200s did not complete (aborts on purpose excluded)${unfinished.length === 0 ? "" : `; first: ${unfinished[0]?.kind} ${unfinished[0]?.failure}`} | ${mark(unfinished.length === 0)} |`,
      `| usage records equal the responses | see the table below | ${mark(usageOk)} |`,
      `| \`/metrics\` busy sequences back to 0 at the end | busy ${end.busy}, queued ${end.queued} | ${mark(end.busy === 0 && end.queued === 0)} |`,
      "",
      "| org | answers by status | client 200s | of them aborted | usage requests | usage aborted | usage errors | equal |",
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
      ...usageRows,
      "",
      "A stream the client aborts may still be recorded `completed` when its generation ended before the server saw the " +
        "client leave; what must match is one record per admitted request.",
      `Server log lines at error level or above: ${errorLines.length}${errorLines.length === 0 ? "" : ` (first: \`${errorLines[0]?.slice(0, 300)}\`)`}.`,
    ].join("\n");
  } finally {
    await server.stop();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = readBenchOptions();
  benchSoak({ seconds: options.soakSeconds, threads: options.serverThreads }).then(
    (section) => process.stdout.write(`${section}\n`),
    (err: unknown) => {
      process.stderr.write(`soak benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
