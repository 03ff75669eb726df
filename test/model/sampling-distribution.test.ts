// The engine samples from exactly OpenAI's distribution: softmax(logits / temperature) over the whole vocabulary,
// with no hidden top-k. Draws with the engine's own sampler options are checked against the distribution computed
// from the model's raw logits (a chi-square test on fixed seeds), before and after the sampler change that dropped
// the full-vocabulary sort (`topK: 0` then, `unboundedTopK` now); a hidden top-k of 40 must fail the same test.
// vLLM's extensions the same way: top_k, min_p (after temperature) and repetition_penalty (prompt and output tokens)
// each against the distribution vLLM's definition gives from the same logits.
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
import type { SamplingParams } from "../../src/engine/types.js";
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

/** The model's raw logits of the token after the prompt. */
async function rawLogits(): Promise<Map<Token, number>> {
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
    return new Map(logits);
  } finally {
    sequence.dispose();
  }
}

/** softmax(logits / temperature) over the tokens `keep` admits. */
function softmax(
  logits: ReadonlyMap<Token, number>,
  keep: (token: Token) => boolean = () => true,
  temperature = TEMPERATURE,
): Map<Token, number> {
  const kept = [...logits].filter(([token]) => keep(token));
  const max = Math.max(...kept.map(([, logit]) => logit));
  let sum = 0;
  const weights = new Map<Token, number>();
  for (const [token, logit] of kept) {
    const w = Math.exp((logit - max) / temperature);
    weights.set(token, w);
    sum += w;
  }
  for (const [token, w] of weights) weights.set(token, w / sum);
  return weights;
}

/** The tokens by descending logit. */
function ranked(logits: ReadonlyMap<Token, number>): Token[] {
  return [...logits].sort((a, b) => b[1] - a[1]).map(([token]) => token);
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

/**
 * The engine's options for one choice at `seed` (sampling-options.ts), with `noTopK` as given, the request's
 * sampling `overrides` and the tokens the choice has `generated` so far (the draw is then the next one).
 */
function engineOptions(
  noTopK: number,
  overrides: Partial<SamplingParams> = {},
  generated: Token[] = [],
): (seed: number) => SequenceEvaluateOptions {
  const eogTokens = lazyEogTokens(model);
  const sampling = { model, control: new OutputControl(llama, model, eogTokens), eogTokens, noTopK };
  // evaluateOptions reads a choice's index, its structured output (none here) and, with penalties, its tokens.
  const choice = { index: 0, output: undefined, generated, remaining: 16 } as unknown as ChoiceStream;
  return (seed) =>
    evaluateOptions(
      sampling,
      greedySampling({ temperature: TEMPERATURE, topP: 1, seed, ...overrides }),
      undefined,
      choice,
      0,
      prompt,
    );
}

describe("sampling distribution (temperature 1.5, top_p 1)", () => {
  let logits: Map<Token, number>;
  let exact: Map<Token, number>;
  let noTopK: number;
  beforeAll(async () => {
    logits = await rawLogits();
    exact = softmax(logits);
    noTopK = unboundedTopK(sequences[0] as LlamaContextSequence);
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

  it("top_k: no token outside the k most likely; the draws follow softmax over those k", async () => {
    const k = 10;
    const top = new Set(ranked(logits).slice(0, k));
    const drawn = await draw(engineOptions(noTopK, { topK: k }));
    expect(drawn.filter((token) => !top.has(token))).toEqual([]);
    expect(new Set(drawn).size).toBeGreaterThan(5);
    const { z } = chiSquareZ(
      drawn,
      softmax(logits, (token) => top.has(token)),
    );
    expect(z).toBeLessThan(4);
  });

  it("min_p: no token below min_p × the most likely token's probability after temperature (vLLM's order)", async () => {
    const minP = 0.05;
    const pMax = Math.max(...exact.values());
    const kept = (token: Token) => (exact.get(token) ?? 0) >= minP * pMax;
    const drawn = await draw(engineOptions(noTopK, { minP }));
    expect(drawn.filter((token) => !kept(token))).toEqual([]);
    const { z } = chiSquareZ(drawn, softmax(logits, kept));
    expect(z).toBeLessThan(4);
    // min_p before temperature (llama.cpp's own order) would keep fewer: some draws fall in between.
    const atT1 = softmax(new Map([...logits].map(([t, l]) => [t, l * TEMPERATURE])));
    const pMaxT1 = Math.max(...atT1.values());
    expect(drawn.filter((token) => (atT1.get(token) ?? 0) < minP * pMaxT1).length).toBeGreaterThan(0);
  });

  /**
   * The repetition penalty at a lower temperature: at 1.5 this prompt's next token is spread too thinly (its
   * likeliest token, " apple", a prompt word, has 0.8%) for a shift to show in 1024 draws.
   */
  const PENALTY_TEMPERATURE = 0.5;
  const atPenaltyTemperature = (logits: ReadonlyMap<Token, number>) =>
    softmax(logits, () => true, PENALTY_TEMPERATURE);

  /** vLLM's repetition penalty on `penalised` (then a presence penalty), as logits. */
  function penalisedLogits(penalised: ReadonlySet<Token>, penalty: number, presence = 0): Map<Token, number> {
    return new Map(
      [...logits].map(([token, logit]) => [
        token,
        penalised.has(token) ? (logit > 0 ? logit / penalty : logit * penalty) - presence : logit,
      ]),
    );
  }

  /** The likeliest token of the prompt (a token the output does not have), and the likeliest one not in it. */
  function penaltyTargets(): { promptOnly: Token; notInPrompt: Token } {
    const inPrompt = new Set(prompt);
    return {
      promptOnly: ranked(logits).find((token) => inPrompt.has(token)) as Token,
      notInPrompt: ranked(logits).find((token) => !inPrompt.has(token)) as Token,
    };
  }

  it("repetition_penalty: the prompt's and the output's tokens are penalised, as vLLM defines it", async () => {
    const penalty = 1.3;
    const { promptOnly, notInPrompt: generated } = penaltyTargets();
    const before = atPenaltyTemperature(logits);
    expect(before.get(promptOnly)).toBeGreaterThan(0.1);
    const expected = atPenaltyTemperature(penalisedLogits(new Set([...prompt, generated]), penalty));
    expect(expected.get(promptOnly)).toBeLessThan(0.01);

    const drawn = await draw(
      engineOptions(noTopK, { temperature: PENALTY_TEMPERATURE, repetitionPenalty: penalty }, [generated]),
    );
    const share = (token: Token) => drawn.filter((t) => t === token).length / drawn.length;
    // Both move the right way: the token only the prompt has, and the one the output has.
    expect(share(promptOnly)).toBeLessThan((before.get(promptOnly) ?? 0) / 4);
    expect(share(generated)).toBeLessThan((before.get(generated) ?? 0) / 4);
    const { z } = chiSquareZ(drawn, expected);
    expect(z, `chi-square z ${z.toFixed(2)}`).toBeLessThan(4);
    // Control: the unpenalised distribution fails the same test.
    expect(chiSquareZ(drawn, before).z).toBeGreaterThan(4);
  });

  it("repetition_penalty below 1 raises the prompt's tokens", async () => {
    const penalty = 0.8;
    const { promptOnly } = penaltyTargets();
    const before = atPenaltyTemperature(logits);
    const drawn = await draw(
      engineOptions(noTopK, { temperature: PENALTY_TEMPERATURE, repetitionPenalty: penalty }),
    );
    const share = drawn.filter((t) => t === promptOnly).length / drawn.length;
    expect(share).toBeGreaterThan(Math.min(0.9, (before.get(promptOnly) ?? 0) * 2));
    const expected = atPenaltyTemperature(penalisedLogits(new Set(prompt), penalty));
    expect(chiSquareZ(drawn, expected).z).toBeLessThan(4);
  });

  it("repetition_penalty with presence_penalty: both over the output only (the documented difference)", async () => {
    const penalty = 1.3;
    const presence = 0.5;
    const { promptOnly, notInPrompt: generated } = penaltyTargets();
    const drawn = await draw(
      engineOptions(
        noTopK,
        { temperature: PENALTY_TEMPERATURE, repetitionPenalty: penalty, presencePenalty: presence },
        [generated],
      ),
    );
    const outputOnly = atPenaltyTemperature(penalisedLogits(new Set([generated]), penalty, presence));
    expect(chiSquareZ(drawn, outputOnly).z).toBeLessThan(4);
    // The prompt's token keeps its probability: with the prompt penalised too the draws would not fit.
    const withPrompt = atPenaltyTemperature(
      penalisedLogits(new Set([...prompt, generated]), penalty, presence),
    );
    expect(chiSquareZ(drawn, withPrompt).z).toBeGreaterThan(4);
    expect(drawn.filter((t) => t === promptOnly).length).toBeGreaterThan(50);
  });
});
