// Fails loudly, naming the member, when a node-llama-cpp upgrade removes or breaks a private member Hearth uses
// (src/engine/llama/llama-internals.ts). The engine would keep working on the fallbacks, only slower or less exact.
import {
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  LlamaGrammarEvaluationState,
  type LlamaModel,
  type Token,
  TokenBias,
} from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usableCores } from "../../src/engine/llama/cpu.js";
import {
  copySequenceState,
  type DirectDecoder,
  findBiasMap,
  findCopyState,
  findDirectDecoder,
  findGrammarCheck,
  findGrammarState,
  grammarAccepts,
  LLAMA_INTERNALS,
  type LlamaInternal,
  type NativeCall,
  overrideDecodeThreads,
  setLogit,
  traceNativeCalls,
  unboundedTopK,
} from "../../src/engine/llama/llama-internals.js";
import { loadDefaultModel } from "../support/llama-engine.js";

let llama: Llama;
let model: LlamaModel;
let context: LlamaContext;
const checked = new Set<LlamaInternal>();

/** The assertion message: which member is gone and what Hearth falls back to without it. */
function gone(internal: LlamaInternal, consequence: string): string {
  checked.add(internal);
  return `node-llama-cpp no longer has ${LLAMA_INTERNALS[internal]}: ${consequence} (see src/engine/llama/llama-internals.ts)`;
}

beforeAll(async () => {
  ({ llama, model } = await loadDefaultModel());
  context = await model.createContext({
    sequences: 2,
    contextSize: 512,
    flashAttention: true,
    threads: usableCores(),
  });
});

/** A context of its own for a test that patches it: one sequence, on the usable cores (as the engine's). */
const ownContext = () =>
  model.createContext({ sequences: 1, contextSize: 256, flashAttention: true, threads: usableCores() });

afterAll(async () => {
  await context?.dispose();
  await model?.dispose();
  await llama?.dispose();
});

/** The greedy next token of a sequence that holds everything before `last`. */
async function nextToken(sequence: LlamaContextSequence, last: Token): Promise<Token | undefined> {
  const generator = sequence.evaluate([last], { temperature: 0, yieldEogToken: true });
  const result = await generator.next();
  await generator.return();
  return result.done === true ? undefined : result.value;
}

describe("node-llama-cpp private members used by the engine", () => {
  it(`${LLAMA_INTERNALS.copyState}: copies an evaluated prompt into another sequence (n > 1)`, async () => {
    const [source, target] = [context.getSequence(), context.getSequence()];
    try {
      const message = gone("copyState", "n > 1 evaluates the prompt again in every other sequence");
      expect(findCopyState(target), message).toBeTypeOf("function");
      const prompt = model.tokenize("The capital of France is");
      const upTo = prompt.length - 1;
      await source.evaluateWithoutGeneratingNewTokens(prompt.slice(0, upTo));
      expect(await copySequenceState(target, source, upTo), message).toBe(true);
      expect(target.contextTokens, message).toEqual(prompt.slice(0, upTo));
      // The copied KV cache, not only the token list: both sequences predict the same next token.
      const last = prompt[upTo] as Token;
      const fromSource = await nextToken(source, last);
      expect(fromSource).toBeDefined();
      expect(await nextToken(target, last), message).toBe(fromSource);
    } finally {
      await source.dispose();
      await target.dispose();
    }
  });

  it(`${LLAMA_INTERNALS.biasMap}: steers sampling, end-of-generation tokens included`, async () => {
    const message = gone("biasMap", "budget steering can no longer favour an end-of-generation token");
    const bias = new TokenBias(model.tokenizer);
    expect(findBiasMap(bias), message).toBeInstanceOf(Map);
    const eos = model.tokens.eos;
    if (eos === null) throw new Error("the default model has no end-of-sequence token");
    setLogit(bias, eos, 100);
    expect(findBiasMap(bias)?.get(eos), message).toBe(100);
    const sequence = context.getSequence();
    try {
      const prompt = model.tokenize("Write a long story about a lighthouse keeper.");
      await sequence.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
      const generator = sequence.evaluate([prompt.at(-1) as Token], {
        temperature: 0,
        yieldEogToken: true,
        tokenBias: bias,
      });
      const first = await generator.next();
      await generator.return();
      expect(first.value, message).toBe(eos);
    } finally {
      await sequence.dispose();
    }
  });

  it(`${LLAMA_INTERNALS.grammarState} and ${LLAMA_INTERNALS.grammarCheck}: tell which tokens a grammar accepts`, async () => {
    const stateMessage = gone("grammarState", "budget steering biases tokens the grammar rejects");
    const checkMessage = gone("grammarCheck", "budget steering biases tokens the grammar rejects");
    const grammar = await llama.createGrammar({ grammar: 'root ::= "yes" | "no"' });
    const state = new LlamaGrammarEvaluationState({ model, grammar });
    expect(findGrammarState(state), stateMessage).toBeTypeOf("object");
    expect(findGrammarCheck(llama), checkMessage).toBeTypeOf("function");
    const yes = model.tokenize("yes")[0] as Token;
    const maybe = model.tokenize("maybe")[0] as Token;
    expect(grammarAccepts(llama, state, yes), checkMessage).toBe(true);
    // Without the check every token counts as accepted: this is what fails when a member goes.
    expect(grammarAccepts(llama, state, maybe), checkMessage).toBe(false);
  });

  it(`${LLAMA_INTERNALS.setThreads}: the threads of each decode can be chosen`, async () => {
    const message = gone(
      "setThreads",
      "every decode uses the configured threads (a one-stream decode is slower)",
    );
    const own = await ownContext();
    try {
      const requested: number[] = [];
      const installed = overrideDecodeThreads(own, (threads) => {
        requested.push(threads);
        return 1;
      });
      expect(installed, message).toBe(true);
      const [first, second] = model.tokenize("The capital of France is");
      const sequence = own.getSequence();
      await sequence.evaluateWithoutGeneratingNewTokens([first as Token]);
      const withOne = await nextToken(sequence, second as Token);
      // The library asked for its threads before the decodes, and they ran on the one chosen instead.
      expect(requested.length, message).toBeGreaterThan(0);
      // The same greedy token as the shared context's, on the threads the library chose there.
      const reference = context.getSequence();
      try {
        await reference.evaluateWithoutGeneratingNewTokens([first as Token]);
        expect(withOne).toBeDefined();
        expect(withOne).toBe(await nextToken(reference, second as Token));
      } finally {
        reference.dispose();
      }
    } finally {
      await own.dispose();
    }
  });

  it(`${LLAMA_INTERNALS.noTopK}: a null option leaves top-k out of the sampler chain`, () => {
    const message = gone(
      "noTopK",
      "sampling at temperature > 0 sorts the whole vocabulary on every token (topK 0)",
    );
    const sequence = context.getSequence();
    try {
      // null, not 0: the library dropped it (test/model/sampling-distribution.test.ts checks the draws).
      expect(unboundedTopK(sequence), message).toBeNull();
    } finally {
      sequence.dispose();
    }
  });

  it(`${LLAMA_INTERNALS.nativeCalls}: the step profile times each decode and sampling`, async () => {
    const message = gone("nativeCalls", "bench/step-profile.ts cannot time the addon's calls");
    const own = await ownContext();
    try {
      const calls: NativeCall[] = [];
      expect(
        traceNativeCalls(own, (call) => calls.push(call)),
        message,
      ).toBe(true);
      const [first, second] = model.tokenize("The capital of France is");
      const sequence = own.getSequence();
      await sequence.evaluateWithoutGeneratingNewTokens([first as Token]);
      expect(await nextToken(sequence, second as Token)).toBeDefined();
      expect(
        calls.map((c) => c.kind),
        message,
      ).toEqual(["decode", "decode", "sample"]);
      for (const call of calls) expect(call.end).toBeGreaterThanOrEqual(call.start);
    } finally {
      await own.dispose();
    }
  });

  it(`${LLAMA_INTERNALS.nativeCalls}: the step profile times the direct steps' decodes and draws too`, async () => {
    const message = gone("nativeCalls", "bench/step-profile.ts cannot time the direct steps");
    const own = await ownContext();
    try {
      const sequence = own.getSequence();
      // The runner finds its direct decoder when its model loads, before the profile traces its context.
      const decoder = findDirectDecoder(own, [sequence], 512);
      if (llama.buildType !== "localBuild") {
        expect(decoder).toBeUndefined();
        return;
      }
      const calls: NativeCall[] = [];
      expect(traceNativeCalls(own, (call) => calls.push(call))).toBe(true);
      const [first] = await (decoder as DirectDecoder).decode([
        { sequence, tokens: model.tokenize("The capital of France is"), draw: true },
      ]);
      // The prompt above went to the decode thread (decodeBatch); this token is decoded on this thread (hearthDecodeHere).
      await (decoder as DirectDecoder).decode([{ sequence, tokens: [first as Token], draw: true }], {
        here: true,
      });
      (decoder as DirectDecoder).idle();
      expect(
        calls.map((c) => c.kind),
        message,
      ).toEqual(["decode", "sample", "decode", "sample"]);
      for (const call of calls) expect(call.end).toBeGreaterThanOrEqual(call.start);
    } finally {
      await own.dispose();
    }
  });

  it(`${LLAMA_INTERNALS.directSteps}: a step decoded without generators draws and records what they would`, async () => {
    const message = gone(
      "directSteps",
      "every step goes through node-llama-cpp's generators (slower at one stream)",
    );
    const own = await model.createContext({
      sequences: 2,
      contextSize: 512,
      flashAttention: true,
      threads: usableCores(),
    });
    try {
      const sequences = [own.getSequence(), own.getSequence()];
      const decoder = findDirectDecoder(own, sequences, 512);
      // The draw is the tuned build's (native/node-llama-cpp-addon.diff): the prebuilt binaries have none.
      if (llama.buildType !== "localBuild") {
        expect(decoder).toBeUndefined();
        return;
      }
      expect(decoder, message).toBeDefined();
      expect(decoder?.canDecodeHere, message).toBe(true);
      const prompts = ["The capital of France is", "Once upon a time"].map((text) => model.tokenize(text));
      // What the library's generators draw, each prompt alone in the shared context.
      const expected: Token[][] = [];
      for (const prompt of prompts) {
        const sequence = context.getSequence();
        const tokens: Token[] = [];
        for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
          tokens.push(token);
          if (tokens.length === 8) break;
        }
        sequence.dispose();
        expected.push(tokens);
      }
      // Both prompts in one decode, then one token each per decode: on the decode thread, then on this one.
      const drawn: Token[][] = [[], []];
      let inputs: Token[][] = prompts;
      for (let step = 0; step < 8; step++) {
        const tokens = await (decoder as DirectDecoder).decode(
          sequences.map((sequence, i) => ({ sequence, tokens: inputs[i] as Token[], draw: true })),
          { here: step >= 4 },
        );
        for (const [i, token] of tokens.entries()) drawn[i]?.push(token as Token);
        inputs = tokens.map((token) => [token as Token]);
      }
      expect(drawn, message).toEqual(expected);
      // The context's threads stay allocated between direct decodes while no other context wants any, and its
      // share of the cores is freed once they stop.
      const consumer = () =>
        (own as unknown as { _threadSplitterConsumer?: { _usedThreads: number } })._threadSplitterConsumer;
      expect(consumer()?._usedThreads, message).toBeGreaterThan(0);
      // Another context that wants threads meanwhile gets them once this one decodes again.
      const elsewhere = context.getSequence();
      const waiting = elsewhere.evaluateWithoutGeneratingNewTokens(prompts[1] as Token[]);
      await new Promise((resolve) => setTimeout(resolve, 10));
      const more = await (decoder as DirectDecoder).decode([
        { sequence: sequences[1] as LlamaContextSequence, tokens: [drawn[1]?.at(-1) as Token], draw: true },
      ]);
      expect(more[0]).toBeDefined();
      await waiting;
      expect(elsewhere.contextTokens).toEqual(prompts[1]);
      elsewhere.dispose();
      (decoder as DirectDecoder).idle();
      expect(consumer()?._usedThreads, message).toBe(0);
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(consumer(), message).toBeUndefined();
      // The library sees what was decoded: every token but the last drawn, and it generates on from there.
      const [sequence, other] = sequences as [LlamaContextSequence, LlamaContextSequence];
      const held = [...(prompts[0] as Token[]), ...(drawn[0] as Token[]).slice(0, -1)];
      expect(sequence.contextTokens, message).toEqual(held);
      expect(sequence.nextTokenIndex, message).toBe(held.length);
      const reference = context.getSequence();
      try {
        await reference.evaluateWithoutGeneratingNewTokens(held);
        const last = (drawn[0] as Token[]).at(-1) as Token;
        expect(await nextToken(sequence, last), message).toBe(await nextToken(reference, last));
      } finally {
        reference.dispose();
      }
      // A prompt chunk without a draw is recorded too, and more tokens than the batch takes are refused.
      await other.clearHistory();
      expect(
        await (decoder as DirectDecoder).decode([
          { sequence: other, tokens: [1, 2] as Token[], draw: false },
        ]),
      ).toEqual([undefined]);
      expect(other.contextTokens).toEqual([1, 2]);
      // More tokens than the batch takes, or than the sequence has room for, are refused before anything runs.
      const small = findDirectDecoder(own, sequences, 4) as DirectDecoder;
      const five = [1, 2, 3, 4, 5] as Token[];
      await expect(small.decode([{ sequence: other, tokens: five, draw: true }])).rejects.toThrow(/5 tokens/);
      const tooMany = Array.from({ length: 510 }, () => 1 as Token);
      await expect(
        (decoder as DirectDecoder).decode([{ sequence: other, tokens: tooMany, draw: true }]),
      ).rejects.toThrow(/no room/);
      expect(other.contextTokens).toEqual([1, 2]);
    } finally {
      await own.dispose();
    }
  });

  afterAll(() => {
    // A new entry in LLAMA_INTERNALS needs its check here.
    expect([...checked].sort()).toEqual(Object.keys(LLAMA_INTERNALS).sort());
  });
});
