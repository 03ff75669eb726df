// `npm run bench`: the service over HTTP, then the engine in-process, then the raw decode cost; one model at a time.
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { ensureModelFile } from "../src/catalogue/fetch.js";
import { loadConfig } from "../src/config/load.js";
import type { HearthConfig, ModelConfig } from "../src/config/schema.js";
import type { RunnerStats } from "../src/engine/llama/batching.js";
import { usableCores } from "../src/engine/llama/cpu.js";
import { LlamaEngine } from "../src/engine/llama/llama-engine.js";
import { benchAnchor } from "./anchor.js";
import { type CpuNoise, startNoiseMeter } from "./cpu-noise.js";
import { type DecodeCostRow, measureDecodeCost } from "./decode-cost.js";
import { engineTarget } from "./engine-target.js";
import { benchFleet } from "./fleet.js";
import { benchFuzz } from "./fuzz.js";
import { benchGateway, gatewayOptionsFromEnv } from "./gateway.js";
import { benchGrammarCost } from "./grammar-cost.js";
import { httpTarget } from "./http-target.js";
import { benchKeyVerify } from "./key-verify.js";
import { benchLimits } from "./limits.js";
import { benchAblation } from "./llama-server-ablation.js";
import { type BenchOptions, readBenchOptions } from "./options.js";
import { benchOverload } from "./overload.js";
import { benchPrefixReuse } from "./prefix-reuse.js";
import {
  type BatchingStats,
  type BenchReport,
  checkTargets,
  type LevelReport,
  type MeasuredLevel,
  renderMarkdown,
  writeReport,
} from "./report.js";
import { benchSchemaWorst } from "./schema-worst.js";
import { openServer } from "./server.js";
import { benchSoak } from "./soak.js";
import { medianBy } from "./stats.js";
import { type LevelRun, runLevel, type Schedule, type Target } from "./workload.js";

const RESULTS_DIR = join(import.meta.dirname, "results");
const DECODE_BATCHES = [1, 2, 4, 8, 16];

const log = (line: string) => process.stderr.write(`${line}\n`);

/** Requests per client for each level, fixed by the first time-boxed run so every later run repeats the workload. */
class Plans {
  private readonly plans = new Map<number, number[]>();
  constructor(private readonly seconds: number) {}

  schedule(level: number): Schedule {
    const plan = this.plans.get(level);
    return plan === undefined
      ? { kind: "seconds", seconds: this.seconds }
      : { kind: "plan", perClient: plan };
  }

  record(level: number, run: LevelRun): void {
    if (!this.plans.has(level)) this.plans.set(level, run.perClient);
  }
}

interface PhaseRun {
  run: LevelRun;
  noise: CpuNoise | undefined;
  batching?: BatchingStats;
}

interface PhaseSetup {
  name: string;
  target: Target;
  /** The processes doing the phase's work; CPU used by any other process counts as noise. */
  pids: number[];
  observe?: () => () => BatchingStats;
}

/** Runs every level `repeats` times (levels interleaved, to spread the machine's noise) after one warm-up round. */
async function runPhase(
  { name, target, pids, observe }: PhaseSetup,
  options: BenchOptions,
  plans: Plans,
): Promise<Map<number, PhaseRun[]>> {
  const top = Math.max(...options.levels);
  await runLevel(target, top, { kind: "plan", perClient: new Array<number>(top).fill(1) });
  const runs = new Map<number, PhaseRun[]>(options.levels.map((level) => [level, []]));
  for (let repeat = 1; repeat <= options.repeats; repeat++) {
    for (const level of options.levels) {
      const finish = observe?.();
      const meter = startNoiseMeter(pids);
      const run = await runLevel(target, level, plans.schedule(level));
      const noise = meter();
      plans.record(level, run);
      const batching = finish?.();
      runs.get(level)?.push(batching === undefined ? { run, noise } : { run, noise, batching });
      const r = run.result;
      log(
        `${name} C=${level} run ${repeat}/${options.repeats}: ${r.requests} requests, ${r.completionTokens} tokens, ` +
          `${r.tokensPerSecond.toFixed(1)} tok/s` +
          (batching === undefined ? "" : `, ${batching.tokensPerDecode.toFixed(2)} tok/decode`) +
          (noise === undefined ? "" : `, CPU: ${describeNoise(noise)}`),
      );
    }
  }
  return runs;
}

/** Other processes above this share of the machine make a run's numbers suspect. */
const DISTURBED_PERCENT = 10;

function describeNoise(noise: CpuNoise): string {
  const text = `${noise.stealPercent.toFixed(1)}% steal, ${noise.othersPercent.toFixed(1)}% other processes`;
  return noise.othersPercent > DISTURBED_PERCENT ? `${text} (DISTURBED: another heavy process ran)` : text;
}

function representative(runs: readonly PhaseRun[] | undefined): PhaseRun | undefined {
  if (runs === undefined || runs.length === 0) return undefined;
  return medianBy(runs, (r) => r.run.result.tokensPerSecond);
}

function measured(runs: readonly PhaseRun[] | undefined): MeasuredLevel | undefined {
  const chosen = representative(runs);
  if (chosen === undefined || runs === undefined) return undefined;
  return {
    ...chosen.run.result,
    runsTokensPerSecond: runs.map((r) => r.run.result.tokensPerSecond),
    noise: chosen.noise,
  };
}

/** Diffs the runner's counters over one level. */
function batchingObserver(stats: RunnerStats): () => () => BatchingStats {
  return () => {
    const before = { ...stats };
    return () => {
      const tokens = stats.generationStepTokens - before.generationStepTokens;
      return {
        tokensPerDecode: tokens / (stats.generationStepDecodes - before.generationStepDecodes),
        tokensPerStep: tokens / (stats.generationSteps - before.generationSteps),
      };
    };
  };
}

async function httpPhase(options: BenchOptions, modelId: string, parallel: number, plans: Plans) {
  const server = await openServer(options.server, parallel);
  log(`http: ${server.owned ? "started" : "using"} ${server.url}`);
  try {
    const target = httpTarget({
      url: server.url,
      apiKey: server.apiKey,
      model: modelId,
      maxTokens: options.maxTokens,
    });
    const pids = server.pid === undefined ? [process.pid] : [process.pid, server.pid];
    return await runPhase({ name: "http", target, pids }, options, plans);
  } finally {
    await server.stop();
  }
}

async function enginePhase(
  options: BenchOptions,
  model: ModelConfig,
  config: Pick<HearthConfig, "modelsDir" | "gpu">,
  plans: Plans,
) {
  const engine = new LlamaEngine({
    models: [model],
    gpu: config.gpu,
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
  await engine.start();
  try {
    const runner = engine.runners()[0];
    if (runner === undefined) throw new Error("the engine loaded no model");
    const target = engineTarget(engine, model.id, options.maxTokens);
    const observe = batchingObserver(runner.stats);
    return await runPhase({ name: "engine", target, pids: [process.pid], observe }, options, plans);
  } finally {
    await engine.dispose();
  }
}

async function main(): Promise<void> {
  const options = readBenchOptions();
  const startedAt = new Date().toISOString();
  const loadAverage = loadavg();
  const config = loadConfig();
  const modelId = options.model ?? config.models[0]?.id;
  if (modelId === undefined) throw new Error("no model configured");
  const configured = config.models.find((m) => m.id === modelId);
  const local = options.phases.some((p) => p !== "http");
  if (local && configured === undefined) throw new Error(`model ${modelId} is not in this machine's config`);
  const parallel = Math.max(...options.levels);
  const plans = new Plans(options.seconds);

  // One model loaded at a time: the server is stopped before the engine starts, the engine before the raw decode.
  const service = options.phases.includes("http")
    ? await httpPhase(options, modelId, parallel, plans)
    : undefined;
  const engine =
    options.phases.includes("engine") && configured !== undefined
      ? await enginePhase(options, { ...configured, parallel }, config, plans)
      : undefined;
  let decodeCost: DecodeCostRow[] = [];
  let decodeBuild: string | undefined;
  let decodeNoise: CpuNoise | undefined;
  if (options.phases.includes("decode") && configured !== undefined) {
    log(`decode cost: B = ${DECODE_BATCHES.join(", ")}`);
    const modelPath = await ensureModelFile(configured, { modelsDir: config.modelsDir });
    const meter = startNoiseMeter([process.pid]);
    ({ rows: decodeCost, build: decodeBuild } = await measureDecodeCost({
      modelPath,
      batches: DECODE_BATCHES,
      steps: options.decodeSteps,
      threads: configured.threads,
      gpu: config.gpu ?? "auto",
      gpuLayers: configured.gpuLayers,
      engine: config.engine,
    }));
    decodeNoise = meter();
    if (decodeNoise !== undefined) log(`decode cost: CPU: ${describeNoise(decodeNoise)}`);
  }

  const levels: LevelReport[] = options.levels.map((concurrency) => {
    const s = measured(service?.get(concurrency));
    const e = measured(engine?.get(concurrency));
    return {
      concurrency,
      service: s,
      engine: e,
      batching: representative(engine?.get(concurrency))?.batching,
      ratio: s !== undefined && e !== undefined ? s.tokensPerSecond / e.tokensPerSecond : undefined,
    };
  });
  const report: BenchReport = {
    startedAt,
    machine: {
      cpu: cpus()[0]?.model ?? "unknown CPU",
      cores: usableCores(),
      node: process.version,
      loadAverage,
    },
    model: modelId,
    settings: {
      maxTokens: options.maxTokens,
      seconds: options.seconds,
      repeats: options.repeats,
      parallel,
      decodeSteps: options.decodeSteps,
    },
    levels,
    decodeCost,
    decodeBuild,
    decodeNoise,
    targets: checkTargets(levels, decodeCost),
  };
  // Microbenchmarks of other features, each loading what it needs after the model phases are done.
  let extra = "";
  if (options.phases.includes("anchor")) {
    log("anchor: llama-server and Hearth, interleaved");
    const anchor = await benchAnchor({
      seconds: options.seconds,
      repeats: Math.max(3, options.repeats),
      model: modelId,
    });
    extra += `\n## Anchor: llama.cpp's llama-server and Hearth on the same model\n\n${anchor}\n`;
  }
  if (options.phases.includes("ablation")) {
    log("ablation: llama-server, one setting changed at a time");
    const ablation = await benchAblation({ seconds: options.seconds, repeats: Math.max(2, options.repeats) });
    extra += `\n## Ablation: what each llama-server setting is worth here\n\n${ablation}\n`;
  }
  if (options.phases.includes("prefix")) {
    log("prefix reuse: TTFT warm vs cold");
    extra += `\n## Prefix reuse: a shared 1,000-token system prompt\n\n${await benchPrefixReuse({ model: modelId })}\n`;
  }
  if (options.phases.includes("keys")) {
    log("key verification cost");
    extra += `\n## API key verification\n\n${await benchKeyVerify()}\n`;
  }
  if (options.phases.includes("grammar")) {
    log("grammar cost");
    extra += `\n## Grammar cost (structured output)\n\n${await benchGrammarCost()}\n`;
  }
  if (options.phases.includes("schema")) {
    log("schema compilation: adversarial schemas");
    extra += `\n## Schema compilation (adversarial schemas)\n\n${await benchSchemaWorst()}\n`;
  }
  if (options.phases.includes("limits")) {
    log("rate limiter overhead");
    extra += `\n## Rate limiter overhead (admit + settle)\n\n${await benchLimits()}\n`;
  }
  if (options.phases.includes("overload")) {
    log("overload: 503 latency");
    const overload = await benchOverload({ seconds: options.seconds, model: modelId });
    extra += `\n## Overload (refusal latency)\n\n${overload}\n`;
  }
  if (options.phases.includes("fleet")) {
    log("fleet: a gateway over two workers");
    extra += `\n## Fleet (a gateway over two workers)\n\n${await benchFleet({ seconds: options.seconds, model: modelId })}\n`;
  }
  if (options.phases.includes("gateway")) {
    log(
      "gateway: the relay's own cost against a synthetic upstream, beside a pass-through floor and LiteLLM",
    );
    extra += `\n## Gateway relay cost (synthetic upstream)\n\n${await benchGateway(gatewayOptionsFromEnv())}\n`;
  }
  if (options.phases.includes("soak")) {
    log(`soak: ${options.soakSeconds} s at twice the capacity`);
    const soak = await benchSoak({
      seconds: options.soakSeconds,
      model: modelId,
      threads: options.serverThreads,
    });
    extra += `\n## Soak (${options.soakSeconds} s at twice the capacity)\n\n${soak}\n`;
  }
  if (options.phases.includes("fuzz")) {
    log(`fuzz: ${options.fuzzRequests} mutated requests`);
    const fuzz = await benchFuzz({
      requests: options.fuzzRequests,
      seed: options.fuzzSeed,
      model: modelId,
      threads: options.serverThreads,
    });
    extra += `\n## Fuzz (${options.fuzzRequests} mutated requests)\n\n${fuzz}\n`;
  }
  process.stdout.write(`\n${renderMarkdown(report)}${extra}`);
  const written = await writeReport(report, RESULTS_DIR, extra);
  log(`\nwrote ${written.join(", ")}`);
}

main().catch((err: unknown) => {
  log(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exitCode = 1;
});
