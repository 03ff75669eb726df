// Direct steps on the tuned build (engine.directSteps): a step whose choices all draw an argmax is decoded by the
// step loop itself, one native call drawing every token; any other choice in a step sends the whole step through
// node-llama-cpp's generators. Either way the text is the library's.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { generate } from "../../src/engine/generate.js";
import { findEngineBuild, planEngineBuild } from "../../src/engine/llama/engine-build.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { GenerationRequest, SamplingParams } from "../../src/engine/types.js";
import { greedySampling } from "../support/generation-request.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
const model = { ...base, parallel: 5, contextSize: 512 };
const PROMPTS = ["Tell me a story about a fox.", "How do I cook rice?", "Describe the sea at night."];

/** The same model on the tuned build, with direct steps and without. */
const engines: Record<"direct" | "library", LlamaEngine> = {} as Record<"direct" | "library", LlamaEngine>;

beforeAll(async () => {
  if ((await findEngineBuild(planEngineBuild())) === undefined)
    throw new Error(
      "the tuned engine build is not in the engine cache: run `node bin/hearth.js engine build` first",
    );
  for (const [name, directSteps] of [
    ["direct", true],
    ["library", false],
  ] as const) {
    const engine = new LlamaEngine({
      models: [model],
      engine: { build: "tuned", threadPoolPoll: undefined, directSteps },
      resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
    });
    await engine.start();
    expect(engine.health()[0]).toMatchObject({ ready: true, engineBuild: "tuned" });
    engines[name] = engine;
  }
});

afterAll(async () => {
  for (const engine of Object.values(engines)) await engine.dispose();
});

function request(content: string, sampling: Partial<SamplingParams> = {}, n = 1): GenerationRequest {
  return {
    model: model.id,
    messages: [{ role: "user", content }],
    enableThinking: false,
    n,
    sampling: greedySampling({ maxTokens: 32, ...sampling }),
    cacheScope: "org_direct",
  };
}

/** Each choice's text, and the request's logprob entries. */
async function texts(
  engine: LlamaEngine,
  body: GenerationRequest,
): Promise<{ texts: string[]; logprobs: number }> {
  const out: string[] = [];
  let logprobs = 0;
  for await (const event of (await generate(engine, body)).events) {
    if (event.type !== "delta") continue;
    out[event.choice] = (out[event.choice] ?? "") + event.text;
    logprobs += event.logprobs?.length ?? 0;
  }
  return { texts: out, logprobs };
}

/** Runs `requests` together on `engine`; their texts, and how many decodes the runner made and how many of them were its own. */
async function together(engine: LlamaEngine, requests: GenerationRequest[]) {
  const stats = engine.runner(model.id).stats;
  const before = { decodes: stats.decodes, direct: stats.directDecodes, here: stats.decodesHere };
  const results = await Promise.all(requests.map((body) => texts(engine, body)));
  return {
    results,
    decodes: stats.decodes - before.decodes,
    direct: stats.directDecodes - before.direct,
    here: stats.decodesHere - before.here,
  };
}

describe("direct steps", () => {
  it("decode every step of greedy choices without generators, and generate the library's text", async () => {
    const requests = [...PROMPTS.map((p) => request(p)), request("Name three colours.", {}, 2)];
    const direct = await together(engines.direct, requests);
    const library = await together(engines.library, requests);
    expect(direct.decodes).toBeGreaterThan(32);
    // Every decode, prompts included, was the loop's own; none without the setting.
    expect(direct.direct).toBe(direct.decodes);
    expect(library.direct).toBe(0);
    expect(library.decodes).toBeGreaterThan(32);
    expect(direct.results.map((r) => r.texts)).toEqual(library.results.map((r) => r.texts));
    for (const result of direct.results)
      for (const text of result.texts) expect(text.length).toBeGreaterThan(20);
    // n = 2 greedy: both choices the same text.
    const [first, second] = (direct.results[3] as { texts: string[] }).texts;
    expect(second).toBe(first);
  });

  it("send a step through the library while one of its choices draws otherwise, and go on directly after", async () => {
    const greedy = request(PROMPTS[0] as string, { maxTokens: 48 });
    const alone = await together(engines.direct, [greedy]);
    expect(alone.direct).toBe(alone.decodes);
    // One stream's steps are small: after the first, measured on the decode thread, they run on the JS thread.
    expect(alone.here).toBeGreaterThan(0);
    expect(alone.here).toBeLessThan(alone.direct);
    // Beside it for its first steps: a sampled choice, and a greedy one that asks for logprobs (its draw returns
    // a probability, so it is not an argmax alone).
    const sampled = request(PROMPTS[1] as string, { temperature: 0.8, seed: 5, maxTokens: 6 });
    const withLogprobs = request(PROMPTS[2] as string, { logprobs: 0, maxTokens: 6 });
    const mixed = await together(engines.direct, [greedy, sampled, withLogprobs]);
    // Some steps through the library (while the others ran), the rest direct.
    expect(mixed.direct).toBeGreaterThan(0);
    expect(mixed.direct).toBeLessThan(mixed.decodes);
    // The greedy choice left its generator and took it up again without losing or repeating a token.
    expect(mixed.results[0]?.texts).toEqual(alone.results[0]?.texts);
    // The others generate what they generate with every step through the library.
    const library = await together(engines.library, [greedy, sampled, withLogprobs]);
    expect(mixed.results.map((r) => r.texts)).toEqual(library.results.map((r) => r.texts));
    expect(mixed.results[2]?.logprobs).toBe(6);
    // Greedy with logprobs: the same text as without them.
    const plain = await together(engines.direct, [request(PROMPTS[2] as string, { maxTokens: 6 })]);
    expect(mixed.results[2]?.texts).toEqual(plain.results[0]?.texts);
  });

  it("write each token out before the JS thread waits for the next decode", async () => {
    // Every generation step but the engine's first on the JS thread, however slow the machine (the default bound
    // is 15 ms).
    const engine = new LlamaEngine({
      models: [model],
      engine: { build: "tuned", threadPoolPoll: undefined, directSteps: true, blockingDecodeMs: 100 },
      resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
    });
    await engine.start();
    try {
      const stats = engine.runner(model.id).stats;
      // The engine's first generation step is measured on the decode thread.
      await texts(engine, request(PROMPTS[0] as string, { maxTokens: 4 }));
      const here = stats.decodesHere;
      // The HTTP edge's writer sends what a tick produced on process.nextTick (src/http/sse.ts): it records how
      // many decodes had begun when each token's write went out. The first token comes from the prompt's step on
      // the decode thread (a prompt new to its cache scope); the next steps run on the JS thread, each as soon as
      // the tokens before it were written.
      const decodesAtWrite: number[] = [];
      const before = stats.directDecodes;
      const body = { ...request(PROMPTS[1] as string, { maxTokens: 8 }), cacheScope: "org_write" };
      for await (const event of (await generate(engine, body)).events) {
        if (event.type === "delta") process.nextTick(() => decodesAtWrite.push(stats.directDecodes - before));
      }
      expect(stats.decodesHere).toBeGreaterThan(here);
      // Token k written before a decode after its own began: none waited for the decode of the token after it.
      expect(decodesAtWrite).toEqual(decodesAtWrite.map((_, k) => k + 1));
    } finally {
      await engine.dispose();
    }
  });
});
