// The llama engine's drain on the real default model: it waits for the queued and running requests, resolves when
// the last one ends (woken by that end, not by a timer) and refuses new ones meanwhile.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { QueueFullError } from "../../src/engine/errors.js";
import { generate } from "../../src/engine/generate.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { Generation, GenerationRequest } from "../../src/engine/types.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
// One sequence: the second request waits in the queue while the first runs.
const model = { ...base, parallel: 1, maxQueue: 4, contextSize: 512 };

let engine: LlamaEngine;

beforeAll(async () => {
  engine = new LlamaEngine({
    models: [model],
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
  await engine.start();
});

afterAll(async () => {
  await engine?.dispose();
});

function request(maxTokens: number): GenerationRequest {
  return {
    model: model.id,
    messages: [{ role: "user", content: "Tell me a story." }],
    enableThinking: false,
    n: 1,
    sampling: {
      temperature: 0,
      topP: 1,
      frequencyPenalty: 0,
      presencePenalty: 0,
      seed: 42,
      maxTokens,
      stop: [],
      ignoreEos: true,
    },
    cacheScope: "org_a",
  };
}

/** Resolves when the generation's stream has ended (the engine closed it), read or not. */
function ended(generation: Generation): Promise<void> {
  return new Promise((resolve) =>
    generation.events.observe({ value: () => undefined, end: () => resolve() }),
  );
}

async function read(generation: Generation): Promise<number> {
  let tokens = 0;
  for await (const event of generation.events)
    if (event.type === "usage") tokens = event.usage.completionTokens;
  return tokens;
}

describe("llama engine drain", () => {
  it("resolves when the last queued or running request ends, not before; refuses new ones meanwhile", async () => {
    const runner = engine.runner(model.id);
    const first = await generate(engine, request(16));
    // Prepared and queued behind the first: enqueue resolves only once it holds the sequence.
    const second = generate(engine, request(48));
    await expect.poll(() => runner.queueDepth).toBe(1);

    let drained = false;
    const draining = engine.drain().then(() => {
      drained = true;
    });
    await expect(generate(engine, request(4))).rejects.toBeInstanceOf(QueueFullError);

    const firstEnded = ended(first);
    expect(await read(first)).toBe(16);
    await firstEnded;
    const admitted = await second;
    expect(drained).toBe(false);

    const secondEnded = ended(admitted);
    const reading = read(admitted);
    await secondEnded;
    // Woken by the last stream's end: a few promise callbacks later, with no timer or I/O turn in between.
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(drained).toBe(true);
    expect(await reading).toBe(48);
    await draining;
    expect(runner.load()).toMatchObject({ busySequences: 0, queueDepth: 0 });
  });
});
