// The fleet: a Hearth gateway in front of two `hearth serve` workers on this machine. What the gateway adds per
// request (vs calling a worker directly), its aggregate throughput vs the two workers driven directly, and the
// prefix-cache hit rate and TTFT with cache-aware routing on and off (bench/fleet-affinity.ts).
// `node --import tsx bench/fleet.ts` prints the section (`--quick`: a short smoke run); bench/run.ts embeds it
// (phase `fleet`).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { defaultModels } from "../src/config/schema.js";
import { type ServerProcess, startServerProcess } from "../test/support/server-process.js";
import { type Backend, postgresBackend } from "../test/support/store-backends.js";
import { processCpuMs } from "./cpu-noise.js";
import { type AffinityBenchOptions, affinityComparison } from "./fleet-affinity.js";
import { httpTarget } from "./http-target.js";
import { type CoreSplit, coreSplit, pin } from "./pin.js";
import { median, percentile } from "./stats.js";
import { runLevel } from "./workload.js";

export interface FleetBenchOptions {
  /** Sequences per worker. */
  parallel?: number;
  /** Seconds of each throughput run. */
  seconds?: number;
  /** Sequential requests per side for the added-latency measurement. */
  latencyRequests?: number;
  /** Requests sent through every path (each worker, proxy and gateway) before the latency is measured. */
  warmUpRequests?: number;
  /** The cache-aware routing comparison (fleet-affinity.ts). */
  affinity?: Partial<AffinityBenchOptions>;
  model?: string;
}

const COMPILED_CLI = join(import.meta.dirname, "..", "dist", "cli", "index.js");
const FLEET_MODEL = "fleet-bench";

interface Fleet {
  workers: ServerProcess[];
  /** bench/pass-through-proxy.ts in front of each worker: the added latency of a hop with no logic. */
  proxyUrls: string[];
  /** On the embedded store (PGlite), as `npm start` runs. */
  gateway: ServerProcess;
  /** The same gateway on PostgreSQL, as a fleet's replicas run (docs/fleet.md); absent without a server. */
  gatewayOnPostgres: ServerProcess | undefined;
  /** A gateway like `gateway` with `upstream.affinity: false`: every request to the least busy worker. */
  gatewayWithoutAffinity: ServerProcess;
  /** How the processes are pinned (undefined: not pinned, all share every core). */
  split: CoreSplit | undefined;
  stop(): Promise<void>;
}

async function startFleet(parallel: number, model: string): Promise<Fleet> {
  const dir = mkdtempSync(join(tmpdir(), "hearth-fleet-bench-"));
  // One thread per worker: two workers with a thread per core each would fight over the cores of this machine
  // (llama.cpp's threads wait for each other at every step), which measures oversubscription, not the gateway.
  const embedded = defaultModels.find((m) => m.id === model);
  if (embedded === undefined) throw new Error(`the fleet bench serves the default model, not ${model}`);
  const workerConfig = join(dir, "worker.yaml");
  // JSON is YAML.
  writeFileSync(
    workerConfig,
    JSON.stringify({ models: [{ ...embedded, threads: 1, parallel, maxQueue: 256 }] }),
  );
  const workers: ServerProcess[] = [];
  for (let i = 0; i < 2; i++) workers.push(await startServerProcess({ args: ["--config", workerConfig] }));
  const gatewayConfig = (name: string, affinity: boolean) => {
    const path = join(dir, name);
    writeFileSync(
      path,
      [
        "models:",
        `  - id: ${FLEET_MODEL}`,
        "    upstream:",
        `      model: ${model}`,
        "      endpoints:",
        ...workers.flatMap((w, i) => [`        - url: ${w.url}/v1`, `          apiKeyEnv: WORKER${i}_KEY`]),
        `      maxInFlight: ${parallel}`,
        "      maxQueue: 256",
        "      queueTimeoutMs: 120000",
        "      firstTokenTimeoutMs: 120000",
        `      affinity: ${affinity}`,
        "",
      ].join("\n"),
    );
    return path;
  };
  const config = gatewayConfig("hearth.yaml", true);
  const proxies = workers.map((worker) =>
    spawn(
      process.execPath,
      [...process.execArgv, join(import.meta.dirname, "pass-through-proxy.ts"), worker.url],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    ),
  );
  const proxyUrls = await Promise.all(
    proxies.map(
      (proxy) =>
        new Promise<string>((resolve, reject) => {
          proxy.stdout?.once("data", (data: Buffer) => resolve(data.toString().trim()));
          proxy.once("exit", (code) => reject(new Error(`the pass-through proxy exited (${code})`)));
        }),
    ),
  );
  const env = Object.fromEntries(workers.map((w, i) => [`WORKER${i}_KEY`, w.apiKey]));
  const gateway = await startServerProcess({ env, args: ["--config", config] });
  const gatewayWithoutAffinity = await startServerProcess({
    env,
    args: ["--config", gatewayConfig("hearth-no-affinity.yaml", false)],
  });
  const database: Backend | undefined = await postgresBackend().catch(() => undefined);
  const gatewayOnPostgres =
    database === undefined
      ? undefined
      : await startServerProcess({
          env: { ...env, HEARTH_DATABASE_URL: database.options.databaseUrl ?? "" },
          args: ["--config", config],
        });
  // The gateways on a core of their own; the workers, the proxies and this process (the client) on the others.
  const split = coreSplit();
  if (split !== undefined) {
    for (const worker of workers) pin(worker.child.pid, split.workers);
    for (const proxy of proxies) pin(proxy.pid, split.workers);
    pin(process.pid, split.workers);
    for (const g of [gateway, gatewayWithoutAffinity, gatewayOnPostgres]) {
      if (g !== undefined) pin(g.child.pid, split.gateway);
    }
  }
  return {
    workers,
    proxyUrls,
    gateway,
    gatewayOnPostgres,
    gatewayWithoutAffinity,
    split,
    async stop() {
      for (const proxy of proxies) proxy.kill();
      await gateway.stop();
      await gatewayWithoutAffinity.stop();
      await gatewayOnPostgres?.stop();
      await database?.cleanup();
      await Promise.all(workers.map((w) => w.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One whole one-token request (streamed: read to [DONE]), in ms. */
async function timed(url: string, apiKey: string, model: string, stream: boolean): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 1,
      temperature: 0,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  return performance.now() - started;
}

/**
 * `count` one-token requests, streamed and not, four at a time, down each path the latency is measured on: every
 * process then runs its request path as a long-running server does, compiled by V8's optimising tier, instead of
 * the first two hundred requests after its start. The workers and proxies are warmed alike, so the floor and the
 * baseline stay fair. On 2026-11-26 (Intel Xeon) one gateway over one worker added about 1 ms less at p50 after
 * 3,000 requests than in its first 200 (separate runs); in this bench, with 500 or none, the gateway's rows moved
 * less than the run-to-run noise (streamed 7.0 → 6.7 ms, non-streamed 5.6 → 5.0).
 */
async function warmUp(fleet: Fleet, gateways: ServerProcess[], model: string, count: number): Promise<void> {
  const paths = [
    ...fleet.workers.map((w) => ({ url: w.url, apiKey: w.apiKey, model })),
    ...fleet.workers.map((w, i) => ({ url: fleet.proxyUrls[i] as string, apiKey: w.apiKey, model })),
    ...gateways.map((g) => ({ url: g.url, apiKey: g.apiKey, model: FLEET_MODEL })),
  ];
  for (const path of paths) {
    let sent = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (sent < count) {
          sent++;
          await timed(path.url, path.apiKey, path.model, sent % 2 === 0);
        }
      }),
    );
  }
}

/**
 * One-token requests, alternating direct and through each gateway (embedded store, PostgreSQL), streamed and not:
 * the gateway's own cost. The target is read on the embedded store, the default.
 */
async function addedLatency(
  fleet: Fleet,
  model: string,
  count: number,
  warmUpCount: number,
): Promise<string[]> {
  const f = (values: number[], p: number) => percentile(values, p).toFixed(1);
  const gateways: [string, ServerProcess][] = [["embedded store", fleet.gateway]];
  if (fleet.gatewayOnPostgres !== undefined) gateways.push(["PostgreSQL", fleet.gatewayOnPostgres]);
  await warmUp(
    fleet,
    gateways.map(([, gateway]) => gateway),
    model,
    warmUpCount,
  );
  // Each gateway's requests go to one worker (affinity: its organization and the conversation). It is compared
  // with that worker called directly: a worker the direct calls keep busy and one idle but for the gateway are
  // not the same machine state (llama.cpp's threads sleep when idle), which is not the gateway's cost.
  const routedTo: number[] = [];
  for (const [, gateway] of gateways) routedTo.push(await routedWorker(fleet, gateway));
  const rows: string[] = [];
  const added50: number[] = [];
  const cpuBefore = gateways.map(([, gateway]) => processCpuMs(gateway.child.pid ?? 0));
  for (const stream of [true, false]) {
    const direct = fleet.workers.map((): number[] => []);
    const proxied = fleet.workers.map((): number[] => []);
    const via = gateways.map((): number[] => []);
    for (let i = 0; i < count; i++) {
      for (const [w, worker] of fleet.workers.entries()) {
        direct[w]?.push(await timed(worker.url, worker.apiKey, model, stream));
      }
      for (const [w, worker] of fleet.workers.entries()) {
        proxied[w]?.push(await timed(fleet.proxyUrls[w] as string, worker.apiKey, model, stream));
      }
      for (const [g, [, gateway]] of gateways.entries()) {
        via[g]?.push(await timed(gateway.url, gateway.apiKey, FLEET_MODEL, stream));
      }
    }
    const kind = stream ? "streamed" : "non-streamed";
    const row = (what: string, base: number[], through: number[]) => {
      const added = (p: number) => percentile(through, p) - percentile(base, p);
      rows.push(
        `| ${kind} | ${what} | ${f(base, 50)} / ${f(base, 99)} | ${f(through, 50)} / ${f(through, 99)} | ${added(50).toFixed(1)} / ${added(99).toFixed(1)} |`,
      );
      return added(50);
    };
    for (const w of fleet.workers.keys()) {
      row(`a pass-through proxy (no logic) to worker ${w + 1}`, direct[w] ?? [], proxied[w] ?? []);
    }
    for (const [g, [store]] of gateways.entries()) {
      const worker = routedTo[g] ?? 0;
      const added = row(
        `gateway on ${store}, routed to worker ${worker + 1}`,
        direct[worker] ?? [],
        via[g] ?? [],
      );
      if (g === 0) added50.push(added);
    }
  }
  // Each gateway served only its own 2 × count requests meanwhile (and its probes).
  const cpuPerRequest = gateways.map(
    ([store, gateway], g) =>
      `${store} ${((1000 * (processCpuMs(gateway.child.pid ?? 0) - (cpuBefore[g] ?? 0))) / (2 * count)).toFixed(0)} µs`,
  );
  return [
    `Added latency: ${count} one-token requests each way and kind, alternating each worker directly, the ` +
      "pass-through proxy in front of each worker and each gateway, sequential; ms from send to the whole response (streamed: to [DONE]). " +
      `Each is compared with the worker it reaches, called directly. Every path first served ${warmUpCount} requests ` +
      "(four at a time), so each process is measured as a long-running server, its request path compiled.",
    "",
    "| requests | through | worker directly p50 / p99 | through it p50 / p99 | added p50 / p99 |",
    "| --- | --- | ---: | ---: | ---: |",
    ...rows,
    "",
    `Target (embedded store): added p50 < 2 ms — streamed ${(added50[0] ?? 0) < 2 ? "PASS" : "MISS"}, ` +
      `non-streamed ${(added50[1] ?? 0) < 2 ? "PASS" : "MISS"}. The pass-through proxy (bench/pass-through-proxy.ts: ` +
      "node:http in, undici out, nothing else) is the floor of any gateway process on this machine: the hop alone.",
    "",
    `Gateway CPU per one-token request over real workers (its whole process, its probes included): ${cpuPerRequest.join(", ")}.`,
  ];
}

/** The worker a gateway sends the latency requests to: whose served-requests counter its warm-up requests raise. */
async function routedWorker(fleet: Fleet, gateway: ServerProcess): Promise<number> {
  const before = await Promise.all(fleet.workers.map(requestsServed));
  for (let i = 0; i < 5; i++) await timed(gateway.url, gateway.apiKey, FLEET_MODEL, true);
  const after = await Promise.all(fleet.workers.map(requestsServed));
  const gained = after.map((n, w) => n - (before[w] ?? 0));
  return gained.indexOf(Math.max(...gained));
}

/** A worker's chat completions so far (`hearth_requests_total`, every status). */
async function requestsServed(worker: ServerProcess): Promise<number> {
  const text = await (await fetch(`${worker.url}/metrics`)).text();
  return text
    .split("\n")
    .filter((line) => line.startsWith("hearth_requests_total"))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

/** Rounds of the throughput comparison: direct and through the gateway alternate (A, B, A, B). */
const THROUGHPUT_ROUNDS = 3;

/**
 * Closed-loop streaming clients: the two workers driven directly (half the clients each) vs the gateway (all),
 * alternating for THROUGHPUT_ROUNDS rounds so that a machine that speeds up or slows down during the run (these
 * VMs do) moves both sides alike; the ratio is the median of the rounds' ratios.
 */
async function throughput(fleet: Fleet, model: string, parallel: number, seconds: number, maxTokens: number) {
  const clients = parallel * 2;
  const run = { kind: "seconds", seconds } as const;
  const rows: string[] = [];
  const ratios: number[] = [];
  /** The gateway's CPU per relayed token, µs: what its share of these shared cores costs the workers. */
  const cpuPerToken: number[] = [];
  const gatewayPid = fleet.gateway.child.pid;
  if (gatewayPid === undefined) throw new Error("the gateway process has no pid");
  for (let round = 1; round <= THROUGHPUT_ROUNDS; round++) {
    const direct = await Promise.all(
      fleet.workers.map((w) =>
        runLevel(httpTarget({ url: w.url, apiKey: w.apiKey, model, maxTokens }), parallel, run),
      ),
    );
    const directTps = direct.reduce((sum, level) => sum + level.result.tokensPerSecond, 0);
    const cpuBefore = processCpuMs(gatewayPid);
    const gateway = await runLevel(
      httpTarget({ url: fleet.gateway.url, apiKey: fleet.gateway.apiKey, model: FLEET_MODEL, maxTokens }),
      clients,
      run,
    );
    cpuPerToken.push((1000 * (processCpuMs(gatewayPid) - cpuBefore)) / gateway.result.completionTokens);
    ratios.push(gateway.result.tokensPerSecond / directTps);
    rows.push(
      ...direct.map(
        (level, i) =>
          `| ${round} | worker ${i + 1} directly (${parallel} clients) | ${level.result.tokensPerSecond.toFixed(1)} | ${level.result.ttftP50.toFixed(0)} | ${level.result.itlP50.toFixed(1)} |`,
      ),
      `| ${round} | sum of the two | ${directTps.toFixed(1)} | | |`,
      `| ${round} | gateway over both (${clients} clients) | ${gateway.result.tokensPerSecond.toFixed(1)} | ${gateway.result.ttftP50.toFixed(0)} | ${gateway.result.itlP50.toFixed(1)} |`,
    );
  }
  const ratio = median(ratios);
  return [
    `Aggregate throughput: ${clients} closed-loop streaming clients, max_tokens ${maxTokens}, ${seconds} s each; ` +
      `each worker \`--parallel ${parallel}\` on one thread; the workers directly and the gateway alternate for ` +
      `${THROUGHPUT_ROUNDS} rounds.`,
    "",
    "| round | driven | tok/s | TTFT p50 ms | ITL p50 ms |",
    "| ---: | --- | ---: | ---: | ---: |",
    ...rows,
    "",
    `Gateway ÷ sum: ${ratios.map((r) => r.toFixed(3)).join(", ")} by round; median ${ratio.toFixed(3)} (target ≥ 0.95 — ` +
      `${ratio >= 0.95 ? "PASS" : "MISS"}). ` +
      (fleet.split === undefined
        ? "The gateway and both workers share the same cores, so the gateway's own CPU comes out of the workers' throughput: "
        : `The gateways are pinned to core ${fleet.split.gateway}, the workers, proxies and client to ${fleet.split.workers} (taskset): `) +
      "it used " +
      `${cpuPerToken.map((us) => us.toFixed(0)).join(", ")} µs of CPU per relayed token by round (its whole process, ` +
      "usage records and logs included).",
  ];
}

/** Runs the fleet workloads on fresh processes and returns a Markdown section body. */
export async function benchFleet(options: FleetBenchOptions = {}): Promise<string> {
  const parallel = options.parallel ?? 4;
  const seconds = options.seconds ?? 15;
  const model = options.model ?? "smollm2-135m-instruct";
  if (!existsSync(COMPILED_CLI)) throw new Error("dist/ is missing: run `npm run build` first.");
  const fleet = await startFleet(parallel, model);
  try {
    const latency = await addedLatency(
      fleet,
      model,
      options.latencyRequests ?? 100,
      options.warmUpRequests ?? 500,
    );
    const rate = await throughput(fleet, model, parallel, seconds, 32);
    const gatewayOf = (server: ServerProcess) => ({
      url: server.url,
      apiKey: server.apiKey,
      model: FLEET_MODEL,
    });
    const cache = await affinityComparison(
      gatewayOf(fleet.gateway),
      gatewayOf(fleet.gatewayWithoutAffinity),
      {
        // As many conversations as the workers' sequences (2 × parallel), their turns spaced: more, and every
        // worker reuses its slots for others before a conversation's next turn (nothing hits, whoever routes: 2.4 %
        // on and off at 3 × parallel on 2026-11-27); in lockstep, least-busy routing sends each back by order alone.
        conversations: options.affinity?.conversations ?? 2 * parallel,
        turns: options.affinity?.turns ?? 4,
        pairs: options.affinity?.pairs ?? 2,
      },
    );
    return [...latency, "", ...rate, "", ...cache].join("\n");
  } finally {
    await fleet.stop();
  }
}

/** `--quick`: every part of the phase, briefly (a smoke run, not a measurement). */
const QUICK: FleetBenchOptions = {
  parallel: 2,
  seconds: 2,
  latencyRequests: 5,
  warmUpRequests: 8,
  affinity: { conversations: 4, turns: 3, pairs: 1 },
};

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchFleet(process.argv.includes("--quick") ? QUICK : {}).then(
    (section) => process.stdout.write(`${section}\n`),
    (err: unknown) => {
      process.stderr.write(`fleet benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
