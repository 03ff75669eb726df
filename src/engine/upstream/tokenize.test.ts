// Tokenize routes per dialect (request built, response read) and the prompt-token estimate.
import { describe, expect, it } from "vitest";
import { generationRequest, greedySampling } from "../../../test/support/generation-request.js";
import type { ChatMessage, GenerationRequest, OutputRequest } from "../types.js";
import {
  estimatePromptTokens,
  readTokenizeResponse,
  serverRoot,
  type TokenizeCall,
  tokenizeRequest,
} from "./tokenize.js";

const REQUEST: GenerationRequest = generationRequest("fleet-smol", {
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Hi" },
  ],
  sampling: greedySampling({ temperature: 1 }),
  cacheScope: "org_A",
});

const WIRE_MESSAGES = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Hi" },
];

const options = { endpointUrl: "http://gpu1:8000/v1/", model: "served", request: REQUEST };

describe("tokenizeRequest", () => {
  it("vLLM: one POST /tokenize at the server root with the chat; reads count", () => {
    const call = tokenizeRequest("vllm", options);
    expect(call?.url).toBe("http://gpu1:8000/tokenize");
    expect(call?.body).toEqual({
      model: "served",
      messages: WIRE_MESSAGES,
      chat_template_kwargs: { enable_thinking: false },
      add_generation_prompt: true,
    });
    expect(call?.read({ count: 17, max_model_len: 32768, tokens: [1, 2, 3] })).toBe(17);
    expect(call?.read({ detail: "Not Found" })).toBeUndefined();
  });

  it("llama-server: /apply-template, then /tokenize of its prompt as the chat path tokenizes it", () => {
    const first = tokenizeRequest("llama-server", { ...options, endpointUrl: "http://127.0.0.1:8101/v1" });
    expect(first?.url).toBe("http://127.0.0.1:8101/apply-template");
    expect(first?.body).toEqual({
      messages: WIRE_MESSAGES,
      chat_template_kwargs: { enable_thinking: false },
    });
    const prompt =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    const second = first?.read({ prompt }) as TokenizeCall;
    expect(second.url).toBe("http://127.0.0.1:8101/tokenize");
    expect(second.body).toEqual({ content: prompt, add_special: true, parse_special: true });
    expect(second.read({ tokens: [1, 9690, 198, 11, 12] })).toBe(5);
    expect(first?.read({ error: { message: "no template" } })).toBeUndefined();
  });

  it("forwards tools to the template (they are part of the prompt)", () => {
    const output: OutputRequest = {
      format: { type: "text" },
      tools: [{ name: "f", parameters: { type: "object" }, compiledParameters: {} as never }],
      toolChoice: "auto",
      parallelToolCalls: true,
    };
    const call = tokenizeRequest("vllm", { ...options, request: { ...REQUEST, output } });
    expect(call?.body.tools).toEqual([
      { type: "function", function: { name: "f", parameters: { type: "object" } } },
    ]);
  });

  it("Hearth: one POST /tokenize at the server root with the chat completion's body; reads count", () => {
    const call = tokenizeRequest("hearth", options);
    expect(call?.url).toBe("http://gpu1:8000/tokenize");
    expect(call?.body).toMatchObject({ model: "served", messages: WIRE_MESSAGES, temperature: 1 });
    expect(call?.body).not.toHaveProperty("cache_salt");
    expect(call?.read({ count: 12, max_model_len: 2048 })).toBe(12);
  });

  it.each(["sglang", "ollama", "openai"] as const)("%s has no chat tokenize route: the estimate", (kind) => {
    expect(tokenizeRequest(kind, options)).toBeUndefined();
  });

  it("readTokenizeResponse and serverRoot", () => {
    expect(readTokenizeResponse({ tokens: [] })).toBe(0);
    expect(readTokenizeResponse({ count: -1 })).toBeUndefined();
    expect(readTokenizeResponse("17")).toBeUndefined();
    expect(serverRoot("http://h:1/v1")).toBe("http://h:1");
    expect(serverRoot("https://h/api/v1//")).toBe("https://h/api");
    expect(serverRoot("http://h:1")).toBe("http://h:1");
  });
});

describe("estimatePromptTokens", () => {
  it("is ceil(UTF-8 bytes / 3) + 4 per message + 3", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "abcdef" }, // 6 bytes
      { role: "user", content: "été" }, // 5 bytes
    ];
    expect(estimatePromptTokens(messages)).toBe(Math.ceil(11 / 3) + 8 + 3);
  });

  it("counts names, tool calls and tool definitions", () => {
    const messages: ChatMessage[] = [
      { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "f", arguments: '{"x":1}' }] },
      { role: "tool", content: "42", toolCallId: "call_1" },
    ];
    const bare = estimatePromptTokens(messages);
    expect(bare).toBe(Math.ceil((1 + 7 + 2 + 6) / 3) + 8 + 3);
    const output: OutputRequest = {
      format: { type: "text" },
      tools: [{ name: "f", description: "A function", compiledParameters: {} as never }],
      toolChoice: "auto",
      parallelToolCalls: true,
    };
    expect(estimatePromptTokens(messages, output)).toBeGreaterThan(bare);
  });

  it("overcounts English: 'The quick brown fox…' is about 10 BPE tokens", () => {
    const text = "The quick brown fox jumps over the lazy dog.";
    expect(estimatePromptTokens([{ role: "user", content: text }])).toBeGreaterThanOrEqual(10 + 4 + 3);
  });
});
