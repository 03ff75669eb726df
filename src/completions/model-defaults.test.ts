// A model's sampling defaults fill exactly the fields a request leaves out; a field the request sets always wins.
import { describe, expect, it } from "vitest";
import { DEFAULT_MODEL_SAMPLING } from "../config/schema.js";
import { parseChatRequest } from "../http/openai/chat-request.js";
import { withModelDefaults } from "./model-defaults.js";

const sampled = (fields: Record<string, unknown>) =>
  parseChatRequest({ model: "m", messages: [{ role: "user", content: "hi" }], ...fields }, { maxN: 1 })
    .sampling;

const GEMMA = { temperature: 1, top_k: 64, top_p: 0.95, min_p: 0 } as const;

describe("withModelDefaults", () => {
  it("without defaults: OpenAI's temperature 1 and top_p 1, and none of vLLM's extensions", () => {
    const resolved = withModelDefaults(sampled({}), undefined);
    expect(resolved).toMatchObject({ temperature: 1, topP: 1, maxTokens: undefined });
    for (const field of ["topK", "minP", "repetitionPenalty"]) expect(resolved).not.toHaveProperty(field);
  });

  it("fills every field the request left out from the model's defaults", () => {
    const resolved = withModelDefaults(sampled({}), {
      temperature: 0.3,
      top_p: 0.8,
      top_k: 20,
      min_p: 0.05,
      repetition_penalty: 1.1,
      max_tokens: 256,
    });
    expect(resolved).toMatchObject({
      temperature: 0.3,
      topP: 0.8,
      topK: 20,
      minP: 0.05,
      repetitionPenalty: 1.1,
      // A bound the engine fits to the context, not the request's max_tokens (which would refuse a long prompt).
      maxTokens: undefined,
      defaultMaxTokens: 256,
    });
  });

  it("keeps every field the request set, including the values that mean 'off'", () => {
    const resolved = withModelDefaults(
      sampled({ temperature: 0, top_p: 1, top_k: -1, min_p: 0, repetition_penalty: 1, max_tokens: 5 }),
      { temperature: 0.3, top_p: 0.8, top_k: 20, min_p: 0.05, repetition_penalty: 1.1, max_tokens: 256 },
    );
    expect(resolved).toMatchObject({
      temperature: 0,
      topP: 1,
      topK: 0,
      minP: 0,
      repetitionPenalty: 1,
      maxTokens: 5,
    });
    expect(resolved).not.toHaveProperty("defaultMaxTokens");
  });

  it("max_completion_tokens counts as the request's max_tokens", () => {
    const resolved = withModelDefaults(sampled({ max_completion_tokens: 7 }), { max_tokens: 256 });
    expect(resolved.maxTokens).toBe(7);
    expect(resolved).not.toHaveProperty("defaultMaxTokens");
  });

  it("mixes per field: what the request set, the model's default for the rest", () => {
    expect(withModelDefaults(sampled({ temperature: 0.7 }), GEMMA)).toMatchObject({
      temperature: 0.7,
      topK: 64,
      topP: 0.95,
      minP: 0,
    });
  });

  it("keeps what only the request has (penalties, stop, seed)", () => {
    const resolved = withModelDefaults(sampled({ presence_penalty: 1, stop: "x", seed: 3 }), GEMMA);
    expect(resolved).toMatchObject({ presencePenalty: 1, stop: ["x"], seed: 3 });
  });

  it("the default model's defaults are its model card's (temperature 0.2, top_p 0.9)", () => {
    expect(withModelDefaults(sampled({}), DEFAULT_MODEL_SAMPLING)).toMatchObject({
      temperature: 0.2,
      topP: 0.9,
    });
  });
});
