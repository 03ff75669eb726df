// The body sent to each upstream dialect, the classification of upstream errors, and model lists read.
import { describe, expect, it } from "vitest";
import { withModelDefaults } from "../../completions/model-defaults.js";
import type { SamplingDefaults } from "../../config/sampling-defaults.js";
import { SAMPLING_EXTENSION_KINDS } from "../../config/schema.js";
import { parseChatRequest } from "../../http/openai/chat-request.js";
import type { GenerationRequest } from "../types.js";
import {
  KIND_TRAITS,
  readModelsResponse,
  UpstreamError,
  type UpstreamKind,
  upstreamErrorFromResponse,
  upstreamRequestBody,
} from "./wire.js";

const KINDS = Object.keys(KIND_TRAITS) as UpstreamKind[];

/** A request as the API layer makes it from a client's body (the real parser, so every field is realistic). */
function request(body: Record<string, unknown>, seed = 42, defaults?: SamplingDefaults): GenerationRequest {
  const parsed = parseChatRequest({ model: "smol", ...body }, { maxN: 8 });
  const sampling = withModelDefaults(parsed.sampling, defaults);
  return {
    ...parsed,
    sampling: { ...sampling, seed: sampling.seed ?? seed },
    cacheScope: "org_A",
  };
}

const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

const CONVERSATION = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Weather in Paris?", name: "ana" },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
    ],
  },
  { role: "tool", tool_call_id: "call_1", content: "18°C" },
];

describe("upstreamRequestBody", () => {
  const plain = request({
    messages: [{ role: "user", content: "Hi" }],
    temperature: 0.3,
    top_p: 0.9,
    frequency_penalty: 0.5,
    presence_penalty: -0.5,
    seed: 7,
    max_tokens: 64,
    stop: ["\n\n", "END"],
    chat_template_kwargs: { enable_thinking: true },
  });

  it.each(KINDS)("%s: always streams with usage, with every sampling field", (kind) => {
    const body = upstreamRequestBody(plain, { model: "served-name", kind, cacheSalt: "org_A" });
    expect(body).toMatchObject({
      model: "served-name",
      messages: [{ role: "user", content: "Hi" }],
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.3,
      top_p: 0.9,
      frequency_penalty: 0.5,
      presence_penalty: -0.5,
      seed: 7,
      max_tokens: 64,
      stop: ["\n\n", "END"],
    });
    expect(body).not.toHaveProperty("n");
  });

  it("chat_template_kwargs goes to vLLM, SGLang, llama-server and Hearth, never to OpenAI or Ollama", () => {
    const sent = (kind: UpstreamKind) =>
      upstreamRequestBody(plain, { model: "m", kind, cacheSalt: "org_A" }).chat_template_kwargs;
    for (const kind of ["vllm", "sglang", "llama-server", "hearth"] as const) {
      expect(sent(kind)).toEqual({ enable_thinking: true });
    }
    expect(sent("openai")).toBeUndefined();
    expect(sent("ollama")).toBeUndefined();
  });

  it("enable_thinking false is sent explicitly (templates that think by default must not)", () => {
    const off = request({ messages: [{ role: "user", content: "Hi" }] });
    expect(
      upstreamRequestBody(off, { model: "m", kind: "vllm", cacheSalt: "s" }).chat_template_kwargs,
    ).toEqual({
      enable_thinking: false,
    });
  });

  it("cache_salt goes only to vLLM and Hearth, set to the organization's salt", () => {
    const salts = Object.fromEntries(
      KINDS.map((kind) => [
        kind,
        upstreamRequestBody(plain, { model: "m", kind, cacheSalt: "org_A" }).cache_salt,
      ]),
    );
    expect(salts).toEqual({
      vllm: "org_A",
      sglang: undefined,
      "llama-server": undefined,
      ollama: undefined,
      hearth: "org_A",
      openai: undefined,
    });
  });

  it("user goes to every dialect as the client sent it, and only when given", () => {
    const tagged = request({ messages: [{ role: "user", content: "Hi" }], user: "end-user-7f3a" });
    for (const kind of KINDS) {
      expect(upstreamRequestBody(tagged, { model: "m", kind, cacheSalt: "org_A" }).user).toBe(
        "end-user-7f3a",
      );
      expect(upstreamRequestBody(plain, { model: "m", kind, cacheSalt: "org_A" })).not.toHaveProperty("user");
    }
  });

  it("n is sent when above 1; max_tokens and stop only when set; ignore_eos only where accepted", () => {
    const bare = request({ messages: [{ role: "user", content: "Hi" }], n: 3 });
    const body = upstreamRequestBody(bare, { model: "m", kind: "openai", cacheSalt: "s" });
    expect(body.n).toBe(3);
    expect(body).not.toHaveProperty("max_tokens");
    expect(body).not.toHaveProperty("stop");
    const bench: GenerationRequest = { ...bare, sampling: { ...bare.sampling, ignoreEos: true } };
    expect(upstreamRequestBody(bench, { model: "m", kind: "vllm", cacheSalt: "s" }).ignore_eos).toBe(true);
    expect(upstreamRequestBody(bench, { model: "m", kind: "hearth", cacheSalt: "s" })).not.toHaveProperty(
      "ignore_eos",
    );
  });

  it("logprobs, top_logprobs and logit_bias are sent when set, never otherwise", () => {
    const bare = upstreamRequestBody(request({ messages: [{ role: "user", content: "Hi" }] }), {
      model: "m",
      kind: "vllm",
      cacheSalt: "s",
    });
    for (const field of ["logprobs", "top_logprobs", "logit_bias"]) expect(bare).not.toHaveProperty(field);
    const asked = request({
      messages: [{ role: "user", content: "Hi" }],
      logprobs: true,
      top_logprobs: 4,
      logit_bias: { "15": -100, "300": 2.5 },
    });
    for (const kind of KINDS) {
      const body = upstreamRequestBody(asked, { model: "m", kind, cacheSalt: "s" });
      expect(body.logprobs).toBe(true);
      expect(body.top_logprobs).toBe(4);
      expect(body.logit_bias).toEqual({ "15": -100, "300": 2.5 });
    }
    const noTop = request({ messages: [{ role: "user", content: "Hi" }], logprobs: true });
    expect(upstreamRequestBody(noTop, { model: "m", kind: "openai", cacheSalt: "s" }).top_logprobs).toBe(0);
  });

  it("vLLM's sampling extensions go by each engine's names, only when set; never to OpenAI or Ollama", () => {
    const bare = request({ messages: [{ role: "user", content: "Hi" }] });
    for (const kind of KINDS) {
      const body = upstreamRequestBody(bare, { model: "m", kind, cacheSalt: "s" });
      for (const field of ["top_k", "min_p", "repetition_penalty", "repeat_penalty", "repeat_last_n"]) {
        expect(body).not.toHaveProperty(field);
      }
    }
    const asked = request({
      messages: [{ role: "user", content: "Hi" }],
      top_k: 20,
      min_p: 0.05,
      repetition_penalty: 1.1,
    });
    const sent = (kind: UpstreamKind) =>
      upstreamRequestBody(asked, { model: "m", kind, cacheSalt: "s", penaltyWindow: 300 });
    for (const kind of ["vllm", "sglang", "hearth"] as const) {
      expect(sent(kind)).toMatchObject({ top_k: 20, min_p: 0.05, repetition_penalty: 1.1 });
      expect(sent(kind)).not.toHaveProperty("repeat_penalty");
    }
    // llama-server: repeat_penalty, over a window as long as prompt + max_tokens (vLLM's covers both).
    expect(sent("llama-server")).toMatchObject({
      top_k: 20,
      min_p: 0.05,
      repeat_penalty: 1.1,
      repeat_last_n: 300,
    });
    for (const kind of ["vllm", "sglang", "hearth"] as const)
      expect(sent(kind)).not.toHaveProperty("repeat_last_n");
    expect(sent("llama-server")).not.toHaveProperty("repetition_penalty");
    for (const kind of ["openai", "ollama"] as const) {
      for (const field of ["top_k", "min_p", "repetition_penalty", "repeat_penalty"]) {
        expect(sent(kind)).not.toHaveProperty(field);
      }
    }
  });

  it("no top-k (top_k 0 or -1) travels as -1; a model's defaults are sent like the request's own fields", () => {
    for (const topK of [0, -1]) {
      const off = request({ messages: [{ role: "user", content: "Hi" }], top_k: topK });
      expect(upstreamRequestBody(off, { model: "m", kind: "sglang", cacheSalt: "s" }).top_k).toBe(-1);
    }
    const defaulted = request({ messages: [{ role: "user", content: "Hi" }], top_k: 5 }, 42, {
      top_k: 64,
      min_p: 0.01,
      temperature: 0.6,
    });
    expect(upstreamRequestBody(defaulted, { model: "m", kind: "vllm", cacheSalt: "s" })).toMatchObject({
      top_k: 5,
      min_p: 0.01,
      temperature: 0.6,
    });
  });

  it("every kind that takes the extensions is one the config lets a model's defaults name", () => {
    const taking = KINDS.filter((kind) => KIND_TRAITS[kind].sampling !== undefined);
    expect([...taking].sort()).toEqual([...SAMPLING_EXTENSION_KINDS].sort());
  });

  it("forwards tool conversations in OpenAI's form, and tools with the raw schema", () => {
    const tools = request({
      messages: CONVERSATION,
      tools: [WEATHER_TOOL],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
    });
    const body = upstreamRequestBody(tools, { model: "m", kind: "vllm", cacheSalt: "s" });
    expect(body.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Paris?", name: "ana" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          },
        ],
      },
      { role: "tool", content: "18°C", tool_call_id: "call_1" },
    ]);
    expect(body.tools).toEqual([WEATHER_TOOL]);
    expect(body.tool_choice).toEqual({ type: "function", function: { name: "get_weather" } });
    expect(body.parallel_tool_calls).toBe(false);
    expect(body).not.toHaveProperty("response_format");
  });

  it("response_format carries the raw schema the client sent", () => {
    const schema = { type: "object", properties: { n: { type: "string", maxLength: 5 } }, required: ["n"] };
    const json = request({
      messages: [{ role: "user", content: "Pick" }],
      response_format: { type: "json_schema", json_schema: { name: "pick", schema } },
    });
    const body = upstreamRequestBody(json, { model: "m", kind: "llama-server", cacheSalt: "s" });
    expect(body.response_format).toEqual({ type: "json_schema", json_schema: { name: "pick", schema } });
    expect(body).not.toHaveProperty("tools");
    expect(body).not.toHaveProperty("tool_choice");
    const object = request({
      messages: [{ role: "user", content: "Pick" }],
      response_format: { type: "json_object" },
    });
    expect(
      upstreamRequestBody(object, { model: "m", kind: "openai", cacheSalt: "s" }).response_format,
    ).toEqual({
      type: "json_object",
    });
  });

  it("a Hearth worker's own parser accepts the body and reads back the same request", () => {
    const original = request({
      messages: CONVERSATION,
      tools: [WEATHER_TOOL],
      tool_choice: "required",
      n: 2,
      temperature: 0,
      max_tokens: 100,
      stop: "STOP",
      seed: 123,
      chat_template_kwargs: { enable_thinking: true },
      logprobs: true,
      top_logprobs: 2,
      logit_bias: { "7": 50 },
      top_k: 40,
      min_p: 0.1,
      repetition_penalty: 1.2,
    });
    const body = upstreamRequestBody(original, { model: "smol", kind: "hearth", cacheSalt: "org_A" });
    // cache_salt is Hearth's issue-11 addition to its parser (src/http/openai/chat-request.ts), checked there.
    const { cache_salt: salt, ...rest } = body;
    expect(salt).toBe("org_A");
    const parsed = parseChatRequest(rest, { maxN: 8 });
    expect(parsed.stream).toBe(true);
    expect(parsed.includeUsage).toBe(true);
    expect(parsed.messages).toEqual(original.messages);
    expect(parsed.n).toBe(2);
    expect(parsed.sampling).toEqual(original.sampling);
    expect(parsed.enableThinking).toBe(true);
    expect(parsed.output?.toolChoice).toBe("required");
    expect(parsed.output?.tools.map((tool) => tool.parameters)).toEqual([WEATHER_TOOL.function.parameters]);
  });
});

describe("upstreamErrorFromResponse", () => {
  const openaiBody = (message: string) =>
    JSON.stringify({ error: { message, type: "invalid_request_error", param: "messages", code: null } });

  it.each([400, 404, 413, 422])("%i is the client's error: the upstream's message is kept", (status) => {
    const err = upstreamErrorFromResponse(status, openaiBody("'messages' must not be empty"));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ status, clientError: true, retryable: false });
    expect(err.message).toBe("'messages' must not be empty");
  });

  it("reads vLLM/SGLang's top-level error shape", () => {
    const body = JSON.stringify({
      object: "error",
      message: "This model's maximum context length is 4096 tokens.",
      type: "BadRequestError",
      param: null,
      code: 400,
    });
    expect(upstreamErrorFromResponse(400, body).message).toBe(
      "This model's maximum context length is 4096 tokens.",
    );
  });

  it("a client error without an OpenAI-shaped body gets a generic message (no internals)", () => {
    const html =
      '<html><body><pre>Traceback (most recent call last):\n  File "/srv/app.py", line 3</pre></body></html>';
    expect(upstreamErrorFromResponse(422, html).message).toBe(
      "The upstream engine refused the request (status 422).",
    );
    expect(upstreamErrorFromResponse(400, "").message).toBe(
      "The upstream engine refused the request (status 400).",
    );
  });

  it("a client error keeps the upstream's param when it is a parameter path; others never name one", () => {
    expect(upstreamErrorFromResponse(400, openaiBody("bad")).param).toBe("messages");
    const bias = JSON.stringify({ error: { message: "Invalid key", param: "logit_bias" } });
    expect(upstreamErrorFromResponse(400, bias).param).toBe("logit_bias");
    const odd = JSON.stringify({ error: { message: "x", param: "<script>" } });
    expect(upstreamErrorFromResponse(400, odd).param).toBeUndefined();
    expect(upstreamErrorFromResponse(500, openaiBody("x")).param).toBeUndefined();
    const vllm = JSON.stringify({
      object: "error",
      message: "bad",
      type: "BadRequestError",
      param: null,
      code: 400,
    });
    expect(upstreamErrorFromResponse(400, vllm).param).toBeUndefined();
  });

  it("strips stack traces and truncates long messages to 1,000 characters", () => {
    const traced = openaiBody(
      'Invalid schema\nTraceback (most recent call last):\n  File "/vllm/entrypoints/openai/api_server.py", line 42',
    );
    expect(upstreamErrorFromResponse(400, traced).message).toBe("Invalid schema");
    const jsStack = openaiBody(
      "Bad input\n    at parse (/app/dist/server.js:10:5)\n    at main (/app/x.js:1:1)",
    );
    expect(upstreamErrorFromResponse(400, jsStack).message).toBe("Bad input");
    const long = upstreamErrorFromResponse(413, openaiBody("x".repeat(5000))).message;
    expect(long.length).toBe(1000);
    const onlyTrace = openaiBody('Traceback (most recent call last):\n  File "a.py", line 1');
    expect(upstreamErrorFromResponse(400, onlyTrace).message).toBe(
      "The upstream engine refused the request (status 400).",
    );
  });

  it.each([408, 429, 500, 502, 503, 504, 507, 599])("%i is retryable, with a generic message", (status) => {
    const err = upstreamErrorFromResponse(status, openaiBody("CUDA out of memory at 0x7f3a"));
    expect(err).toMatchObject({ status, retryable: true, clientError: false });
    expect(err.message).toBe(`The upstream engine failed (status ${status}).`);
    expect(err.detail).toBe("CUDA out of memory at 0x7f3a");
  });

  it.each([401, 403])(
    "%i is the operator's misconfiguration: neither retryable nor the client's",
    (status) => {
      const err = upstreamErrorFromResponse(status, openaiBody("Invalid API key sk-live-abc"));
      expect(err).toMatchObject({ status, retryable: false, clientError: false });
      expect(err.message).not.toContain("sk-live");
    },
  );
});

describe("readModelsResponse", () => {
  it("vLLM: owned_by vllm, max_model_len", () => {
    const body = {
      object: "list",
      data: [
        {
          id: "Qwen/Qwen3-8B",
          object: "model",
          created: 1763900000,
          owned_by: "vllm",
          root: "Qwen/Qwen3-8B",
          parent: null,
          max_model_len: 32768,
          permission: [],
        },
      ],
    };
    expect(readModelsResponse(body, "Qwen/Qwen3-8B")).toEqual({
      present: true,
      contextSize: 32768,
      kind: "vllm",
    });
    expect(readModelsResponse(body, "other")).toEqual({
      present: false,
      contextSize: undefined,
      kind: "vllm",
    });
  });

  it("SGLang: owned_by sglang", () => {
    const body = {
      object: "list",
      data: [{ id: "m", object: "model", owned_by: "sglang", max_model_len: 8192 }],
    };
    expect(readModelsResponse(body, "m")).toEqual({ present: true, contextSize: 8192, kind: "sglang" });
  });

  it("llama-server: owned_by llamacpp, an alias matches, the slot's n_ctx before n_ctx_train", () => {
    const body = {
      models: [{ name: "/models/smollm2.gguf", model: "/models/smollm2.gguf" }],
      object: "list",
      data: [
        {
          id: "/models/smollm2.gguf",
          aliases: ["smollm2-135m-instruct"],
          object: "model",
          created: 1763900000,
          owned_by: "llamacpp",
          meta: { vocab_type: 2, n_vocab: 49152, n_ctx: 2048, n_ctx_train: 8192, n_embd: 576 },
        },
      ],
    };
    expect(readModelsResponse(body, "smollm2-135m-instruct")).toEqual({
      present: true,
      contextSize: 2048,
      kind: "llama-server",
    });
    const older = {
      object: "list",
      data: [{ id: "smol", owned_by: "llamacpp", meta: { n_ctx_train: 8192 } }],
    };
    expect(readModelsResponse(older, "smol").contextSize).toBe(8192);
  });

  it("Hearth: owned_by hearth, context_length", () => {
    const body = {
      object: "list",
      data: [{ id: "smol", object: "model", created: 1, owned_by: "hearth", context_length: 2048 }],
    };
    expect(readModelsResponse(body, "smol")).toEqual({ present: true, contextSize: 2048, kind: "hearth" });
  });

  it("Ollama: owned_by library or a name:tag id; no context size", () => {
    const body = {
      object: "list",
      data: [
        { id: "qwen3:0.6b", object: "model", created: 1, owned_by: "library" },
        { id: "ana/mistral-tuned:latest", object: "model", created: 1, owned_by: "ana" },
      ],
    };
    expect(readModelsResponse(body, "qwen3:0.6b")).toEqual({
      present: true,
      contextSize: undefined,
      kind: "ollama",
    });
    expect(readModelsResponse(body, "ana/mistral-tuned:latest").kind).toBe("ollama");
  });

  it("anything else is plain OpenAI; a body that is no model list tells nothing", () => {
    const body = { object: "list", data: [{ id: "gpt-4o-mini", object: "model", owned_by: "system" }] };
    expect(readModelsResponse(body, "gpt-4o-mini")).toEqual({
      present: true,
      contextSize: undefined,
      kind: "openai",
    });
    expect(readModelsResponse({ error: "nope" }, "x")).toEqual({
      present: false,
      contextSize: undefined,
      kind: undefined,
    });
    expect(readModelsResponse({ object: "list", data: [] }, "x")).toEqual({
      present: false,
      contextSize: undefined,
      kind: undefined,
    });
  });
});
