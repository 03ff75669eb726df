// prompt_cache_key on the embedded engine and the real default model: a keyed conversation keeps its slot while
// another organization's keyed request comes between, where without keys that request overwrites it.
import { afterEach, describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { generate } from "../../src/engine/generate.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { GenerationRequest, UsageCounts } from "../../src/engine/types.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
// Two slots: few enough that a third conversation must overwrite one of the first two. The slots alone: with the
// prompt cache in host memory, an overwritten conversation comes back from there (test/model/engine.test.ts).
const model = { ...base, parallel: 2, maxQueue: 4, contextSize: 1024, promptCacheMiB: 0 };

let engine: LlamaEngine | undefined;

afterEach(async () => {
  await engine?.dispose();
  engine = undefined;
});

/** A fresh engine: every scenario starts from empty slots. */
async function startEngine(): Promise<LlamaEngine> {
  engine = new LlamaEngine({
    models: [model],
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
  await engine.start();
  return engine;
}

const SUPPORT = "You are the support assistant of ACME Logistics. Answer in one short sentence. ".repeat(8);
const BILLING = "You are the billing clerk of a small bakery; you only talk about invoices. ".repeat(8);
const POETRY = "You are a poet who answers every question with a haiku about the sea. ".repeat(8);

function ask(org: string, system: string, question: string, key?: string): GenerationRequest {
  return {
    model: model.id,
    messages: [
      { role: "system", content: system },
      { role: "user", content: question },
    ],
    enableThinking: false,
    n: 1,
    sampling: {
      temperature: 0,
      topP: 1,
      frequencyPenalty: 0,
      presencePenalty: 0,
      seed: 1,
      maxTokens: 1,
      stop: [],
    },
    cacheScope: org,
    ...(key === undefined ? {} : { promptCacheKey: key }),
  };
}

async function usageOf(running: LlamaEngine, request: GenerationRequest): Promise<UsageCounts> {
  let usage: UsageCounts | undefined;
  for await (const event of (await generate(running, request)).events) {
    if (event.type === "usage") usage = event.usage;
  }
  if (usage === undefined) throw new Error("no usage event");
  return usage;
}

/**
 * Org A's support conversation (keyed or not), one of its unkeyed billing chats, then org B's poetry request (keyed or
 * not), then the support conversation's next turn: how many of its prompt tokens were cached.
 */
async function nextTurnCached(keyed: boolean): Promise<{ cached: number; prompt: number }> {
  const running = await startEngine();
  await usageOf(running, ask("org_a", SUPPORT, "Where is parcel 1042?", keyed ? "support-ana" : undefined));
  await usageOf(running, ask("org_a", BILLING, "Is invoice 7 paid?"));
  await usageOf(running, ask("org_b", POETRY, "What is the sea?", keyed ? "poems" : undefined));
  const next = await usageOf(
    running,
    ask("org_a", SUPPORT, "And parcel 1043?", keyed ? "support-ana" : undefined),
  );
  return { cached: next.cachedTokens, prompt: next.promptTokens };
}

describe("prompt_cache_key on the embedded engine", () => {
  it("keeps a keyed conversation's slot where an unkeyed one is overwritten", async () => {
    // Without keys, org B's request takes the least recently used slot: the support conversation's.
    const unkeyed = await nextTurnCached(false);
    expect(unkeyed.cached).toBeLessThan(20);
    // With keys, it takes the slot no key holds (the billing chat's), and the support conversation finds its
    // system prompt again.
    const keyed = await nextTurnCached(true);
    expect(keyed.cached).toBeGreaterThan(100);
    expect(keyed.cached).toBeLessThan(keyed.prompt);
  }, 120_000);

  it("never reuses another organization's cache for the same key", async () => {
    const running = await startEngine();
    await usageOf(running, ask("org_a", SUPPORT, "Where is parcel 1042?", "shared-key"));
    const other = await usageOf(running, ask("org_b", SUPPORT, "Where is parcel 1042?", "shared-key"));
    expect(other.cachedTokens).toBe(0);
    const same = await usageOf(running, ask("org_a", SUPPORT, "Where is parcel 1043?", "shared-key"));
    expect(same.cachedTokens).toBeGreaterThan(100);
  }, 120_000);
});
