// A model's sampling defaults (hearth.yaml `defaults`) applied to the fields a request leaves out.
import type { SamplingDefaults } from "../config/sampling-defaults.js";
import type { SamplingParams } from "../engine/types.js";
import type { RequestedSampling, SamplingFields } from "./types.js";

/** OpenAI's values for the fields nobody set (vLLM's extensions have none: they stay out). */
const OPENAI_DEFAULTS = Object.freeze({ temperature: 1, topP: 1 });

/** The wire's snake_case fields (a request's or a model's `defaults`), each only when set; top_k −1 is 0 (no top-k). */
export function samplingFields(wire: Omit<SamplingDefaults, "max_tokens">): SamplingFields {
  const fields: SamplingFields = {};
  if (wire.temperature !== undefined) fields.temperature = wire.temperature;
  if (wire.top_p !== undefined) fields.topP = wire.top_p;
  if (wire.top_k !== undefined) fields.topK = Math.max(wire.top_k, 0);
  if (wire.min_p !== undefined) fields.minP = wire.min_p;
  if (wire.repetition_penalty !== undefined) fields.repetitionPenalty = wire.repetition_penalty;
  return fields;
}

/**
 * The request's sampling with the model's defaults in every field the request left out (a field the request sets
 * always wins), then OpenAI's temperature 1 and top_p 1 where neither set them. A default max_tokens goes to
 * `defaultMaxTokens` (a bound the engine fits to the context), the request's own to `maxTokens`.
 */
export function withModelDefaults(
  sampling: RequestedSampling,
  defaults: SamplingDefaults | undefined,
): Omit<SamplingParams, "seed"> & { seed: number | undefined } {
  const fromModel = defaults === undefined ? {} : samplingFields(defaults);
  const resolved = { ...OPENAI_DEFAULTS, ...fromModel, ...sampling };
  // A default max_tokens bounds the reply but never refuses a long prompt: the engine caps it to the context.
  if (sampling.maxTokens === undefined && defaults?.max_tokens !== undefined) {
    resolved.defaultMaxTokens = defaults.max_tokens;
  }
  return resolved;
}
