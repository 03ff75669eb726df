// What each llama-server setting is worth on this machine: the anchor's llama-server, and variants of it that change
// one setting each, driven by the same closed-loop streaming client at 1, 4 and 16 streams, interleaved (every
// variant once per round). `BENCH_PHASES=ablation npm run bench` embeds it; `node --import tsx
// bench/llama-server-ablation.ts` prints the section alone.
import { pathToFileURL } from "node:url";
import { defaultModelPath, type LlamaServer, startLlamaServer } from "../test/support/llama-server.js";
import { type ClientPriority, setClientPriority } from "./client-priority.js";
import { httpTarget } from "./http-target.js";
import { readBenchOptions } from "./options.js";
import { medianBy } from "./stats.js";
import { type LevelResult, runLevel } from "./workload.js";

export interface AblationOptions {
  levels?: number[];
  /** Variants to run, by their index in VARIANTS (the anchor, 0, always runs); default all. */
  only?: number[];
  seconds?: number;
  repeats?: number;
  maxTokens?: number;
}

/** One variant: its name and the arguments it adds to (or changes in) the anchor's `-t 2 -cb`. */
interface Variant {
  name: string;
  args: string[];
  env?: Record<string, string>;
}

const VARIANTS: Variant[] = [
  {
    name: "anchor (-t 2, poll 50, flash attention auto, load mode auto (mmap), -b 2048 -ub 512)",
    args: ["-t", "2"],
  },
  { name: "-t 1", args: ["-t", "1"] },
  { name: "--poll 0", args: ["-t", "2", "--poll", "0"] },
  { name: "--poll 100", args: ["-t", "2", "--poll", "100"] },
  { name: "-fa off", args: ["-t", "2", "-fa", "off"] },
  { name: "--load-mode none (no mmap)", args: ["-t", "2", "--load-mode", "none"] },
  {
    name: "--load-mode none, weights on transparent huge pages (glibc.malloc.hugetlb=1)",
    args: ["-t", "2", "--load-mode", "none"],
    env: { GLIBC_TUNABLES: "glibc.malloc.hugetlb=1" },
  },
  { name: "-b 512 -ub 512 (Hearth's batch)", args: ["-t", "2", "-b", "512", "-ub", "512"] },
  { name: "--cache-ram 0 (no host-memory prompt cache)", args: ["-t", "2", "--cache-ram", "0"] },
];

const f1 = (n: number) => n.toFixed(1);

export async function benchAblation(options: AblationOptions = {}): Promise<string> {
  const levels = options.levels ?? [1, 4, 16];
  const seconds = options.seconds ?? 10;
  const repeats = options.repeats ?? 2;
  const maxTokens = options.maxTokens ?? 128;
  const parallel = Math.max(...levels);
  const model = "smollm2-135m-instruct";
  const servers: { variant: Variant; server: LlamaServer }[] = [];
  const variants = VARIANTS.filter(
    (_, i) => i === 0 || options.only === undefined || options.only.includes(i),
  );
  let priority: ClientPriority | undefined;
  try {
    for (const variant of variants) {
      const server = await startLlamaServer({
        modelPath: await defaultModelPath(),
        parallel,
        contextSize: 2048 * parallel,
        alias: model,
        extraArgs: ["-cb", ...variant.args],
        ...(variant.env === undefined ? {} : { env: variant.env }),
      });
      servers.push({ variant, server });
    }
    // After the servers started (they would inherit it): the client reads at nice -10, as the anchor's does.
    priority = setClientPriority();
    const target = (server: LlamaServer) => httpTarget({ url: server.url, apiKey: "none", model, maxTokens });
    for (const { server } of servers)
      await runLevel(target(server), parallel, {
        kind: "plan",
        perClient: new Array<number>(parallel).fill(1),
      });
    const runs = new Map<string, LevelResult[]>();
    for (let repeat = 0; repeat < repeats; repeat++) {
      for (const level of levels) {
        for (const { variant, server } of servers) {
          const run = await runLevel(target(server), level, { kind: "seconds", seconds });
          const key = `${variant.name}:${level}`;
          runs.set(key, [...(runs.get(key) ?? []), run.result]);
          process.stderr.write(
            `ablation ${variant.name} C=${level}: ${f1(run.result.tokensPerSecond)} tok/s, TTFT p50 ${run.result.ttftP50.toFixed(0)} ms\n`,
          );
        }
      }
    }
    const anchorName = VARIANTS[0]?.name ?? "";
    const median = (name: string, level: number) => {
      const list = runs.get(`${name}:${level}`) ?? [];
      return list.length === 0 ? undefined : { chosen: medianBy(list, (r) => r.tokensPerSecond), list };
    };
    const rows = variants.map((variant) => {
      const cells = levels.map((level) => {
        const m = median(variant.name, level);
        const anchor = median(anchorName, level);
        if (m === undefined || anchor === undefined) return "– | –";
        const ratio = m.chosen.tokensPerSecond / anchor.chosen.tokensPerSecond;
        return `${f1(m.chosen.tokensPerSecond)} (${m.list.map((r) => f1(r.tokensPerSecond)).join(", ")}), TTFT p50 ${m.chosen.ttftP50.toFixed(0)} ms, ITL p50 ${f1(m.chosen.itlP50)} ms | ${ratio.toFixed(2)}`;
      });
      return `| ${variant.name} | ${cells.join(" | ")} |`;
    });
    return [
      `llama-server (\`-np ${parallel} -cb\`, 2048 tokens of context per slot, the anchor's build) with one setting ` +
        `changed per row; max_tokens ${maxTokens}, temperature 0, ${seconds} s per run, ${repeats} runs per variant and ` +
        `level, interleaved, the client at nice ${priority.nice}; the median run's tok/s (every run's in brackets) ` +
        "and its ratio to the anchor row.",
      "",
      `| variant | ${levels.map((l) => `C = ${l} tok/s | ÷ anchor`).join(" | ")} |`,
      `| --- | ${levels.map(() => "---: | ---:").join(" | ")} |`,
      ...rows,
    ].join("\n");
  } finally {
    priority?.restore();
    for (const { server } of servers) await server.stop();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = readBenchOptions();
  const only = process.env.BENCH_ABLATION_ONLY?.split(",").map(Number);
  benchAblation({
    seconds: options.seconds,
    repeats: Math.max(2, options.repeats),
    levels: options.levels,
    ...(only === undefined ? {} : { only }),
  }).then(
    (section) => process.stdout.write(`${section}\n`),
    (err: unknown) => {
      process.stderr.write(`ablation benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
