// The engine in-process, without HTTP: the same requests the service gets, prepared and enqueued directly.
import { generate } from "../src/engine/generate.js";
import type { Engine } from "../src/engine/types.js";
import { generationRequest, greedySampling } from "../test/support/generation-request.js";
import { SEED, type StreamEvent, type Target } from "./workload.js";

export function engineTarget(engine: Engine, model: string, maxTokens: number): Target {
  return (prompt) => streamGeneration(engine, model, maxTokens, prompt);
}

async function* streamGeneration(
  engine: Engine,
  model: string,
  maxTokens: number,
  prompt: string,
): AsyncGenerator<StreamEvent> {
  // What the API makes of the HTTP phase's body (temperature 0, seed, max_tokens, defaults otherwise).
  const request = generationRequest(model, {
    messages: [{ role: "user", content: prompt }],
    sampling: greedySampling({ seed: SEED, maxTokens }),
    cacheScope: "bench",
  });
  const generation = await generate(engine, request);
  for await (const event of generation.events) {
    if (event.type === "delta" && event.text.length > 0) yield { type: "text" };
    else if (event.type === "usage") yield { type: "done", completionTokens: event.usage.completionTokens };
  }
}
