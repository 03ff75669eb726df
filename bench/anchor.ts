// The anchor: llama.cpp's own llama-server and Hearth on the same GGUF, driven by the same closed-loop streaming
// client at 1, 4 and 16 streams, interleaved (A, B, A, B) so the machine's drift falls on both. llama-server is the
// build test/support/llama-server.ts makes from the llama.cpp source inside node-llama-cpp's package, on the same
// prebuilt ggml libraries (the same kernels). `node --import tsx bench/anchor.ts` prints the section; bench/run.ts
// embeds it (phase `anchor`).
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { processAlive } from "../src/engine/llama/engine-builder.js";
import { defaultModelPath, startLlamaServer } from "../test/support/llama-server.js";
import type { ServerProcess } from "../test/support/server-process.js";
import { setClientPriority } from "./client-priority.js";
import { type CpuNoise, startNoiseMeter, startThreadMeter, type ThreadCpu } from "./cpu-noise.js";
import { httpTarget } from "./http-target.js";
import { readBenchOptions } from "./options.js";
import { type DefaultServerOptions, startDefaultServer } from "./serve-default.js";
import { median, medianBy } from "./stats.js";
import { type LevelResult, type LevelRun, runLevel, type Target } from "./workload.js";

export interface AnchorOptions {
  /** Streams at once, ascending; default 1, 4, 16. */
  levels?: number[];
  /** Seconds of each run. */
  seconds?: number;
  /**
   * Runs per server and level (interleaved); default 3, at least 3 from the command line: runs of one side differ by
   * up to 20 % on a shared 2-vCPU machine, and the median of two is the lower one.
   */
  repeats?: number;
  /** Default 128, as the table was measured. */
  maxTokens?: number;
  model?: string;
  /** llama.cpp threads of both servers (`-t`); default 2. */
  threads?: number;
  /** Hearth's llama.cpp builds to run beside llama-server; default both, the tuned one when it is cached. */
  builds?: ("prebuilt" | "tuned")[];
  /** The tuned build's thread-pool polling levels (engine.threadPoolPoll), one Hearth side each; default Hearth's. */
  polls?: number[];
  /** Hearth's prefillChunk values, one Hearth side each (with every build and poll); default the config's. */
  prefillChunks?: number[];
  /** Hearth's prefillStretch values, one Hearth side each (with every build, poll and chunk); default the config's. */
  prefillStretches?: number[];
  /** Hearth's promptCacheMiB values, one Hearth side each (with every other choice); default the config's. */
  promptCaches?: number[];
  /**
   * Environments of Hearth's process, one Hearth side each (with every other choice); default none. An empty one is
   * Hearth's own default. For example `{ UV_THREADPOOL_SIZE: "1" }` or `{ HEARTH_ADDON_SAMPLING: "pool" }`.
   */
  envs?: Record<string, string>[];
  /**
   * Seconds each server is warmed up for, one stream at a time, before the first measured run; default 30. Hearth's
   * JavaScript is compiled by V8 as it runs: at one stream a fresh server made 144, 150, 158 and then 165–170 tok/s
   * in consecutive 10 s windows (AMD EPYC, 2026-11-28), so one request of warm-up measured its first minute, not
   * the server. llama-server is warmed up the same.
   */
  warmupSeconds?: number;
  /**
   * The client's nice value while it measures (bench/client-priority.ts); default -10, so that a token is timestamped
   * when the server sends it, not when the client next gets a core. 0 measures with the client at the servers'.
   */
  clientNice?: number;
}

/**
 * `BENCH_ANCHOR_ENV`: sides separated by ";", each a ","-separated list of NAME=value ("" for the default), e.g.
 * `;HEARTH_ADDON_SAMPLING=pool`. `BENCH_ANCHOR_UV=4,1` is short for `UV_THREADPOOL_SIZE=4;UV_THREADPOOL_SIZE=1`.
 */
export function parseAnchorEnvs(env: NodeJS.ProcessEnv): Record<string, string>[] | undefined {
  const uv = env.BENCH_ANCHOR_UV?.split(",").map((size) => ({ UV_THREADPOOL_SIZE: size.trim() }));
  const sides = env.BENCH_ANCHOR_ENV?.split(";").map((side) =>
    Object.fromEntries(
      side
        .split(",")
        .map((pair) => pair.trim())
        .filter((pair) => pair.length > 0)
        .map((pair) => {
          const eq = pair.indexOf("=");
          if (eq <= 0) throw new Error(`BENCH_ANCHOR_ENV: "${pair}" is not NAME=value`);
          return [pair.slice(0, eq), pair.slice(eq + 1)];
        }),
    ),
  );
  if (uv === undefined && sides === undefined) return undefined;
  return [...(uv ?? []), ...(sides ?? [])];
}

interface Side {
  name: string;
  target: Target;
  pid: number | undefined;
}

interface Measured {
  result: LevelResult;
  runs: number[];
  /** TTFT p50 over every request of every run (ms), and each run's own p50. */
  ttftP50: number;
  ttftRuns: number[];
  noise: CpuNoise | undefined;
  cpu: ThreadCpu | undefined;
}

const f1 = (n: number) => n.toFixed(1);

/** Pause before each run, so that no server still busy from the run before shares the machine with it. */
const SETTLE_MS = 1000;

/** A side's label for its environment: " libuv 4", " HEARTH_ADDON_SAMPLING=pool", "" for the default. */
function envLabel(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([name, value]) => (name === "UV_THREADPOOL_SIZE" ? ` libuv ${value}` : ` ${name}=${value}`))
    .join("");
}

/** Runs the anchor and returns a Markdown section body. */
export async function benchAnchor(options: AnchorOptions = {}): Promise<string> {
  const levels = options.levels ?? [1, 4, 16];
  const seconds = options.seconds ?? 15;
  const repeats = options.repeats ?? 3;
  const maxTokens = options.maxTokens ?? 128;
  const model = options.model ?? "smollm2-135m-instruct";
  const threads = options.threads ?? 2;
  const warmupSeconds = options.warmupSeconds ?? 30;
  const parallel = Math.max(...levels);
  // The same context per sequence on both: llama-server shares -c among its -np slots.
  const perSequence = 2048;
  const llama = await startLlamaServer({
    modelPath: await defaultModelPath(),
    parallel,
    contextSize: perSequence * parallel,
    alias: model,
    extraArgs: ["-t", String(threads), "-cb"],
  });
  const hearths: { build: string; server: ServerProcess }[] = [];
  try {
    type Wanted = {
      engine: NonNullable<DefaultServerOptions["engine"]>;
      label: string;
      prefillChunk?: number;
      prefillStretch?: number;
      promptCacheMiB?: number;
      env?: Record<string, string>;
    };
    const builds = (options.builds ?? ["prebuilt", "tuned"]).flatMap((build): Wanted[] =>
      build === "prebuilt"
        ? [{ engine: { build: "prebuilt" }, label: "" }]
        : (options.polls ?? [undefined]).map((poll) => ({
            engine: { build: "tuned", ...(poll === undefined ? {} : { threadPoolPoll: poll }) },
            label: poll === undefined ? "" : ` poll ${poll}`,
          })),
    );
    const wanted = builds
      .flatMap((w): Wanted[] =>
        (options.prefillChunks ?? [undefined]).map((chunk) =>
          chunk === undefined ? w : { ...w, label: `${w.label} prefill ${chunk}`, prefillChunk: chunk },
        ),
      )
      .flatMap((w): Wanted[] =>
        (options.prefillStretches ?? [undefined]).map((stretch) =>
          stretch === undefined
            ? w
            : { ...w, label: `${w.label} stretch ${stretch}`, prefillStretch: stretch },
        ),
      )
      .flatMap((w): Wanted[] =>
        (options.promptCaches ?? [undefined]).map((mib) =>
          mib === undefined ? w : { ...w, label: `${w.label} prompt cache ${mib} MiB`, promptCacheMiB: mib },
        ),
      )
      .flatMap((w): Wanted[] =>
        (options.envs ?? [undefined]).map((env) =>
          env === undefined ? w : { ...w, label: `${w.label}${envLabel(env)}`, env },
        ),
      );
    for (const { engine, label, prefillChunk, prefillStretch, promptCacheMiB, env } of wanted) {
      const server = await startDefaultServer({
        model,
        parallel,
        maxQueue: parallel,
        threads,
        engine,
        ...(prefillChunk === undefined ? {} : { prefillChunk }),
        ...(prefillStretch === undefined ? {} : { prefillStretch }),
        ...(promptCacheMiB === undefined ? {} : { promptCacheMiB }),
        ...(env === undefined ? {} : { env }),
      });
      const served = `${await servedBuild(server.url)}${label}`;
      if (hearths.some((h) => h.build === served)) {
        // The tuned build is not cached: its side would be the prebuilt one again.
        process.stderr.write(
          `anchor: no tuned build in the engine cache (hearth engine build); ${served} only\n`,
        );
        await server.stop();
        continue;
      }
      hearths.push({ build: served, server });
    }
    const priority = setClientPriority(options.clientNice);
    try {
      const sides: Side[] = [
        {
          name: "llama-server",
          target: httpTarget({ url: llama.url, apiKey: "none", model, maxTokens }),
          pid: llama.process.pid,
        },
        ...hearths.map(({ build, server }) => ({
          name: `Hearth ${build}`,
          target: httpTarget({ url: server.url, apiKey: server.apiKey, model, maxTokens }),
          pid: server.child.pid,
        })),
      ];
      // A warm-up round each: weights paged in, threads started, caches of both warm, Hearth's JavaScript compiled
      // (warmupSeconds). Then one request per client at the largest level, as every level's slots are then used.
      for (const side of sides) {
        if (warmupSeconds > 0) await runLevel(side.target, 1, { kind: "seconds", seconds: warmupSeconds });
        await runLevel(side.target, parallel, {
          kind: "plan",
          perClient: new Array<number>(parallel).fill(1),
        });
      }
      const runs = new Map<
        string,
        { result: LevelResult; ttfts: number[]; noise: CpuNoise | undefined; cpu: ThreadCpu | undefined }[]
      >();
      for (let repeat = 0; repeat < repeats; repeat++) {
        for (const level of levels) {
          for (const side of sides) {
            const measure = async (
              attempt: number,
            ): Promise<{ run: LevelRun; noise: CpuNoise | undefined; cpu: ThreadCpu | undefined }> => {
              const meter = startNoiseMeter([process.pid, ...(side.pid === undefined ? [] : [side.pid])]);
              const cpuMeter = side.pid === undefined ? () => undefined : startThreadMeter(side.pid, threads);
              try {
                const run = await runLevel(side.target, level, { kind: "seconds", seconds });
                return { run, noise: meter(), cpu: cpuMeter() };
              } catch (err) {
                // Which server failed, and whether it is still running. A live server's one failed stream (a
                // connection llama-server closed under 16 streams) costs that run, measured again once, not the
                // whole table.
                const alive = side.pid !== undefined && processAlive(side.pid);
                const why = `${String(err)} ${String((err as Error).cause ?? "")}`;
                if (alive && attempt === 0) {
                  process.stderr.write(
                    `anchor ${side.name} C=${level}: a request failed (${why}); run again\n`,
                  );
                  return measure(1);
                }
                throw new Error(
                  `${side.name} at C=${level} failed (process ${alive ? "alive" : "gone"}): ${why}`,
                );
              }
            };
            // The last run's server still spins: both servers' thread pools poll for about 200 ms of CPU after their
            // last decode (`/proc`, 2026-12-02), which the next side's first steps would share the cores with.
            await sleep(SETTLE_MS);
            const { run, noise, cpu } = await measure(0);
            const key = `${side.name}:${level}`;
            runs.set(key, [...(runs.get(key) ?? []), { result: run.result, ttfts: run.ttfts, noise, cpu }]);
            process.stderr.write(
              `anchor ${side.name} C=${level} run ${repeat + 1}/${repeats}: ${f1(run.result.tokensPerSecond)} tok/s, ` +
                `TTFT p50 ${run.result.ttftP50.toFixed(0)} ms, ITL p50 / p95 ${f1(run.result.itlP50)} / ` +
                `${f1(run.result.itlP95)} ms\n`,
            );
          }
        }
      }
      const measured = (name: string, level: number): Measured | undefined => {
        const list = runs.get(`${name}:${level}`);
        if (list === undefined || list.length === 0) return undefined;
        const chosen = medianBy(list, (r) => r.result.tokensPerSecond);
        return {
          ...chosen,
          runs: list.map((r) => r.result.tokensPerSecond),
          ttftP50: median(list.flatMap((r) => r.ttfts)),
          ttftRuns: list.map((r) => r.result.ttftP50),
        };
      };
      const hearthSides = sides.slice(1).map((side) => side.name);
      return render(levels, hearthSides, measured, {
        seconds,
        repeats,
        maxTokens,
        threads,
        parallel,
        warmupSeconds,
        clientNice: priority.nice,
      });
    } finally {
      priority.restore();
    }
  } finally {
    for (const { server } of hearths) await server.stop();
    await llama.stop();
  }
}

/** Which llama.cpp build the server at `url` runs, from /health: "tuned <key>" or "prebuilt". */
async function servedBuild(url: string): Promise<string> {
  const body = (await (await fetch(`${url}/health`)).json()) as {
    engine?: { build?: { build: string; key?: string } };
  };
  const build = body.engine?.build;
  if (build === undefined) return "unknown";
  return build.build === "tuned" ? `tuned ${build.key ?? ""}`.trimEnd() : build.build;
}

function render(
  levels: number[],
  hearthSides: string[],
  measured: (name: string, level: number) => Measured | undefined,
  settings: {
    seconds: number;
    repeats: number;
    maxTokens: number;
    threads: number;
    parallel: number;
    warmupSeconds: number;
    clientNice: number;
  },
): string {
  const rows: string[] = [];
  const targets: string[] = [];
  const noise = (m: Measured) =>
    m.noise === undefined ? "–" : `${f1(m.noise.stealPercent)} / ${f1(m.noise.othersPercent)}`;
  // TTFT p50 of every request of the side's runs, each run's own p50 in brackets.
  const ttft = (m: Measured) => `${m.ttftP50.toFixed(0)} (${m.ttftRuns.map((t) => t.toFixed(0)).join(", ")})`;
  // CPU per completion token: the compute threads' · the rest's (the server's own work besides the model).
  const cpu = (m: Measured) => {
    const tokens = m.result.completionTokens;
    if (m.cpu === undefined || tokens === 0) return "–";
    return `${(m.cpu.computeMs / tokens).toFixed(2)} · ${(m.cpu.otherMs / tokens).toFixed(2)}`;
  };
  for (const side of hearthSides) {
    const misses: string[] = [];
    const ratios: string[] = [];
    for (const level of levels) {
      const a = measured("llama-server", level);
      const b = measured(side, level);
      if (a === undefined || b === undefined) continue;
      const ratio = b.result.tokensPerSecond / a.result.tokensPerSecond;
      ratios.push(`${level}: ${ratio.toFixed(2)}`);
      if (ratio < 1) misses.push(`throughput at ${level}`);
      if (b.result.itlP95 > 1.5 * b.result.itlP50) misses.push(`ITL tail at ${level}`);
      if (b.ttftP50 > a.ttftP50) misses.push(`TTFT at ${level}`);
      rows.push(
        `| ${side} | ${level} | ${f1(a.result.tokensPerSecond)} (${a.runs.map(f1).join(", ")}) | ${f1(b.result.tokensPerSecond)} (${b.runs.map(f1).join(", ")}) | ${ratio.toFixed(2)} | ` +
          `${ttft(a)} / ${ttft(b)} | ${f1(a.result.itlP50)} / ${f1(a.result.itlP95)} | ${f1(b.result.itlP50)} / ${f1(b.result.itlP95)} | ${cpu(a)} / ${cpu(b)} | ${noise(a)} · ${noise(b)} |`,
      );
    }
    targets.push(
      `${side}: Hearth ÷ llama-server ≥ 1.0 (${ratios.join(", ")}), ITL p95 ≤ 1.5 × p50 and TTFT p50 ≤ llama-server's at every level — ` +
        (misses.length === 0 ? "PASS" : `MISS (${misses.join(", ")})`),
    );
  }
  return [
    `llama-server (\`-np ${settings.parallel} -cb -t ${settings.threads}\`, 2048 tokens of context per slot) and ` +
      `Hearth (\`parallel ${settings.parallel}\`, ${settings.threads} threads; each llama.cpp build it ran, named by ` +
      "/health) on the same GGUF; the same " +
      `closed-loop streaming client, max_tokens ${settings.maxTokens}, temperature 0, ${settings.seconds} s per run, ` +
      `each server warmed up for ${settings.warmupSeconds} s at one stream, the client at nice ${settings.clientNice}, ` +
      `${settings.repeats} runs per server and level interleaved (A, B, A, B); the median run is shown, every run's ` +
      "tok/s in brackets. TTFT p50: over every request of the side's runs at that level, each run's own p50 in " +
      "brackets (at 16 streams one run's p50 moved by 2–3× from one run to the next with how the streams happened to bunch). " +
      "CPU ms per token: the server's compute threads (its busiest " +
      `${settings.threads}) · its other threads (HTTP, Hearth's JS thread). ` +
      "CPU noise: steal % / other processes % during the run.",
    "",
    "| Hearth build | streams | llama-server tok/s | Hearth tok/s | Hearth ÷ llama-server | TTFT p50 ms (llama-server / Hearth) | llama-server ITL p50 / p95 ms | Hearth ITL p50 / p95 ms | CPU ms/token, compute · other (llama-server / Hearth) | noise |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...rows,
    "",
    ...targets.map((t) => `- ${t}`),
  ].join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = readBenchOptions();
  const polls = process.env.BENCH_ANCHOR_POLLS?.split(",").map(Number);
  const builds = process.env.BENCH_ANCHOR_BUILDS?.split(",") as AnchorOptions["builds"];
  const prefillChunks = process.env.BENCH_ANCHOR_PREFILL?.split(",").map(Number);
  const prefillStretches = process.env.BENCH_ANCHOR_STRETCH?.split(",").map(Number);
  const envs = parseAnchorEnvs(process.env);
  const promptCaches = process.env.BENCH_ANCHOR_PROMPT_CACHE?.split(",").map(Number);
  const warmup = process.env.BENCH_ANCHOR_WARMUP;
  const clientNice = process.env.BENCH_ANCHOR_CLIENT_NICE;
  benchAnchor({
    ...(clientNice === undefined ? {} : { clientNice: Number(clientNice) }),
    ...(warmup === undefined ? {} : { warmupSeconds: Number(warmup) }),
    seconds: options.seconds,
    repeats: Math.max(3, options.repeats),
    levels: options.levels,
    ...(polls === undefined ? {} : { polls }),
    ...(builds === undefined ? {} : { builds }),
    ...(prefillChunks === undefined ? {} : { prefillChunks }),
    ...(prefillStretches === undefined ? {} : { prefillStretches }),
    ...(envs === undefined ? {} : { envs }),
    ...(promptCaches === undefined ? {} : { promptCaches }),
  }).then(
    (section) => process.stdout.write(`${section}\n`),
    (err: unknown) => {
      process.stderr.write(`anchor benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
