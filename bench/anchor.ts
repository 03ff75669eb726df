// The anchor: llama.cpp's own llama-server and Hearth on the same GGUF, driven by the same closed-loop streaming
// client at 1, 4 and 16 streams, interleaved (A, B, A, B) so the machine's drift falls on both. llama-server is the
// build test/support/llama-server.ts makes from the llama.cpp source inside node-llama-cpp's package, on the same
// prebuilt ggml libraries (the same kernels). `node --import tsx bench/anchor.ts` prints the section; bench/run.ts
// embeds it (phase `anchor`).
import { pathToFileURL } from "node:url";
import { defaultModelPath, startLlamaServer } from "../test/support/llama-server.js";
import { type CpuNoise, startNoiseMeter } from "./cpu-noise.js";
import { httpTarget } from "./http-target.js";
import { readBenchOptions } from "./options.js";
import { startDefaultServer } from "./serve-default.js";
import { medianBy } from "./stats.js";
import { type LevelResult, runLevel, type Target } from "./workload.js";

export interface AnchorOptions {
  /** Streams at once, ascending; default 1, 4, 16. */
  levels?: number[];
  /** Seconds of each run. */
  seconds?: number;
  /** Runs per server and level (interleaved); default 2. */
  repeats?: number;
  /** Default 128, as the table was measured. */
  maxTokens?: number;
  model?: string;
  /** llama.cpp threads of both servers (`-t`); default 2. */
  threads?: number;
}

interface Side {
  name: string;
  target: Target;
  pid: number | undefined;
}

interface Measured {
  result: LevelResult;
  runs: number[];
  noise: CpuNoise | undefined;
}

const f1 = (n: number) => n.toFixed(1);
const mark = (ok: boolean) => (ok ? "PASS" : "MISS");

/** Runs the anchor and returns a Markdown section body. */
export async function benchAnchor(options: AnchorOptions = {}): Promise<string> {
  const levels = options.levels ?? [1, 4, 16];
  const seconds = options.seconds ?? 15;
  const repeats = options.repeats ?? 2;
  const maxTokens = options.maxTokens ?? 128;
  const model = options.model ?? "smollm2-135m-instruct";
  const threads = options.threads ?? 2;
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
  try {
    const hearth = await startDefaultServer({ model, parallel, maxQueue: parallel, threads });
    try {
      const sides: Side[] = [
        {
          name: "llama-server",
          target: httpTarget({ url: llama.url, apiKey: "none", model, maxTokens }),
          pid: llama.process.pid,
        },
        {
          name: "Hearth",
          target: httpTarget({ url: hearth.url, apiKey: hearth.apiKey, model, maxTokens }),
          pid: hearth.child.pid,
        },
      ];
      // A warm-up round each: weights paged in, threads started, caches of both warm.
      for (const side of sides)
        await runLevel(side.target, parallel, {
          kind: "plan",
          perClient: new Array<number>(parallel).fill(1),
        });
      const runs = new Map<string, { result: LevelResult; noise: CpuNoise | undefined }[]>();
      for (let repeat = 0; repeat < repeats; repeat++) {
        for (const level of levels) {
          for (const side of sides) {
            const meter = startNoiseMeter([process.pid, ...(side.pid === undefined ? [] : [side.pid])]);
            const run = await runLevel(side.target, level, { kind: "seconds", seconds });
            const key = `${side.name}:${level}`;
            runs.set(key, [...(runs.get(key) ?? []), { result: run.result, noise: meter() }]);
            process.stderr.write(
              `anchor ${side.name} C=${level} run ${repeat + 1}/${repeats}: ${f1(run.result.tokensPerSecond)} tok/s\n`,
            );
          }
        }
      }
      const measured = (name: string, level: number): Measured | undefined => {
        const list = runs.get(`${name}:${level}`);
        if (list === undefined || list.length === 0) return undefined;
        const chosen = medianBy(list, (r) => r.result.tokensPerSecond);
        return { ...chosen, runs: list.map((r) => r.result.tokensPerSecond) };
      };
      return render(levels, measured, { seconds, repeats, maxTokens, threads, parallel });
    } finally {
      await hearth.stop();
    }
  } finally {
    await llama.stop();
  }
}

function render(
  levels: number[],
  measured: (name: string, level: number) => Measured | undefined,
  settings: { seconds: number; repeats: number; maxTokens: number; threads: number; parallel: number },
): string {
  const rows: string[] = [];
  const ratios = new Map<number, number>();
  let itlTail: { p50: number; p95: number } | undefined;
  for (const level of levels) {
    const a = measured("llama-server", level);
    const b = measured("Hearth", level);
    if (a === undefined || b === undefined) continue;
    const ratio = b.result.tokensPerSecond / a.result.tokensPerSecond;
    ratios.set(level, ratio);
    if (level === 1) itlTail = { p50: b.result.itlP50, p95: b.result.itlP95 };
    const noise = (m: Measured) =>
      m.noise === undefined ? "–" : `${f1(m.noise.stealPercent)} / ${f1(m.noise.othersPercent)}`;
    rows.push(
      `| ${level} | ${f1(a.result.tokensPerSecond)} (${a.runs.map(f1).join(", ")}) | ${f1(b.result.tokensPerSecond)} (${b.runs.map(f1).join(", ")}) | ${ratio.toFixed(2)} | ` +
        `${a.result.ttftP50.toFixed(0)} / ${b.result.ttftP50.toFixed(0)} | ${f1(a.result.itlP50)} / ${f1(a.result.itlP95)} | ${f1(b.result.itlP50)} / ${f1(b.result.itlP95)} | ${noise(a)} · ${noise(b)} |`,
    );
  }
  const one = ratios.get(1);
  const top = ratios.get(Math.max(...levels));
  const targets = [
    one === undefined
      ? undefined
      : `Hearth ÷ llama-server ≥ 1.0 at 1 stream: ${one.toFixed(2)} — ${mark(one >= 1)}`,
    top === undefined
      ? undefined
      : `Hearth ÷ llama-server ≥ 1.1 at ${Math.max(...levels)} streams: ${top.toFixed(2)} — ${mark(top >= 1.1)}`,
    itlTail === undefined
      ? undefined
      : `Hearth ITL p95 ≤ 1.5 × p50 at 1 stream: ${f1(itlTail.p95)} vs ${f1(1.5 * itlTail.p50)} ms — ${mark(itlTail.p95 <= 1.5 * itlTail.p50)}`,
  ].filter((t) => t !== undefined);
  return [
    `llama-server (\`-np ${settings.parallel} -cb -t ${settings.threads}\`, 2048 tokens of context per slot) and ` +
      `Hearth (\`parallel ${settings.parallel}\`, ${settings.threads} threads) on the same GGUF; the same ` +
      `closed-loop streaming client, max_tokens ${settings.maxTokens}, temperature 0, ${settings.seconds} s per run, ` +
      `${settings.repeats} runs per server and level interleaved (A, B, A, B); the median run is shown, every run's ` +
      "tok/s in brackets. CPU noise: steal % / other processes % during the run.",
    "",
    "| streams | llama-server tok/s | Hearth tok/s | Hearth ÷ llama-server | TTFT p50 ms (llama-server / Hearth) | llama-server ITL p50 / p95 ms | Hearth ITL p50 / p95 ms | noise |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...rows,
    "",
    ...targets.map((t) => `- ${t}`),
  ].join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = readBenchOptions();
  benchAnchor({
    seconds: options.seconds,
    repeats: Math.max(2, options.repeats),
  }).then(
    (section) => process.stdout.write(`${section}\n`),
    (err: unknown) => {
      process.stderr.write(`anchor benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
