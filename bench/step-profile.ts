// Where one stream's time per token goes (issue 13, item 3): the engine in-process on the default model, one stream
// at a time, 128 tokens per request; each addon decode and sampling call timed (traceNativeCalls), and the main
// thread's share between them. `node --import tsx bench/step-profile.ts` prints the table for temperature 0 (an
// argmax) and 1 (a draw); BENCH_PROFILE_TOPK0=1 samples as before issue 13 (a top-k over the whole vocabulary).
// A second table takes C streams at once (BENCH_PROFILE_LEVELS, default 4,16): each llama_decode's time, the main
// thread's gap between decodes, and the time lost to decodes slower than the median (the two-thread tail).
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

/** C requests at once, greedy: per llama_decode, its time and the gap before the next one. */
async function concurrent(engine: LlamaEngine, model: string, calls: NativeCall[], streams: number) {
  const run = async (i: number) => {
    const generation = await generate(
      engine,
      generationRequest(model, {
        messages: [{ role: "user", content: PROMPTS[i % PROMPTS.length] as string }],
        sampling: greedySampling({ maxTokens: MAX_TOKENS, ignoreEos: true }),
        cacheScope: "profile",
      }),
    );
    for await (const _ of generation.events);
  };
  const batch = (offset: number) => Promise.all(Array.from({ length: streams }, (_, i) => run(offset + i)));
  await batch(0);
  calls.length = 0;
  const started = performance.now();
  await batch(1);
  const wall = performance.now() - started;
  const decodes = calls.filter((call) => call.kind === "decode");
  const times = decodes.map((call) => call.end - call.start);
  const gaps = decodes.slice(1).map((call, i) => call.start - (decodes[i] as NativeCall).end);
  const median = percentile(times, 50);
  const tail = times.reduce((sum, t) => sum + Math.max(0, t - median), 0);
  const cell = (values: number[]) =>
    `${percentile(values, 50).toFixed(2)} / ${percentile(values, 95).toFixed(2)}`;
  return (
    `| ${streams} | ${((streams * MAX_TOKENS) / (wall / 1000)).toFixed(1)} | ${decodes.length} | ${cell(times)} | ` +
    `${cell(gaps)} | ${((100 * tail) / wall).toFixed(0)} % |`
  );
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
    const build = (await engine.accelerator())?.build;
    const buildName = build?.build === "tuned" ? `tuned ${build.key}` : (build?.build ?? "unknown");
    const lines = [
      `One stream, ${REQUESTS} requests of ${MAX_TOKENS} tokens, in-process engine (no HTTP), ${cpus()[0]?.model ?? "CPU"}, ${buildName} llama.cpp build (HEARTH_ENGINE_BUILD=prebuilt for the other); ms per token, p50 / p95.`,
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
    const levels = (process.env.BENCH_PROFILE_LEVELS ?? "4,16")
      .split(",")
      .map(Number)
      .filter((n) => n > 0);
    if (levels.length > 0) {
      lines.push(
        "",
        `C streams at once, ${MAX_TOKENS} tokens each, greedy; ms per llama_decode, p50 / p95; "tail": the wall ` +
          "time spent in decodes beyond the median decode.",
        "",
        "| streams | tok/s | decodes | decode | gap between decodes | tail |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
      );
      for (const streams of levels) lines.push(await concurrent(engine, model.id, calls, streams));
    }
    process.stdout.write(`${lines.join("\n")}\n`);
  } finally {
    await engine.dispose();
  }
}

await main();
