// Latency of refusals under overload: a real `hearth serve --parallel 2 --max-queue 2` driven past its capacity by
// closed-loop clients; how fast 503 engine_overloaded comes back (p50/p95/max) next to the accepted requests.
// `node --import tsx bench/overload.ts` prints the table; bench/run.ts embeds it (phase `overload`).
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { startServerProcess } from "../test/support/server-process.js";
import { percentile } from "./stats.js";

export interface OverloadOptions {
  /** Closed-loop clients, each sending its next request as soon as the last one is answered. */
  clients?: number;
  seconds?: number;
  /** Completion budget of every request (small: the point is the queue, not generation). */
  maxTokens?: number;
  model?: string;
}

interface Sample {
  status: number;
  ms: number;
}

const COMPILED_CLI = join(import.meta.dirname, "..", "dist", "cli", "index.js");
const PARALLEL = 2;
const MAX_QUEUE = 2;

/** One non-streamed request with plain fetch (no SDK retries or parsing in the measurement). */
async function send(url: string, apiKey: string, body: string): Promise<Sample> {
  const started = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body,
  });
  await response.arrayBuffer();
  return { status: response.status, ms: performance.now() - started };
}

function row(label: string, samples: readonly Sample[]): string {
  const ms = samples.map((s) => s.ms);
  const f = (p: number) => (samples.length === 0 ? "–" : percentile(ms, p).toFixed(1));
  const max = samples.length === 0 ? "–" : Math.max(...ms).toFixed(1);
  return `| ${label} | ${samples.length} | ${f(50)} | ${f(95)} | ${max} |`;
}

/** Runs the overload workload against a fresh server and returns a Markdown section body. */
export async function benchOverload(options: OverloadOptions = {}): Promise<string> {
  const clients = options.clients ?? 16;
  const seconds = options.seconds ?? 15;
  const maxTokens = options.maxTokens ?? 16;
  const model = options.model ?? "smollm2-135m-instruct";
  // bin/hearth.js runs the compiled CLI: the benchmark measures what `npm run build` last produced.
  if (!existsSync(COMPILED_CLI)) throw new Error("dist/ is missing: run `npm run build` first.");
  const server = await startServerProcess({
    args: ["--parallel", String(PARALLEL), "--max-queue", String(MAX_QUEUE)],
  });
  const interrupted = () => {
    server.child.kill("SIGTERM");
    rmSync(server.dataDir, { recursive: true, force: true });
    process.exit(130);
  };
  process.once("SIGINT", interrupted);
  try {
    const samples: Sample[] = [];
    const deadline = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: clients }, async (_, client) => {
        for (let i = 0; performance.now() < deadline; i++) {
          const body = JSON.stringify({
            model,
            messages: [{ role: "user", content: `Client ${client}, request ${i}: say something short.` }],
            max_tokens: maxTokens,
            temperature: 0,
          });
          samples.push(await send(server.url, server.apiKey, body));
        }
      }),
    );
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const counted = /^hearth_overloaded_total (\S+)/m.exec(metrics)?.[1] ?? "absent";
    const refused = samples.filter((s) => s.status === 503);
    const accepted = samples.filter((s) => s.status === 200);
    const other = samples.filter((s) => s.status !== 200 && s.status !== 503);
    const lines = [
      `${clients} closed-loop clients for ${seconds} s against \`hearth serve --parallel ${PARALLEL} --max-queue ${MAX_QUEUE}\` ` +
        `(one organization, so one queue place), non-streamed, max_tokens ${maxTokens}; latency from send to the ` +
        "whole response, in ms.",
      "",
      "| response | count | p50 | p95 | max |",
      "| --- | ---: | ---: | ---: | ---: |",
      row("503 engine_overloaded", refused),
      row("200", accepted),
      "",
      `Other statuses: ${other.length === 0 ? "none" : other.map((s) => s.status).join(", ")}. ` +
        `The server's hearth_overloaded_total: ${counted} (client saw ${refused.length}).`,
    ];
    return lines.join("\n");
  } finally {
    process.off("SIGINT", interrupted);
    await server.stop();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchOverload().then(
    (table) => process.stdout.write(`${table}\n`),
    (err: unknown) => {
      process.stderr.write(`overload benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
