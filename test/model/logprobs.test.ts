// logprobs, top_logprobs and logit_bias on both real model families, checked against the model's raw logits: the
// same prompt is evaluated through node-llama-cpp directly and log-softmax is computed here, in float64.
import type { LlamaContext, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelConfig } from "../../src/config/schema.js";
import { UnknownTokenError } from "../../src/engine/errors.js";
import { loadLlama } from "../../src/engine/llama/backend.js";
import { usableCores } from "../../src/engine/llama/cpu.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { LlamaPreparedRequest } from "../../src/engine/llama/prepared-request.js";
import type { GenerationRequest, SamplingParams, TokenLogprob } from "../../src/engine/types.js";
import { generationRequest, greedySampling } from "../support/generation-request.js";
import { GEMMA_MODEL, pullModel, SMOLLM2_MODEL } from "../support/models.js";

/**
 * The engine's probabilities are float32 (a softmax over the vocabulary in the addon); the reference is float64.
 * Measured differences are below 1e-4 for the likely tokens this compares; 2e-3 leaves room without hiding a
 * wrong distribution (a missed bias or penalty moves logprobs by whole units).
 */
const TOLERANCE = 2e-3;

/** The model under test (one describe block at a time): Hearth's engine on it, and node-llama-cpp's own. */
let model: ModelConfig;
let engine: LlamaEngine;
let reference: LlamaModel;
let context: LlamaContext;
let vocabularySize: number;

/** Loads `config` twice: in Hearth's engine and as the reference (the blocks run one after another). */
function useModel(config: ModelConfig) {
  beforeAll(async () => {
    model = { ...config, parallel: 2, contextSize: 512 };
    const path = await pullModel(config);
    engine = new LlamaEngine({ models: [model], resolveModelPath: async () => path });
    await engine.start();
    // The engine's own llama.cpp build (the tuned one when cached): a process holds one, and the reference must
    // compute with the same kernels.
    const { llama } = await loadLlama(false, usableCores());
    reference = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    context = await reference.createContext({ contextSize: 512, sequences: 1, threads: usableCores() });
    vocabularySize = reference.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
  });

  afterAll(async () => {
    await context?.dispose();
    await reference?.dispose();
    await engine?.dispose();
  });
}

const PROMPT = "Name three colours of the rainbow.";

let requests = 0;

/**
 * Each request in a cache scope of its own, so the engine evaluates its whole prompt in one batch, as the reference
 * does. A prompt reused from an earlier request would be evaluated from its last token alone, by the one-token
 * kernels: on an Intel Xeon (AVX-512) that moved Gemma's logprobs by up to 0.085 from the reference's.
 */
function request(sampling: Partial<SamplingParams>, content = PROMPT): GenerationRequest {
  return generationRequest(model.id, {
    messages: [{ role: "user", content }],
    sampling: greedySampling({ maxTokens: 8, ...sampling }),
    cacheScope: `logprobs-${++requests}`,
  });
}

interface Run {
  prompt: Token[];
  content: string;
  logprobs: TokenLogprob[];
  completionTokens: number;
}

async function run(req: GenerationRequest): Promise<Run> {
  const prepared = (await engine.prepare(req)) as LlamaPreparedRequest;
  const generation = await engine.enqueue(prepared);
  let content = "";
  const logprobs: TokenLogprob[] = [];
  let completionTokens = 0;
  for await (const event of generation.events) {
    if (event.type === "delta" && event.target === undefined) {
      content += event.text;
      logprobs.push(...(event.logprobs ?? []));
    }
    if (event.type === "usage") completionTokens = event.usage.completionTokens;
  }
  return { prompt: prepared.prompt, content, logprobs, completionTokens };
}

/** One position's reference: log-softmax by token id, and its largest value. */
interface Reference {
  logprobs: Float64Array;
  best: number;
}

/**
 * log-softmax of the model's raw logits (plus `bias`, divided by `temperature`) after `prompt` + `generated[0..i)`,
 * for each position i. Evaluated as generation evaluates: the prompt in one batch, then one token per decode. One
 * batch of prompt and output (as before) runs other matrix kernels for the output positions than one-token decodes
 * do, and on some CPUs (AVX-512, Gemma's Q4_K) their rounding alone moved a logprob by 7e-3.
 */
async function referenceLogprobs(
  prompt: readonly Token[],
  generated: readonly Token[],
  bias: ReadonlyMap<number, number> = new Map(),
  temperature = 1,
): Promise<Reference[]> {
  const sequence = context.getSequence();
  try {
    const last = prompt.length - 1;
    const first = await sequence.controlledEvaluate(
      prompt.map((token, i) => (i === last ? [token, { generateNext: { logits: true } }] : token)),
    );
    const positions = [first[last]?.next.logits];
    for (const token of generated.slice(0, -1)) {
      const [output] = await sequence.controlledEvaluate([[token, { generateNext: { logits: true } }]]);
      positions.push(output?.next.logits);
    }
    return positions.map((logits, i) => {
      if (logits === undefined) throw new Error(`no logits at output position ${i}`);
      const values = new Float64Array(vocabularySize).fill(Number.NEGATIVE_INFINITY);
      let max = Number.NEGATIVE_INFINITY;
      for (const [token, logit] of logits) {
        const value = (logit + (bias.get(token) ?? 0)) / temperature;
        values[token] = value;
        if (value > max) max = value;
      }
      let sum = 0;
      for (const value of values) sum += Math.exp(value - max);
      const logSum = max + Math.log(sum);
      for (let t = 0; t < values.length; t++) values[t] = (values[t] as number) - logSum;
      return { logprobs: values, best: max - logSum };
    });
  } finally {
    sequence.dispose();
  }
}

/** The `k` most likely tokens of a position, highest first, as [token, logprob] (one pass: no sort of the vocabulary). */
function mostLikely(logprobs: Float64Array, k: number): [Token, number][] {
  const top: [Token, number][] = [];
  logprobs.forEach((logprob, token) => {
    if (top.length === k && logprob <= (top[k - 1]?.[1] as number)) return;
    let at = top.findIndex(([, value]) => logprob > value);
    if (at < 0) at = top.length;
    top.splice(at, 0, [token as Token, logprob]);
    if (top.length > k) top.pop();
  });
  return top;
}

/** The generated tokens, recovered from the content (plain text at temperature 0: no stop, no structure). */
function generatedTokens(result: Run): Token[] {
  const tokens = result.logprobs.map((entry) => {
    const found = reference.tokenize(Buffer.from(entry.bytes).toString("utf8"), false);
    return found;
  });
  // Every entry must be exactly one token of the vocabulary for this reconstruction to stand.
  for (const t of tokens) expect(t).toHaveLength(1);
  return tokens.map((t) => t[0] as Token);
}

describe.each([
  { config: SMOLLM2_MODEL, vocabulary: 49_152 },
  { config: GEMMA_MODEL, vocabulary: 262_144 },
])("logprobs against the raw logits: $config.id", ({ config, vocabulary }) => {
  useModel(config);

  it("at temperature 0 equal log-softmax of the raw logits, with the chosen token the most likely", async () => {
    const result = await run(request({ logprobs: 5 }));
    expect(result.logprobs.length).toBe(result.completionTokens);
    expect(result.logprobs.map((e) => Buffer.from(e.bytes).toString("utf8")).join("")).toBe(result.content);
    const generated = generatedTokens(result);
    const expected = await referenceLogprobs(result.prompt, generated);
    result.logprobs.forEach((entry, i) => {
      const ref = expected[i] as Reference;
      expect(entry.logprob).toBeCloseTo(ref.best, 2);
      expect(Math.abs(entry.logprob - (ref.logprobs[generated[i] as Token] as number))).toBeLessThan(
        TOLERANCE,
      );
      expect(entry.topLogprobs).toHaveLength(5);
      expect(entry.topLogprobs[0]?.token).toBe(entry.token);
      for (let k = 1; k < entry.topLogprobs.length; k++) {
        expect(entry.topLogprobs[k - 1]?.logprob).toBeGreaterThanOrEqual(
          entry.topLogprobs[k]?.logprob as number,
        );
      }
      // The alternatives are the reference's five most likely tokens, with its values.
      const top5 = mostLikely(ref.logprobs, 5);
      entry.topLogprobs.forEach((alt, k) => {
        const [token, logprob] = top5[k] as [Token, number];
        expect(Math.abs(alt.logprob - logprob)).toBeLessThan(TOLERANCE);
        expect(alt.bytes).toEqual([...Buffer.from(reference.detokenize([token], true), "utf8")]);
      });
    });
  });

  it("top_logprobs 0 gives the chosen token's logprob alone, the same value", async () => {
    const withTop = await run(request({ logprobs: 3 }));
    const alone = await run(request({ logprobs: 0 }));
    expect(alone.content).toBe(withTop.content);
    alone.logprobs.forEach((entry, i) => {
      expect(entry.topLogprobs).toEqual([]);
      expect(Math.abs(entry.logprob - (withTop.logprobs[i]?.logprob as number))).toBeLessThan(1e-5);
    });
  });

  it("-100 bans the token greedy picks first; the logprobs are log-softmax of the biased logits", async () => {
    const plain = await run(request({ maxTokens: 4, logprobs: 2 }));
    const first = generatedTokens(plain)[0] as Token;
    const bias = new Map([[first, -100]]);
    const banned = await run(request({ maxTokens: 4, logprobs: 2, logitBias: bias }));
    const generated = generatedTokens(banned);
    expect(generated).not.toContain(first);
    const expected = await referenceLogprobs(banned.prompt, generated, bias);
    banned.logprobs.forEach((entry, i) => {
      const ref = expected[i] as Reference;
      expect(Math.abs(entry.logprob - (ref.logprobs[generated[i] as Token] as number))).toBeLessThan(
        TOLERANCE,
      );
      expect(entry.logprob).toBeCloseTo(ref.best, 2);
    });
    // Without the bias, the banned token was the first choice at the first position.
    expect(plain.logprobs[0]?.topLogprobs[0]?.token).toBe(reference.detokenize([first], true));
  });

  it("+100 forces a token greedy would not pick", async () => {
    const forced = reference.tokenize(" purple", false);
    expect(forced).toHaveLength(1);
    const token = forced[0] as Token;
    const result = await run(request({ maxTokens: 3, logprobs: 1, logitBias: new Map([[token, 100]]) }));
    expect(generatedTokens(result)).toEqual([token, token, token]);
    // Near certainty, as log-softmax of logits that gained 100 says.
    for (const entry of result.logprobs) expect(entry.logprob).toBeGreaterThan(-1e-3);
  });

  it("at temperature > 0 (top_p 1) they are of the distribution drawn from: log-softmax of logits / temperature", async () => {
    for (const temperature of [0.5, 1.5]) {
      const result = await run(request({ temperature, seed: 11, maxTokens: 4, logprobs: 1 }));
      const generated = generatedTokens(result);
      const expected = await referenceLogprobs(result.prompt, generated, new Map(), temperature);
      result.logprobs.forEach((entry, i) => {
        const ref = expected[i] as Reference;
        expect(Math.abs(entry.logprob - (ref.logprobs[generated[i] as Token] as number))).toBeLessThan(
          TOLERANCE,
        );
        expect(Math.abs((entry.topLogprobs[0]?.logprob as number) - ref.best)).toBeLessThan(TOLERANCE);
      });
    }
  });

  it("penalties shape the distribution the logprobs describe", async () => {
    const plain = await run(request({ maxTokens: 12, logprobs: 0 }));
    const penalized = await run(
      request({ maxTokens: 12, logprobs: 0, presencePenalty: 2, frequencyPenalty: 2 }),
    );
    // Same first token (nothing to penalize yet) with the same logprob; later positions differ.
    expect(penalized.logprobs[0]?.logprob).toBeCloseTo(plain.logprobs[0]?.logprob as number, 4);
    expect(penalized.logprobs.map((e) => e.logprob)).not.toEqual(plain.logprobs.map((e) => e.logprob));
  });

  it("a token id outside the vocabulary is refused before anything is queued", async () => {
    expect(vocabularySize).toBe(vocabulary);
    await expect(
      engine.prepare(request({ logitBias: new Map([[vocabularySize, 5]]) })),
    ).rejects.toBeInstanceOf(UnknownTokenError);
    await expect(
      engine.prepare(request({ logitBias: new Map([[vocabularySize - 1, 5]]) })),
    ).resolves.toBeDefined();
  });
});

describe("which tokens are reported", () => {
  useModel(SMOLLM2_MODEL);

  it("no logprobs without the option; content tokens only with a stop string", async () => {
    const plain = await run(request({ maxTokens: 8 }));
    expect(plain.logprobs).toEqual([]);
    const full = await run(request({ maxTokens: 8, logprobs: 0 }));
    // Stop at the second word: the stop string's tokens and what follows are not reported.
    const words = full.content.split(" ").filter((w) => w !== "");
    const stop = words[1] as string;
    const stopped = await run(request({ maxTokens: 8, logprobs: 0, stop: [stop] }));
    expect(stopped.content).toBe(full.content.slice(0, full.content.indexOf(stop)));
    const texts = stopped.logprobs.map((e) => Buffer.from(e.bytes).toString("utf8"));
    // Every token of the content is reported; a token that straddles the stop string's start is the last one, and
    // none lies wholly in the stop string or after it.
    expect(texts.join("").startsWith(stopped.content)).toBe(true);
    expect(texts.slice(0, -1).join("").length).toBeLessThan(stopped.content.length);
    expect(stopped.logprobs.length).toBeLessThan(full.logprobs.length);
  });

  it("n > 1: every choice's own tokens (different seeds at temperature 1)", async () => {
    const req = { ...request({ temperature: 1, maxTokens: 6, logprobs: 2, seed: 7 }), n: 2 };
    const prepared = await engine.prepare(req);
    const generation = await engine.enqueue(prepared);
    const perChoice: TokenLogprob[][] = [[], []];
    const texts = ["", ""];
    for await (const event of generation.events) {
      if (event.type === "delta" && event.target === undefined) {
        texts[event.choice] += event.text;
        perChoice[event.choice]?.push(...(event.logprobs ?? []));
      }
    }
    perChoice.forEach((entries, choice) => {
      expect(entries.length).toBeGreaterThan(0);
      expect(entries.map((e) => Buffer.from(e.bytes).toString("utf8")).join("")).toBe(texts[choice]);
      for (const entry of entries) {
        expect(entry.logprob).toBeLessThanOrEqual(0);
        expect(entry.topLogprobs).toHaveLength(2);
      }
    });
  });
});
