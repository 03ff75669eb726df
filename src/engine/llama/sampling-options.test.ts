import type { LlamaModel, Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { greedySampling } from "../../../test/support/generation-request.js";
import type { SamplingParams } from "../types.js";
import type { ChoiceStream } from "./choice-stream.js";
import type { OutputControl } from "./output-control.js";
import { type ChoiceSampling, evaluateOptions, isArgmaxDraw } from "./sampling-options.js";
import { logprobMetadata } from "./token-logprobs.js";

// Requests without a logit bias, ignore_eos or structured output never touch the model or the output control.
const sampling: ChoiceSampling = {
  model: {} as LlamaModel,
  control: {} as OutputControl,
  eogTokens: () => [],
  noTopK: 0,
};
const stream = { index: 0, output: undefined, generated: [], remaining: 16 } as unknown as ChoiceStream;

/** Whether a request's choice draws an argmax, from the options and metadata the step loop builds for it. */
function argmax(overrides: Partial<SamplingParams>): boolean {
  const params = greedySampling(overrides);
  const options = evaluateOptions(sampling, params, undefined, stream, 0, [1, 2, 3] as Token[]);
  return isArgmaxDraw(options, logprobMetadata(params));
}

describe("isArgmaxDraw", () => {
  it("holds for temperature 0 with nothing else in the chain, whatever top_p, top_k, min_p or seed say", () => {
    expect(argmax({})).toBe(true);
    expect(argmax({ topP: 0.5, topK: 20, minP: 0.1, seed: 9 })).toBe(true);
  });

  it("fails for a sampled draw, a penalty, or probabilities asked for", () => {
    expect(argmax({ temperature: 0.7 })).toBe(false);
    expect(argmax({ frequencyPenalty: 0.5 })).toBe(false);
    expect(argmax({ presencePenalty: 0.5 })).toBe(false);
    expect(argmax({ repetitionPenalty: 1.1 })).toBe(false);
    expect(argmax({ logprobs: 0 })).toBe(false);
    expect(argmax({ logprobs: 3 })).toBe(false);
  });

  it("fails for a token bias or a grammar in the options", () => {
    const greedy = { temperature: 0 };
    expect(isArgmaxDraw(greedy, {})).toBe(true);
    expect(isArgmaxDraw({ ...greedy, tokenBias: () => ({}) as never }, {})).toBe(false);
    expect(isArgmaxDraw({ ...greedy, grammarEvaluationState: {} as never }, {})).toBe(false);
    expect(isArgmaxDraw({ ...greedy, xtc: { probability: 0.5, threshold: 0.1 } }, {})).toBe(false);
  });
});
