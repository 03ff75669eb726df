// The sampling fields a request and a model's `defaults` share: one schema each, with vLLM's ranges.
import { z } from "zod";

/**
 * Each sampling field's range, as OpenAI (temperature, top_p, max_tokens) and vLLM (top_k, min_p,
 * repetition_penalty) define it: the request's fields and hearth.yaml's `defaults` are checked by the same schemas.
 */
export const SAMPLING_FIELDS = Object.freeze({
  temperature: z.number().min(0).max(2),
  top_p: z.number().gt(0).max(1),
  // vLLM: 0 or -1 leaves top-k out, any other value must be at least 1.
  top_k: z
    .int()
    .min(-1)
    .max(2 ** 31 - 1),
  min_p: z.number().min(0).max(1),
  // vLLM: greater than zero (1 = none); z.number() refuses infinities.
  repetition_penalty: z.number().gt(0),
  max_tokens: z.int().min(1),
});

/** A model's `defaults` in hearth.yaml: what a request that leaves a field out is sampled with. */
export const samplingDefaultsSchema = z
  .strictObject({
    temperature: SAMPLING_FIELDS.temperature.optional(),
    top_p: SAMPLING_FIELDS.top_p.optional(),
    top_k: SAMPLING_FIELDS.top_k.optional(),
    min_p: SAMPLING_FIELDS.min_p.optional(),
    repetition_penalty: SAMPLING_FIELDS.repetition_penalty.optional(),
    max_tokens: SAMPLING_FIELDS.max_tokens.optional(),
  })
  .describe("sampling applied when a request leaves the field out (docs/models.md)");

export type SamplingDefaults = z.infer<typeof samplingDefaultsSchema>;

/** The defaults' fields vLLM added to OpenAI's: only engines that take them may have them (upstream kinds). */
export const SAMPLING_EXTENSIONS = Object.freeze(["top_k", "min_p", "repetition_penalty"] as const);
export type SamplingExtension = (typeof SAMPLING_EXTENSIONS)[number];
