// Where one stream's time per token goes (issue 13, item 3): the engine in-process on the default model, one stream
// at a time, 128 tokens per request; each addon decode and sampling call timed (traceNativeCalls), and the main
// thread's share between them. `node --import tsx bench/step-profile.ts` prints the table for temperature 0 (an
// argmax) and 1 (a draw); BENCH_PROFILE_TOPK0=1 samples as before issue 13 (a top-k over the whole vocabulary).
import { cpus } from "node:os";
import { loadConfig } from "../src/config/load.js";
import { generate } from "../src/engine/generate.js";
import type { LlamaEngine } from "../src/engine/llama/llama-engine.js";
import { type NativeCall, traceNativeCalls } from "../src/engine/llama/llama-internals.js";
import { generationRequest, greedySampling } from "../test/support/generation-request.js";
import { llamaEngine } from "../test/support/llama-engine.js";
import { percentile } from "./stats.js";
import { PROMPTS } from "./workload.js";

const REQUESTS = 6;
const MAX_TOKENS = 128;

interface Phase {
  name: string;
  samples: number[];
}

async function profile(engine: LlamaEngine, model: string, calls: NativeCall[], temperature: number) {
  const run = async (i: number) => {
    const generation = await generate(
      engine,
      generationRequest(model, {
        messages: [{ role: "user", content: PROMPTS[i % PROMPTS.length] as string }],
        sampling: greedySampling({ seed: 7 + i, maxTokens: MAX_TOKENS, temperature }),
        cacheScope: "profile",
      }),
    );
    let tokens = 0;
    for await (const event of generation.events)
      if (event.type === "usage") tokens = event.usage.completionTokens;
    return tokens;
  };
  await run(0);
  const phases: Phase[] = [
    "decode",
    "sampling",
    "decode end → sampling",
    "sampled → next decode",
    "per token",
  ].map((name) => ({ name, samples: [] }));
  const [decode, sampling, toSample, between, perToken] = phases as [Phase, Phase, Phase, Phase, Phase];
  let tokens = 0;
  const started = performance.now();
  for (let i = 1; i <= REQUESTS; i++) {
    calls.length = 0;
    tokens += await run(i);
    // One stream: the calls alternate decode, sample; the prompt's decode comes first.
    let last: NativeCall | undefined;
    let lastDecode: NativeCall | undefined;
    for (const call of calls) {
      if (call.kind === "decode") {
        decode.samples.push(call.end - call.start);
        if (last?.kind === "sample") between.samples.push(call.start - last.end);
        if (lastDecode !== undefined) perToken.samples.push(call.start - lastDecode.start);
        lastDecode = call;
      } else {
        sampling.samples.push(call.end - call.start);
        if (last?.kind === "decode") toSample.samples.push(call.start - last.end);
      }
      last = call;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  return { phases, tokensPerSecond: tokens / seconds };
}

async function main(): Promise<void> {
  const config = loadConfig();
  const base = config.models[0];
  if (base === undefined) throw new Error("no model configured");
  const model = { ...base, parallel: 16 };
  const engine = llamaEngine({ ...config, models: [model] });
  await engine.start();
  try {
    const runner = engine.runners()[0];
    if (runner === undefined) throw new Error("no runner");
    const calls: NativeCall[] = [];
    if (!traceNativeCalls(runner.context, (call) => calls.push(call)))
      throw new Error("no native calls to trace");
    if (process.env.BENCH_PROFILE_TOPK0 === "1") {
      // As before issue 13: a top-k over the whole vocabulary (sorts every logit before each draw).
      (runner as unknown as { loop: { sampling: { noTopK: number } } }).loop.sampling.noTopK = 0;
    }
    const lines = [
      `One stream, ${REQUESTS} requests of ${MAX_TOKENS} tokens, in-process engine (no HTTP), ${cpus()[0]?.model ?? "CPU"}; ms per token, p50 / p95.`,
      "",
      "| temperature | tok/s | decode | sampling | decode end → sampling | sampled → next decode | per token |",
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ];
    for (const temperature of [0, 1]) {
      const { phases, tokensPerSecond } = await profile(engine, model.id, calls, temperature);
      const cell = (p: Phase) =>
        `${percentile(p.samples, 50).toFixed(2)} / ${percentile(p.samples, 95).toFixed(2)}`;
      lines.push(`| ${temperature} | ${tokensPerSecond.toFixed(1)} | ${phases.map(cell).join(" | ")} |`);
    }
    process.stdout.write(`${lines.join("\n")}\n`);
  } finally {
    await engine.dispose();
  }
}

await main();
