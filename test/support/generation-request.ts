// A GenerationRequest for engine tests and the benchmark: greedy, seeded, short, one choice; override any field.
import type { GenerationRequest, SamplingParams } from "../../src/engine/types.js";

export function greedySampling(overrides: Partial<SamplingParams> = {}): SamplingParams {
  return {
    temperature: 0,
    topP: 1,
    frequencyPenalty: 0,
    presencePenalty: 0,
    seed: 1,
    maxTokens: 16,
    stop: [],
    ...overrides,
  };
}

export function generationRequest(
  model: string,
  overrides: Partial<GenerationRequest> = {},
): GenerationRequest {
  return {
    model,
    messages: [{ role: "user", content: "Say hello." }],
    enableThinking: false,
    n: 1,
    sampling: greedySampling(),
    cacheScope: "org_a",
    ...overrides,
  };
}
