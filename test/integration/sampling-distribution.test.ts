// The engine samples from exactly OpenAI's distribution: softmax(logits / temperature) over the whole vocabulary,
// with no hidden top-k. Draws with the engine's own sampler options are checked against the distribution computed
// from the model's raw logits (a chi-square test on fixed seeds), before and after the sampler change that dropped
// the full-vocabulary sort (`topK: 0` then, `unboundedTopK` now); a hidden top-k of 40 must fail the same test.
import type {
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaModel,
  SequenceEvaluateOptions,
  Token,
} from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sequenceOrderStrategy } from "../../src/engine/llama/batching.js";
import type { ChoiceStream } from "../../src/engine/llama/choice-stream.js";
import { usableCores } from "../../src/engine/llama/cpu.js";
import { unboundedTopK } from "../../src/engine/llama/llama-internals.js";
import { OutputControl } from "../../src/engine/llama/output-control.js";
import { evaluateOptions, lazyEogTokens } from "../../src/engine/llama/sampling-options.js";
import { greedySampling } from "../support/generation-request.js";
import { loadDefaultModel } from "../support/llama-engine.js";

/** Sequences drawing at once: one batched decode per round of draws. */
const SEQUENCES = 16;
const DRAWS = 1024;
const TEMPERATURE = 1.5;
/** A prompt whose next token is spread over many tokens, so a truncation shows. */
const PROMPT = "Here is a list of random English words: apple, river,";

let llama: Llama;
let model: LlamaModel;
let context: LlamaContext;
let sequences: LlamaContextSequence[];
let prompt: Token[];

beforeAll(async () => {
  ({ llama, model } = await loadDefaultModel());
  // One more sequence for the exact distribution.
  context = await model.createContext({
    sequences: SEQUENCES + 1,
    contextSize: (SEQUENCES + 1) * 64,
    flashAttention: true,
    threads: usableCores(),
    // As the engine builds its batches: the engine's evaluation priorities are sequence ids.
    batching: { itemPrioritizationStrategy: sequenceOrderStrategy },
  });
  sequences = Array.from({ length: SEQUENCES }, () => context.getSequence());
  prompt = model.tokenize(PROMPT);
  // Every sequence holds the prompt but its last token; each draw evaluates that token and samples.
  await Promise.all(sequences.map((s) => s.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1))));
});

afterAll(async () => {
  await context?.dispose();
  await model?.dispose();
  await llama?.dispose();
});

/** softmax(logits / temperature) of the token after the prompt, from the model's raw logits. */
async function exactDistribution(): Promise<Map<Token, number>> {
  const sequence = context.getSequence();
  try {
    const last = prompt.length - 1;
    const input = [
      ...prompt.slice(0, last),
      [prompt[last] as Token, { generateNext: { logits: true } }] as const,
    ];
    const output = await sequence.controlledEvaluate(
      input as Parameters<typeof sequence.controlledEvaluate>[0],
    );
    const logits = output[last]?.next.logits;
    if (logits === undefined) throw new Error("no logits");
    const max = Math.max(...logits.values());
    let sum = 0;
    const weights = new Map<Token, number>();
    for (const [token, logit] of logits) {
      const w = Math.exp((logit - max) / TEMPERATURE);
      weights.set(token, w);
      sum += w;
    }
    for (const [token, w] of weights) weights.set(token, w / sum);
    return weights;
  } finally {
    sequence.dispose();
  }
}

/** The first token drawn with `options(seed)`, for seeds 1..DRAWS. */
async function draw(options: (seed: number) => SequenceEvaluateOptions): Promise<Token[]> {
  const last = prompt[prompt.length - 1] as Token;
  const drawn: Token[] = [];
  for (let round = 0; round < DRAWS / SEQUENCES; round++) {
    const generators = sequences.map((s, i) =>
      s.evaluate([last], { ...options(1 + round * SEQUENCES + i), yieldEogToken: true }),
    );
    const results = await Promise.all(generators.map((g) => g.next()));
    await Promise.all(generators.map((g) => g.return()));
    for (const result of results) if (result.done !== true) drawn.push(result.value);
    // Back to the prompt: the draw's token leaves the sequence.
    await Promise.all(
      sequences.map((s) => s.eraseContextTokenRanges([{ start: prompt.length - 1, end: s.nextTokenIndex }])),
    );
  }
  return drawn;
}

/**
 * Pearson's chi-square of `drawn` against `expected`: one bucket per token expected at least 5 times, the rest in
 * one bucket. Returns the Wilson–Hilferty z score (≈ standard normal when the draws follow `expected`).
 */
function chiSquareZ(
  drawn: Token[],
  expected: Map<Token, number>,
): { z: number; buckets: number; rest: number } {
  const n = drawn.length;
  const counts = new Map<Token, number>();
  for (const token of drawn) counts.set(token, (counts.get(token) ?? 0) + 1);
  const ranked = [...expected].sort((a, b) => b[1] - a[1]);
  let statistic = 0;
  let buckets = 0;
  let restExpected = 0;
  let restObserved = n;
  for (const [token, p] of ranked) {
    if (n * p < 5) break;
    const observed = counts.get(token) ?? 0;
    statistic += (observed - n * p) ** 2 / (n * p);
    restObserved -= observed;
    buckets++;
  }
  restExpected = n - ranked.slice(0, buckets).reduce((sum, [, p]) => sum + n * p, 0);
  statistic += (restObserved - restExpected) ** 2 / Math.max(restExpected, 1e-9);
  const k = buckets; // degrees of freedom: buckets + rest − 1
  const z = ((statistic / k) ** (1 / 3) - (1 - 2 / (9 * k))) / Math.sqrt(2 / (9 * k));
  return { z, buckets, rest: restExpected / n };
}

/** The engine's options for one choice at `seed` (sampling-options.ts), with `topK` as given. */
function engineOptions(topK: number): (seed: number) => SequenceEvaluateOptions {
  const eogTokens = lazyEogTokens(model);
  const sampling = { model, control: new OutputControl(llama, model, eogTokens), eogTokens, noTopK: topK };
  // evaluateOptions reads a choice's index, its structured output (none here) and, with penalties, its tokens.
  const choice = { index: 0, output: undefined, generated: [] } as unknown as ChoiceStream;
  return (seed) =>
    evaluateOptions(
      sampling,
      greedySampling({ temperature: TEMPERATURE, topP: 1, seed }),
      undefined,
      choice,
      0,
    );
}

describe("sampling distribution (temperature 1.5, top_p 1)", () => {
  let exact: Map<Token, number>;
  beforeAll(async () => {
    exact = await exactDistribution();
  });

  it("the prompt spreads its next token widely (else a hidden top-k could not show)", () => {
    const top40 = [...exact.values()].sort((a, b) => b - a).slice(0, 40);
    expect(1 - top40.reduce((a, b) => a + b, 0)).toBeGreaterThan(0.1);
  });

  it("the engine's options leave top-k out of the chain on this library version", () => {
    expect(engineOptions(unboundedTopK(sequences[0] as LlamaContextSequence))(1).topK).toBeNull();
  });

  it("after: draws with the engine's options follow softmax(logits / T) over the whole vocabulary", async () => {
    const drawn = await draw(engineOptions(unboundedTopK(sequences[0] as LlamaContextSequence)));
    expect(drawn).toHaveLength(DRAWS);
    const { z, buckets, rest } = chiSquareZ(drawn, exact);
    expect(buckets).toBeGreaterThanOrEqual(5);
    expect(rest).toBeGreaterThan(0.1);
    expect(z, `chi-square z ${z.toFixed(2)} over ${buckets} buckets`).toBeLessThan(4);
  });

  it("before: draws with a top-k over the whole vocabulary (the sorted path) follow the same distribution", async () => {
    const { z } = chiSquareZ(await draw(engineOptions(0)), exact);
    expect(z).toBeLessThan(4);
  });

  it("control: a hidden top-k of 40 fails the same test", async () => {
    const { z } = chiSquareZ(await draw(engineOptions(40)), exact);
    expect(z).toBeGreaterThan(4);
  });
});
