// The llama engine on the real default model, in-process: batching, prefix reuse, n>1, seeds, limits, aborts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { ContextOverflowError, QueueFullError } from "../../src/engine/errors.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { ModelRunner } from "../../src/engine/llama/model-runner.js";
import type {
  Generation,
  GenerationEvent,
  GenerationRequest,
  SamplingParams,
} from "../../src/engine/types.js";
import { ensureModelFile } from "../../src/models/fetch.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
const model = { ...base, parallel: 4, maxQueue: 2, contextSize: 1024, prefillChunk: 64 };

let engine: LlamaEngine;
let runner: ModelRunner;

beforeAll(async () => {
  engine = new LlamaEngine({
    models: [model],
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
  await engine.start();
  runner = engine.runner(model.id);
});

afterAll(async () => {
  await engine?.dispose();
});

function sampling(overrides: Partial<SamplingParams> = {}): SamplingParams {
  return {
    temperature: 0,
    topP: 1,
    frequencyPenalty: 0,
    presencePenalty: 0,
    seed: 42,
    maxTokens: 24,
    stop: [],
    ...overrides,
  };
}

function request(content: string, overrides: Partial<GenerationRequest> = {}): GenerationRequest {
  return {
    model: model.id,
    messages: [{ role: "user", content }],
    enableThinking: false,
    n: 1,
    sampling: sampling(),
    cacheScope: "org_a",
    ...overrides,
  };
}

interface Collected {
  texts: string[];
  reasons: string[];
  events: GenerationEvent[];
  usage: { promptTokens: number; completionTokens: number; cachedTokens: number };
}

async function collect(generation: Generation): Promise<Collected> {
  const texts: string[] = [];
  const reasons: string[] = [];
  const events: GenerationEvent[] = [];
  let usage: Collected["usage"] | undefined;
  for await (const event of generation.events) {
    events.push(event);
    if (event.type === "delta") texts[event.choice] = (texts[event.choice] ?? "") + event.text;
    else if (event.type === "finish") reasons[event.choice] = event.reason;
    else usage = event.usage;
  }
  if (usage === undefined) throw new Error("no usage event");
  return { texts, reasons, events, usage };
}

describe("llama engine on the real model", () => {
  it("answers a question greedily and reports usage", async () => {
    const result = await collect(
      await engine.generate(
        request("", {
          messages: [
            { role: "system", content: "You are a helpful assistant." },
            { role: "user", content: "What is the capital of France?" },
          ],
        }),
      ),
    );
    expect(result.texts[0]).toMatch(/Paris/);
    expect(result.usage.promptTokens).toBeGreaterThan(10);
    expect(result.usage.completionTokens).toBeGreaterThan(0);
  });

  it("puts every active sequence's next token into one decode per step", async () => {
    const before = { ...runner.stats };
    const prompts = ["Count to ten.", "Name three colors.", "Describe a cat.", "Say hello."];
    const results = await Promise.all(
      prompts.map(async (p) =>
        collect(
          await engine.generate(request(p, { sampling: sampling({ maxTokens: 40, ignoreEos: true }) })),
        ),
      ),
    );
    for (const r of results) expect(r.usage.completionTokens).toBe(40);
    const steps = runner.stats.generationSteps - before.generationSteps;
    const tokens = runner.stats.generationStepTokens - before.generationStepTokens;
    const decodes = runner.stats.generationStepDecodes - before.generationStepDecodes;
    expect(steps).toBeGreaterThan(30);
    // One llama_decode per generation step, carrying every active sequence's token.
    expect(decodes).toBe(steps);
    expect(tokens / decodes).toBeGreaterThan(3.8);
  });

  it("gives identical text for the same seed and different text for different seeds", async () => {
    const hot = (seed: number) =>
      request("Write a short poem about the sea.", {
        sampling: sampling({ temperature: 1, seed, maxTokens: 30 }),
      });
    const [a, b, c] = await Promise.all([
      engine.generate(hot(7)).then(collect),
      engine.generate(hot(7)).then(collect),
      engine.generate(hot(8)).then(collect),
    ]);
    expect(a.texts[0]).toBe(b.texts[0]);
    expect(a.texts[0]).not.toBe(c.texts[0]);
  });

  it("n > 1 copies the evaluated prompt and samples different choices", async () => {
    const result = await collect(
      await engine.generate(
        request("Invent a name for a dog.", {
          n: 3,
          sampling: sampling({ temperature: 1.2, maxTokens: 16 }),
        }),
      ),
    );
    expect(result.texts).toHaveLength(3);
    expect(result.reasons).toHaveLength(3);
    expect(new Set(result.texts).size).toBeGreaterThan(1);
    const perChoice = result.events.filter((e) => e.type === "finish").map((e) => e.choice);
    expect(perChoice.sort()).toEqual([0, 1, 2]);
  });

  it("reuses a cached prefix within an organization, never across organizations", async () => {
    const system = "You are a meticulous assistant. ".repeat(20);
    const convo = (question: string, scope: string) =>
      request("", {
        cacheScope: scope,
        messages: [
          { role: "system", content: system },
          { role: "user", content: question },
        ],
      });
    const first = await collect(await engine.generate(convo("What is 2+2?", "org_prefix")));
    expect(first.usage.cachedTokens).toBe(0);
    const second = await collect(await engine.generate(convo("What is 3+3?", "org_prefix")));
    expect(second.usage.cachedTokens).toBeGreaterThan(100);
    const other = await collect(await engine.generate(convo("What is 3+3?", "org_other")));
    expect(other.usage.cachedTokens).toBe(0);
  });

  it("stops before a stop string and never emits it", async () => {
    const result = await collect(
      await engine.generate(
        request("List the numbers from 1 to 10, separated by commas.", {
          sampling: sampling({ stop: ["5"], maxTokens: 60 }),
        }),
      ),
    );
    expect(result.reasons[0]).toBe("stop");
    expect(result.texts[0] ?? "").not.toContain("5");
    expect(result.texts[0]).toMatch(/4/);
  });

  it("refuses prompt + max_tokens beyond the context", async () => {
    await expect(
      engine.generate(request("hi", { sampling: sampling({ maxTokens: 1020 }) })),
    ).rejects.toBeInstanceOf(ContextOverflowError);
    await expect(engine.generate(request("word ".repeat(1100)))).rejects.toBeInstanceOf(ContextOverflowError);
  });

  it("rejects beyond the bounded queue and frees sequences when a request is aborted", async () => {
    const long = () => sampling({ maxTokens: 400, ignoreEos: true });
    const controllers = Array.from({ length: 6 }, () => new AbortController());
    const running = await Promise.all(
      controllers.map((ac) =>
        engine.generate(request("Tell me a story.", { sampling: long(), signal: ac.signal })),
      ),
    );
    expect(runner.busySlots).toBe(4);
    expect(runner.queueDepth).toBe(2);
    await expect(engine.generate(request("one more"))).rejects.toBeInstanceOf(QueueFullError);
    // Let generation start, then cancel everything: every sequence must come back.
    const firstTokens = running[0]?.events[Symbol.asyncIterator]().next();
    await firstTokens;
    for (const ac of controllers) ac.abort();
    const done = await Promise.all(running.slice(1).map(collect));
    for (const r of done) expect(r.usage.completionTokens).toBeLessThan(400);
    await new Promise((r) => setTimeout(r, 200));
    expect(runner.busySlots).toBe(0);
    expect(runner.queueDepth).toBe(0);
  });

  it("prefills a long prompt in chunks while other streams keep decoding", async () => {
    const decoder = await engine.generate(
      request("Tell me a long story.", { sampling: sampling({ maxTokens: 200, ignoreEos: true }) }),
    );
    const order: string[] = [];
    const decoding = (async () => {
      for await (const e of decoder.events) if (e.type === "delta") order.push("old");
    })();
    await new Promise((r) => setTimeout(r, 300));
    const longPrompt = "The quick brown fox jumps over the lazy dog. ".repeat(60);
    const newcomer = await engine.generate(request(longPrompt, { sampling: sampling({ maxTokens: 4 }) }));
    order.push("submitted");
    for await (const e of newcomer.events) if (e.type === "delta") order.push("new");
    await decoding;
    const submitted = order.indexOf("submitted");
    const firstNew = order.indexOf("new");
    const oldBetween = order.slice(submitted, firstNew).filter((x) => x === "old").length;
    // 600+ prompt tokens in chunks of 64: the running stream gets a token at every chunk step.
    expect(oldBetween).toBeGreaterThanOrEqual(5);
  });
});
