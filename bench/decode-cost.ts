// The engine's ceiling on this machine: the cost of one llama_decode of B tokens (plus sampling), raw node-llama-cpp.
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import type { EngineSettings, GpuSetting, ModelConfig } from "../src/config/schema.js";
import { loadLlama } from "../src/engine/llama/backend.js";
import { countingStrategy, createRunnerStats, decodeThreads } from "../src/engine/llama/batching.js";
import { usableCores } from "../src/engine/llama/cpu.js";
import { overrideDecodeThreads } from "../src/engine/llama/llama-internals.js";
import { median } from "./stats.js";

export interface DecodeCostRow {
  batch: number;
  /** Median wall time of one step: B sequences × 1 token, decoded together and sampled. */
  msPerStep: number;
  /** Slowest timed step: the machine's stalls show here. */
  maxMsPerStep: number;
  tokensPerSecond: number;
  /** llama_decode calls per step: 1 when the library batched the step as the engine expects. */
  decodesPerStep: number;
}

export interface DecodeCostOptions {
  modelPath: string;
  batches: readonly number[];
  steps: number;
  /** The model's configured thread count (0 = all usable cores), as the engine applies it. */
  threads: number;
  /** The configured backend and the model's GPU layers, as the engine applies them. */
  gpu: GpuSetting;
  gpuLayers: ModelConfig["gpuLayers"];
  /** Which llama.cpp build to load (config `engine`, HEARTH_ENGINE_BUILD); default auto. */
  engine?: EngineSettings | undefined;
}

/** The decode cost, and the llama.cpp build that was measured ("tuned <key>" or "prebuilt"). */
export interface DecodeCost {
  rows: DecodeCostRow[];
  build: string;
}

const PROMPT = "Write a long story about a lighthouse keeper.";
const WARMUP_STEPS = 3;

export async function measureDecodeCost(options: DecodeCostOptions): Promise<DecodeCost> {
  const cores = usableCores();
  const threads = options.threads > 0 ? Math.min(options.threads, cores) : cores;
  const sequences = Math.max(...options.batches);
  const { llama, build } = await loadLlama(options.gpu, cores, options.engine);
  try {
    const model = await llama.loadModel({ modelPath: options.modelPath, gpuLayers: options.gpuLayers });
    const prompt = model.tokenize(PROMPT);
    // Sequence 0 takes part in every batch size: room for its prompt and all of its steps.
    const needed = prompt.length + options.batches.length * (WARMUP_STEPS + options.steps) + 16;
    // llama_decode calls, counted by the batching strategy as the engine's runner counts them.
    const stats = createRunnerStats();
    let batchTokens = 0;
    const context = await model.createContext({
      sequences,
      contextSize: Math.max(256, Math.ceil(needed / 256) * 256),
      batchSize: 512,
      threads,
      // As the engine creates its context, so the kernels are the same.
      flashAttention: true,
      batching: {
        itemPrioritizationStrategy: countingStrategy(stats, (tokens) => {
          batchTokens = tokens;
        }),
      },
    });
    // The engine's thread rule (decodeThreads), so the ceiling is the best this library does, as the engine runs it.
    const pooled = build.build === "tuned";
    overrideDecodeThreads(context, (requested) => decodeThreads(batchTokens, requested, cores, pooled));
    const all: LlamaContextSequence[] = Array.from({ length: sequences }, () => context.getSequence());
    await Promise.all(all.map((s) => s.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1))));
    const last = prompt[prompt.length - 1] as Token;
    // Each generator feeds back the token it sampled on every next(): one token per sequence per step.
    const generators = all.map((s) => s.evaluate([last], { temperature: 0, yieldEogToken: true }));

    const step = async (batch: number) => {
      const start = performance.now();
      // Started in one tick, in ascending sequence id: the library puts them into one decode.
      await Promise.all(generators.slice(0, batch).map((g) => g.next()));
      return performance.now() - start;
    };
    const times = new Map<number, number[]>(options.batches.map((b) => [b, []]));
    const decodeCalls = new Map<number, number>(options.batches.map((b) => [b, 0]));
    for (const batch of options.batches) for (let i = 0; i < WARMUP_STEPS; i++) await step(batch);
    // Batch sizes interleaved step by step, so the machine's noise spreads over all of them alike.
    for (let i = 0; i < options.steps; i++) {
      for (const batch of options.batches) {
        const before = stats.decodes;
        times.get(batch)?.push(await step(batch));
        decodeCalls.set(batch, (decodeCalls.get(batch) ?? 0) + stats.decodes - before);
      }
    }
    const rows = options.batches.map((batch) => {
      const samples = times.get(batch) ?? [];
      const msPerStep = median(samples);
      const decodesPerStep = (decodeCalls.get(batch) ?? 0) / options.steps;
      return {
        batch,
        msPerStep,
        maxMsPerStep: Math.max(...samples),
        tokensPerSecond: (batch * 1000) / msPerStep,
        decodesPerStep,
      };
    });
    await Promise.all(generators.map((g) => g.return()));
    await context.dispose();
    await model.dispose();
    return { rows, build: build.build === "tuned" ? `tuned ${build.key ?? ""}`.trimEnd() : "prebuilt" };
  } finally {
    await llama.dispose();
  }
}
