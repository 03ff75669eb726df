// Prepare and enqueue in one call, for callers that charge nothing in between (tests, the benchmark).
import type { Engine, Generation, GenerationRequest } from "./types.js";

export async function generate(engine: Engine, request: GenerationRequest): Promise<Generation> {
  return engine.enqueue(await engine.prepare(request));
}
