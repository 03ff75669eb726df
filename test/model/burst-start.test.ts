// Requests sent together start in one step (StepLoop's gather): the step that would start the first one waits, a
// bounded moment, for the others still being prepared, instead of running without them and making them wait a
// whole step for their first token. So do the follow-ups of streams that ended in one step (closed-loop clients).
// A request queued for want of a slot starts with them when the copy that held its slot is done (prepareNewJobs).
import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import type { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { LlamaPreparedRequest } from "../../src/engine/llama/prepared-request.js";
import { chooseSlots } from "../../src/engine/llama/slot-choice.js";
import type { Generation, GenerationRequest, UsageCounts } from "../../src/engine/types.js";
import { greedySampling } from "../support/generation-request.js";
import { llamaEngine } from "../support/llama-engine.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
const model = { ...base, parallel: 4, contextSize: 1024 };
const PROMPTS = [
  "Tell me a story about a fox.",
  "How do I cook rice?",
  "Describe the sea at night.",
  "Name three colours.",
];
const MAX_TOKENS = 8;

let engine: LlamaEngine;

beforeAll(async () => {
  engine = llamaEngine({ ...config, models: [model] });
  await engine.start();
});

afterAll(async () => {
  await engine.dispose();
});

function request(content: string, maxTokens = MAX_TOKENS): GenerationRequest {
  return {
    model: model.id,
    messages: [{ role: "user", content }],
    enableThinking: false,
    n: 1,
    // Every request runs to its budget: the steps counted are the steps of these requests alone.
    sampling: greedySampling({ maxTokens, ignoreEos: true }),
    cacheScope: "org_burst",
  };
}

async function usageOf(generation: Generation): Promise<UsageCounts | undefined> {
  let usage: UsageCounts | undefined;
  for await (const event of generation.events) if (event.type === "usage") usage = event.usage;
  return usage;
}

async function completionTokens(generation: Generation): Promise<number> {
  return (await usageOf(generation))?.completionTokens ?? 0;
}

describe("a burst of requests", () => {
  it("starts in one step though its requests reach the queue one event-loop turn apart", async () => {
    const stats = engine.runner(model.id).stats;
    const prepared = await Promise.all(PROMPTS.map((p) => engine.prepare(request(p))));
    const before = stats.steps;
    const generations: Promise<Generation>[] = [];
    for (const one of prepared) {
      generations.push(engine.enqueue(one));
      // Time for the loop to start a step for what is queued: without the gather, the first request's step
      // would run alone and the others would start one step later.
      await nextTurn();
    }
    const tokens = await Promise.all((await Promise.all(generations)).map(completionTokens));
    expect(tokens).toEqual(PROMPTS.map(() => MAX_TOKENS));
    // One step evaluated every prompt and drew each first token, then one step per further token.
    expect(stats.steps - before).toBe(MAX_TOKENS);
  });

  it("waits for the next requests of clients whose streams ended in one step, the others generating meanwhile", async () => {
    const stats = engine.runner(model.id).stats;
    const before = { startSteps: stats.startSteps, startedJobs: stats.startedJobs };
    // One long stream and three short ones, started together: the short ones end in one step while the long one
    // still generates. Each short one's client sends its next request when its stream ends, 5 ms after the one
    // before (clients are not read in one event-loop turn), by which time the loop could have run a step or two.
    const [long, ...short] = await Promise.all(
      PROMPTS.map((p, i) => engine.prepare(request(p, i === 0 ? 6 * MAX_TOKENS : MAX_TOKENS))),
    );
    const client = async (index: number, first: typeof long): Promise<number[]> => {
      const tokens = [await completionTokens(await engine.enqueue(first as NonNullable<typeof first>))];
      await sleep(5 * index);
      const next = await engine.prepare(request(PROMPTS[index] as string));
      tokens.push(await completionTokens(await engine.enqueue(next)));
      return tokens;
    };
    const longTokens = engine.enqueue(long as NonNullable<typeof long>).then(completionTokens);
    const shortTokens = await Promise.all(short.map((first, i) => client(i + 1, first)));
    expect(await longTokens).toBe(6 * MAX_TOKENS);
    expect(shortTokens).toEqual(short.map(() => [MAX_TOKENS, MAX_TOKENS]));
    // Two steps started jobs: the first four together, then the three follow-ups together.
    expect(stats.startedJobs - before.startedJobs).toBe(7);
    expect(stats.startSteps - before.startSteps).toBe(2);
  });

  it("waits for a request received whose model is not known yet (its body still being read)", async () => {
    const stats = engine.runner(model.id).stats;
    const before = { startSteps: stats.startSteps, startedJobs: stats.startedJobs };
    // The fourth request was received with the others (the completions service's start) and takes 15 ms longer to
    // be read and keyed; the first three are prepared and queued meanwhile, and nothing else is being prepared.
    const arrived = engine.expectRequest();
    const first = await Promise.all(PROMPTS.slice(0, 3).map((p) => engine.prepare(request(p))));
    const generations = first.map((one) => engine.enqueue(one));
    await sleep(15);
    const last = await engine.prepare(request(PROMPTS[3] as string));
    arrived();
    generations.push(engine.enqueue(last));
    const tokens = await Promise.all((await Promise.all(generations)).map(completionTokens));
    expect(tokens).toEqual(PROMPTS.map(() => MAX_TOKENS));
    expect(stats.startedJobs - before.startedJobs).toBe(4);
    expect(stats.startSteps - before.startSteps).toBe(1);
  });

  it("does not wait for a prepared request that is never queued", async () => {
    const stats = engine.runner(model.id).stats;
    const [queued, abandoned] = await Promise.all([
      engine.prepare(request(PROMPTS[0] as string)),
      engine.prepare(request(PROMPTS[1] as string)),
    ]);
    expect(abandoned).toBeDefined();
    const before = stats.steps;
    expect(await completionTokens(await engine.enqueue(queued as NonNullable<typeof queued>))).toBe(
      MAX_TOKENS,
    );
    expect(stats.steps - before).toBe(MAX_TOKENS);
  });
});

describe("a burst on a full pool", () => {
  it("starts a request queued for want of a slot in the same step, when a copy frees the slot it waited for", async () => {
    const stats = engine.runner(model.id).stats;
    const scope = "org_copy_source";
    const system = "You are a careful assistant for a small bakery. Answer in one short sentence, politely.";
    const ask = (content: string): GenerationRequest => ({
      ...request(content),
      messages: [
        { role: "system", content: system },
        { role: "user", content },
      ],
      cacheScope: scope,
    });
    // A conversation on the system prompt ends; its slot keeps it.
    const warm = await engine.prepare(ask("When do you open on Sundays?"));
    expect(await completionTokens(await engine.enqueue(warm as NonNullable<typeof warm>))).toBe(MAX_TOKENS);
    // The first request of the burst shares the system prompt and goes another way: it leases a second slot and
    // copies the prefix into it, keeping the conversation, and holds the conversation's slot until the copy is done.
    // Two requests take the two slots left; the fourth waits in the queue for a slot.
    const prepared = await Promise.all([
      engine.prepare(ask("Do you bake rye bread?")),
      ...PROMPTS.slice(1).map((p) => engine.prepare(request(p))),
    ]);
    // What the pool holds now makes that lease (else the burst would fit and the test would show nothing).
    const first = prepared[0] as LlamaPreparedRequest;
    const lease = chooseSlots(engine.runner(model.id).slotViews(), first.prompt, scope, 1);
    expect(lease?.source?.leased).toBe(true);
    const before = { startSteps: stats.startSteps, startedJobs: stats.startedJobs };
    const generations = prepared.map((one) => engine.enqueue(one as NonNullable<typeof one>));
    const usages = await Promise.all((await Promise.all(generations)).map(usageOf));
    expect(usages.map((u) => u?.completionTokens)).toEqual(prepared.map(() => MAX_TOKENS));
    // The first one started from the copied prefix.
    expect(usages[0]?.cachedTokens).toBeGreaterThan(0);
    // The copy done, the step admitted the fourth into the slot it freed and started all four together.
    expect(stats.startedJobs - before.startedJobs).toBe(4);
    expect(stats.startSteps - before.startSteps).toBe(1);
  });
});
