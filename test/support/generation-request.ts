// A GenerationRequest for engine tests and the benchmark: greedy, seeded, short, one choice; override any field.
import { generate } from "../../src/engine/generate.js";
import type { Engine, GenerationRequest, SamplingParams } from "../../src/engine/types.js";

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

/** The text of one short greedy generation of `model` on `engine`. */
export async function generatedText(engine: Engine, model: string): Promise<string> {
  let text = "";
  for await (const event of (await generate(engine, generationRequest(model))).events)
    if (event.type === "delta") text += event.text;
  return text;
}
