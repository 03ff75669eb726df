// reasoning_effort, allowed_tools and prompt_cache_key in each upstream dialect's body.
import { describe, expect, it } from "vitest";
import { withModelDefaults } from "../../completions/model-defaults.js";
import { parseChatRequest } from "../../http/openai/chat-request.js";
import type { GenerationRequest } from "../types.js";
import { type UpstreamKind, upstreamRequestBody } from "./wire.js";

function request(body: Record<string, unknown>): GenerationRequest {
  const parsed = parseChatRequest(
    { model: "smol", messages: [{ role: "user", content: "Hi" }], ...body },
    { maxN: 8 },
  );
  return {
    ...parsed,
    sampling: { ...withModelDefaults(parsed.sampling, undefined), seed: 1 },
    cacheScope: "org_A",
  };
}

const send = (req: GenerationRequest, kind: UpstreamKind) =>
  upstreamRequestBody(req, { model: "m", kind, cacheSalt: "salt" });

const fn = (name: string) => ({ type: "function", function: { name, parameters: { type: "object" } } });

describe("upstream reasoning_effort", () => {
  it("OpenAI and Hearth get it as the client sent it; Hearth keeps enable_thinking beside it", () => {
    for (const effort of ["minimal", "low", "xhigh", "max"]) {
      const req = request({ reasoning_effort: effort });
      expect(send(req, "openai")).toMatchObject({ reasoning_effort: effort });
      expect(send(req, "openai")).not.toHaveProperty("chat_template_kwargs");
      expect(send(req, "hearth")).toMatchObject({
        reasoning_effort: effort,
        chat_template_kwargs: { enable_thinking: effort !== "minimal" },
      });
    }
  });

  it("vLLM and SGLang: their own field for low/medium/high only; the template kwargs always carry it", () => {
    for (const kind of ["vllm", "sglang"] as const) {
      expect(send(request({ reasoning_effort: "medium" }), kind)).toMatchObject({
        reasoning_effort: "medium",
        chat_template_kwargs: { enable_thinking: true, reasoning_effort: "medium" },
      });
      const max = send(request({ reasoning_effort: "max" }), kind);
      expect(max).not.toHaveProperty("reasoning_effort");
      expect(max.chat_template_kwargs).toEqual({ enable_thinking: true, reasoning_effort: "max" });
      expect(send(request({ reasoning_effort: "none" }), kind).chat_template_kwargs).toEqual({
        enable_thinking: false,
        reasoning_effort: "none",
      });
    }
  });

  it("llama-server: in the template kwargs only", () => {
    const body = send(request({ reasoning_effort: "low" }), "llama-server");
    expect(body).not.toHaveProperty("reasoning_effort");
    expect(body.chat_template_kwargs).toEqual({ enable_thinking: true, reasoning_effort: "low" });
  });

  it("Ollama: the four values its OpenAI layer takes", () => {
    const effort = (value: string) => send(request({ reasoning_effort: value }), "ollama").reasoning_effort;
    expect([
      effort("none"),
      effort("minimal"),
      effort("low"),
      effort("high"),
      effort("xhigh"),
      effort("max"),
    ]).toEqual(["none", "none", "low", "high", "high", "high"]);
  });

  it("absent: no reasoning_effort anywhere, enable_thinking as before", () => {
    for (const kind of ["openai", "hearth", "vllm", "sglang", "llama-server", "ollama"] as const) {
      const body = send(request({}), kind);
      expect(body).not.toHaveProperty("reasoning_effort");
      if (body.chat_template_kwargs !== undefined)
        expect(body.chat_template_kwargs).toEqual({ enable_thinking: false });
    }
  });
});

describe("upstream allowed_tools", () => {
  const tools = [fn("a"), fn("b"), fn("c")];
  const choice = (mode: string) =>
    request({
      tools,
      tool_choice: {
        type: "allowed_tools",
        allowed_tools: {
          mode,
          tools: [
            { type: "function", function: { name: "c" } },
            { type: "function", function: { name: "a" } },
          ],
        },
      },
    });

  it("OpenAI and Hearth get OpenAI's form with every tool", () => {
    for (const kind of ["openai", "hearth"] as const) {
      const body = send(choice("required"), kind);
      expect((body.tools as { function: { name: string } }[]).map((t) => t.function.name)).toEqual([
        "a",
        "b",
        "c",
      ]);
      expect(body.tool_choice).toEqual({
        type: "allowed_tools",
        allowed_tools: {
          mode: "required",
          tools: [
            { type: "function", function: { name: "c" } },
            { type: "function", function: { name: "a" } },
          ],
        },
      });
    }
  });

  it.each(["vllm", "sglang", "llama-server", "ollama"] as const)(
    "%s gets only the allowed tools, with the mode as its tool_choice",
    (kind) => {
      for (const mode of ["auto", "required"]) {
        const body = send(choice(mode), kind);
        expect((body.tools as { function: { name: string } }[]).map((t) => t.function.name)).toEqual([
          "a",
          "c",
        ]);
        expect(body.tool_choice).toBe(mode);
      }
    },
  );
});

describe("upstream prompt_cache_key", () => {
  const keyed = (org: string, key: string) => ({ ...request({ prompt_cache_key: key }), cacheScope: org });

  it("OpenAI and Hearth get the key scoped to the organization, hashed; the others nothing", () => {
    const sent = (kind: UpstreamKind, req: GenerationRequest) => send(req, kind).prompt_cache_key;
    for (const kind of ["openai", "hearth"] as const) {
      const mine = sent(kind, keyed("org_A", "k"));
      expect(mine).toMatch(/^[0-9a-f]{64}$/);
      expect(String(mine)).not.toContain("org_A");
      expect(sent(kind, keyed("org_A", "k"))).toBe(mine);
      expect(sent(kind, keyed("org_B", "k"))).not.toBe(mine);
      expect(sent(kind, request({}))).toBeUndefined();
    }
    for (const kind of ["vllm", "sglang", "llama-server", "ollama"] as const) {
      expect(sent(kind, keyed("org_A", "k"))).toBeUndefined();
    }
  });
});
