// The upstream stream decoder against recorded-style streams of each dialect, fed whole and split anywhere.
import { describe, expect, it } from "vitest";
import type { GenerationEvent } from "../types.js";
import { UpstreamStreamDecoder } from "./stream-decoder.js";
import { UpstreamError, UpstreamProtocolError } from "./upstream-error.js";

/** One SSE event per chunk, as every engine writes them. */
function sse(chunks: readonly (Record<string, unknown> | string)[], eol = "\n"): string {
  return chunks
    .map((chunk) => `data: ${typeof chunk === "string" ? chunk : JSON.stringify(chunk)}${eol}${eol}`)
    .join("");
}

/** Feeds `text` in pieces of `size` characters (whole when absent) and ends the stream. */
function decode(text: string, n = 1, size?: number): GenerationEvent[] {
  const decoder = new UpstreamStreamDecoder({ n });
  const events: GenerationEvent[] = [];
  const step = size ?? text.length;
  for (let i = 0; i < text.length; i += step) events.push(...decoder.push(text.slice(i, i + step)));
  events.push(...decoder.end());
  return events;
}

const vllmMeta = {
  id: "chatcmpl-9f1c",
  object: "chat.completion.chunk",
  created: 1763900000,
  model: "Qwen/Qwen3-8B",
};
const vllmChoice = (delta: Record<string, unknown>, finish: string | null = null) => ({
  ...vllmMeta,
  choices: [
    { index: 0, delta, logprobs: null, finish_reason: finish, ...(finish ? { stop_reason: null } : {}) },
  ],
  usage: null,
});

/** vLLM serving Qwen3 with a reasoning parser: reasoning_content, then content, an empty finish, the usage chunk. */
const VLLM_REASONING = sse([
  vllmChoice({ role: "assistant", content: "" }),
  vllmChoice({ reasoning_content: "The user asks" }),
  vllmChoice({ reasoning_content: " for a capital." }),
  vllmChoice({ content: "Paris" }),
  vllmChoice({ content: "." }),
  vllmChoice({ content: "" }, "stop"),
  {
    ...vllmMeta,
    choices: [],
    usage: { prompt_tokens: 14, total_tokens: 31, completion_tokens: 17, prompt_tokens_details: null },
  },
  "[DONE]",
]);

const llamaMeta = {
  created: 1763900000,
  id: "chatcmpl-Xy8",
  model: "smollm2-135m-instruct",
  system_fingerprint: "b6490-c6c16a8",
  object: "chat.completion.chunk",
};

/** An older llama-server build: the finish rides on the last content chunk, with usage and timings. */
const LLAMA_FINISH_ON_CONTENT = sse([
  { choices: [{ finish_reason: null, index: 0, delta: { role: "assistant", content: null } }], ...llamaMeta },
  { choices: [{ finish_reason: null, index: 0, delta: { content: "Hello" } }], ...llamaMeta },
  {
    choices: [{ finish_reason: "length", index: 0, delta: { content: " world" } }],
    ...llamaMeta,
    usage: { completion_tokens: 2, prompt_tokens: 9, total_tokens: 11 },
    timings: { cache_n: 5, prompt_n: 4, prompt_ms: 3.2, predicted_n: 2, predicted_ms: 8.1 },
  },
  "[DONE]",
]);

/** This repository's llama-server: reasoning_content, an empty-delta finish, then usage with timings, and pings. */
const LLAMA_CURRENT = `: ping\n\n${sse([
  { choices: [{ finish_reason: null, index: 0, delta: { role: "assistant", content: null } }], ...llamaMeta },
  { choices: [{ finish_reason: null, index: 0, delta: { reasoning_content: "Hmm" } }], ...llamaMeta },
  { choices: [{ finish_reason: null, index: 0, delta: { content: "Hi" } }], ...llamaMeta },
  { choices: [{ finish_reason: "stop", index: 0, delta: {} }], ...llamaMeta },
  {
    choices: [],
    ...llamaMeta,
    usage: {
      completion_tokens: 3,
      prompt_tokens: 20,
      total_tokens: 23,
      prompt_tokens_details: { cached_tokens: 16 },
    },
    timings: { cache_n: 16, prompt_n: 4, predicted_n: 3 },
  },
])}: ping\n\ndata: [DONE]\n\n`;

const openaiMeta = {
  id: "chatcmpl-BqZ",
  object: "chat.completion.chunk",
  created: 1763900000,
  model: "gpt-4o-mini-2024-07-18",
  service_tier: "default",
  system_fingerprint: "fp_34a54ae93c",
};
const openaiChoice = (delta: Record<string, unknown>, finish: string | null = null) => ({
  ...openaiMeta,
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  usage: null,
});

/** OpenAI: two parallel calls; the first delta carries the name and the first argument text. */
const OPENAI_TOOLS = sse([
  openaiChoice({
    role: "assistant",
    content: null,
    tool_calls: [
      { index: 0, id: "call_a1", type: "function", function: { name: "get_weather", arguments: '{"ci' } },
    ],
    refusal: null,
  }),
  openaiChoice({ tool_calls: [{ index: 0, function: { arguments: 'ty": "Par' } }] }),
  openaiChoice({ tool_calls: [{ index: 0, function: {} }] }),
  openaiChoice({ tool_calls: [{ index: 0, function: { arguments: 'is"}' } }] }),
  openaiChoice({
    tool_calls: [
      { index: 1, id: "call_b2", type: "function", function: { name: "get_time", arguments: "" } },
    ],
  }),
  openaiChoice({ tool_calls: [{ index: 1, function: { arguments: "{}" } }] }),
  openaiChoice({}, "tool_calls"),
  {
    ...openaiMeta,
    choices: [],
    usage: {
      prompt_tokens: 82,
      completion_tokens: 31,
      total_tokens: 113,
      prompt_tokens_details: { cached_tokens: 64, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 },
    },
  },
  "[DONE]",
]);

const hearthMeta = {
  id: "chatcmpl-7Hk",
  object: "chat.completion.chunk",
  created: 1763900000,
  model: "smol",
  system_fingerprint: null,
};
const hearthChoice = (index: number, delta: Record<string, unknown>, finish: string | null = null) => ({
  ...hearthMeta,
  choices: [{ index, delta, logprobs: null, finish_reason: finish }],
  usage: null,
});

/** A Hearth worker, n = 2 with reasoning: the choices interleave, each finishes on its own. */
const HEARTH_N2 = sse([
  hearthChoice(0, { role: "assistant", content: "" }),
  hearthChoice(1, { role: "assistant", content: "" }),
  hearthChoice(1, { reasoning: "B thinks" }),
  hearthChoice(0, { reasoning: "A thinks" }),
  hearthChoice(0, { content: "A" }),
  hearthChoice(1, { content: "B" }),
  hearthChoice(1, {}, "stop"),
  hearthChoice(0, { content: "!" }),
  hearthChoice(0, {}, "length"),
  {
    ...hearthMeta,
    choices: [],
    usage: {
      prompt_tokens: 30,
      completion_tokens: 12,
      total_tokens: 42,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 6 },
    },
  },
  "[DONE]",
]);

describe("UpstreamStreamDecoder: dialects", () => {
  it("vLLM: reasoning_content becomes reasoning, the empty finish a finish, the usage chunk the last event", () => {
    expect(decode(VLLM_REASONING)).toEqual([
      { type: "delta", choice: 0, text: "The user asks", target: { kind: "reasoning" } },
      { type: "delta", choice: 0, text: " for a capital.", target: { kind: "reasoning" } },
      { type: "delta", choice: 0, text: "Paris" },
      { type: "delta", choice: 0, text: "." },
      { type: "finish", choice: 0, reason: "stop" },
      { type: "usage", usage: { promptTokens: 14, completionTokens: 17, cachedTokens: 0 } },
    ]);
  });

  it("vLLM 0.32 (`reasoning`), thinking not asked: the reasoning is not relayed, but starts the stream and counts", () => {
    // vLLM's reasoning parsers split reasoning out whatever enable_thinking says; the client did not ask for it.
    const newer = VLLM_REASONING.replaceAll('"reasoning_content"', '"reasoning"');
    const decoder = new UpstreamStreamDecoder({ n: 1, reasoning: false });
    // Up to the first content chunk: the role chunk and the two reasoning chunks.
    const reasoningOnly = newer.slice(0, newer.indexOf("data: ", newer.indexOf("for a capital.")));
    expect(decoder.push(reasoningOnly)).toEqual([]);
    expect(decoder.started).toBe(true);
    expect(decoder.deltas).toBe(2);
    expect([...decoder.push(newer.slice(reasoningOnly.length)), ...decoder.end()]).toEqual([
      { type: "delta", choice: 0, text: "Paris" },
      { type: "delta", choice: 0, text: "." },
      { type: "finish", choice: 0, reason: "stop" },
      { type: "usage", usage: { promptTokens: 14, completionTokens: 17, cachedTokens: 0 } },
    ]);
    // Asked for (the default), the same stream relays it as `reasoning`.
    expect(decode(newer).slice(0, 2)).toEqual([
      { type: "delta", choice: 0, text: "The user asks", target: { kind: "reasoning" } },
      { type: "delta", choice: 0, text: " for a capital.", target: { kind: "reasoning" } },
    ]);
  });

  it("llama-server (older): a finish on the content chunk becomes the delta then a finish; cache_n from timings", () => {
    expect(decode(LLAMA_FINISH_ON_CONTENT)).toEqual([
      { type: "delta", choice: 0, text: "Hello" },
      { type: "delta", choice: 0, text: " world" },
      { type: "finish", choice: 0, reason: "length" },
      { type: "usage", usage: { promptTokens: 9, completionTokens: 2, cachedTokens: 5 } },
    ]);
  });

  it("llama-server (current): comments are ignored, usage comes from its own chunk", () => {
    expect(decode(LLAMA_CURRENT)).toEqual([
      { type: "delta", choice: 0, text: "Hmm", target: { kind: "reasoning" } },
      { type: "delta", choice: 0, text: "Hi" },
      { type: "finish", choice: 0, reason: "stop" },
      { type: "usage", usage: { promptTokens: 20, completionTokens: 3, cachedTokens: 16 } },
    ]);
  });

  it("OpenAI tool calls: the name opens each call with empty text, argument fragments follow", () => {
    expect(decode(OPENAI_TOOLS)).toEqual([
      { type: "delta", choice: 0, text: "", target: { kind: "tool_call", call: 0, name: "get_weather" } },
      { type: "delta", choice: 0, text: '{"ci', target: { kind: "tool_call", call: 0 } },
      { type: "delta", choice: 0, text: 'ty": "Par', target: { kind: "tool_call", call: 0 } },
      { type: "delta", choice: 0, text: 'is"}', target: { kind: "tool_call", call: 0 } },
      { type: "delta", choice: 0, text: "", target: { kind: "tool_call", call: 1, name: "get_time" } },
      { type: "delta", choice: 0, text: "{}", target: { kind: "tool_call", call: 1 } },
      { type: "finish", choice: 0, reason: "tool_calls" },
      {
        type: "usage",
        usage: { promptTokens: 82, completionTokens: 31, cachedTokens: 64, reasoningTokens: 0 },
      },
    ]);
  });

  it("llama-server tool calls: an id-only fragment, then the name, then arguments", () => {
    const call = (fragment: Record<string, unknown>, finish: string | null = null) => ({
      choices: [{ finish_reason: finish, index: 0, delta: { tool_calls: [{ index: 0, ...fragment }] } }],
      ...llamaMeta,
    });
    const text = sse([
      call({ id: "Kq3", type: "function" }),
      call({ function: { name: "add" } }),
      call({ function: { arguments: '{"a":1}' } }),
      { choices: [{ finish_reason: "tool_calls", index: 0, delta: {} }], ...llamaMeta },
      { choices: [], ...llamaMeta, usage: { completion_tokens: 9, prompt_tokens: 50, total_tokens: 59 } },
      "[DONE]",
    ]);
    expect(decode(text)).toEqual([
      { type: "delta", choice: 0, text: "", target: { kind: "tool_call", call: 0, name: "add" } },
      { type: "delta", choice: 0, text: '{"a":1}', target: { kind: "tool_call", call: 0 } },
      { type: "finish", choice: 0, reason: "tool_calls" },
      { type: "usage", usage: { promptTokens: 50, completionTokens: 9, cachedTokens: 0 } },
    ]);
  });

  it("Hearth, n = 2: interleaved choices keep their index; reasoning tokens are reported", () => {
    expect(decode(HEARTH_N2, 2)).toEqual([
      { type: "delta", choice: 1, text: "B thinks", target: { kind: "reasoning" } },
      { type: "delta", choice: 0, text: "A thinks", target: { kind: "reasoning" } },
      { type: "delta", choice: 0, text: "A" },
      { type: "delta", choice: 1, text: "B" },
      { type: "finish", choice: 1, reason: "stop" },
      { type: "delta", choice: 0, text: "!" },
      { type: "finish", choice: 0, reason: "length" },
      {
        type: "usage",
        usage: { promptTokens: 30, completionTokens: 12, cachedTokens: 0, reasoningTokens: 6 },
      },
    ]);
  });

  it("Ollama: `reasoning`, index-less tool calls with parsed arguments, and `stop` after calls means tool_calls", () => {
    const meta = {
      id: "chatcmpl-412",
      object: "chat.completion.chunk",
      created: 1763900000,
      model: "qwen3:0.6b",
    };
    const text = sse([
      {
        ...meta,
        choices: [{ index: 0, delta: { role: "assistant", content: "", reasoning: "Use the tool" } }],
      },
      {
        ...meta,
        choices: [
          {
            index: 0,
            delta: {
              role: "assistant",
              content: "",
              tool_calls: [
                { id: "call_1", type: "function", function: { name: "add", arguments: '{"a":1,"b":2}' } },
                { id: "call_2", type: "function", function: { name: "neg", arguments: { x: 3 } } },
              ],
            },
            finish_reason: null,
          },
        ],
      },
      { ...meta, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: "stop" }] },
      { ...meta, choices: [], usage: { prompt_tokens: 40, completion_tokens: 22, total_tokens: 62 } },
      "[DONE]",
    ]);
    expect(decode(text)).toEqual([
      { type: "delta", choice: 0, text: "Use the tool", target: { kind: "reasoning" } },
      { type: "delta", choice: 0, text: "", target: { kind: "tool_call", call: 0, name: "add" } },
      { type: "delta", choice: 0, text: '{"a":1,"b":2}', target: { kind: "tool_call", call: 0 } },
      { type: "delta", choice: 0, text: "", target: { kind: "tool_call", call: 1, name: "neg" } },
      { type: "delta", choice: 0, text: '{"x":3}', target: { kind: "tool_call", call: 1 } },
      { type: "finish", choice: 0, reason: "tool_calls" },
      { type: "usage", usage: { promptTokens: 40, completionTokens: 22, cachedTokens: 0 } },
    ]);
  });

  it("maps finish reasons onto stop | length | tool_calls", () => {
    const finishOf = (reason: string) => {
      const text = sse([
        vllmChoice({ content: "x" }, reason),
        { choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } },
        "[DONE]",
      ]);
      return decode(text).find((event) => event.type === "finish");
    };
    expect(finishOf("stop")).toMatchObject({ reason: "stop" });
    expect(finishOf("length")).toMatchObject({ reason: "length" });
    expect(finishOf("tool_calls")).toMatchObject({ reason: "tool_calls" });
    expect(finishOf("function_call")).toMatchObject({ reason: "tool_calls" });
    expect(finishOf("content_filter")).toMatchObject({ reason: "stop" });
    expect(finishOf("abort")).toMatchObject({ reason: "stop" });
  });
});

describe("UpstreamStreamDecoder: logprobs", () => {
  const entry = (token: string, logprob: unknown, extra: Record<string, unknown> = {}) => ({
    token,
    logprob,
    bytes: [...Buffer.from(token)],
    top_logprobs: [],
    ...extra,
  });
  const logprobsOf = (events: GenerationEvent[]) =>
    events.flatMap((e) => (e.type === "delta" && e.target === undefined ? [e.logprobs] : []));

  it("vLLM: each content chunk's tokens, in OpenAI's shape, with their alternatives", () => {
    const top = [
      { token: "Paris", logprob: -0.01, bytes: [80, 97, 114, 105, 115] },
      { token: "Lyon", logprob: -4.6, bytes: [76, 121, 111, 110] },
    ];
    const events = decode(
      sse([
        vllmChoice({ role: "assistant", content: "" }),
        {
          ...vllmMeta,
          choices: [
            {
              index: 0,
              delta: { content: "Paris" },
              logprobs: { content: [entry("Paris", -0.01, { top_logprobs: top })] },
              finish_reason: null,
            },
          ],
        },
        {
          ...vllmMeta,
          choices: [
            {
              index: 0,
              delta: { content: "." },
              logprobs: { content: [entry(".", -0.2)] },
              finish_reason: "stop",
            },
          ],
        },
        { ...vllmMeta, choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } },
        "[DONE]",
      ]),
    );
    expect(logprobsOf(events)).toEqual([
      [{ token: "Paris", logprob: -0.01, bytes: [80, 97, 114, 105, 115], topLogprobs: top }],
      [{ token: ".", logprob: -0.2, bytes: [46], topLogprobs: [] }],
    ]);
  });

  it("llama-server: its extra `id` is dropped; missing bytes are the token's UTF-8; -inf and null are the floor", () => {
    const events = decode(
      sse([
        {
          ...llamaMeta,
          choices: [
            {
              index: 0,
              delta: { content: "é!" },
              logprobs: {
                content: [
                  {
                    id: 233,
                    token: "é",
                    logprob: -0.5,
                    top_logprobs: [{ id: 9, token: "x", logprob: null }],
                  },
                  { id: 0, token: "!", logprob: "-inf", bytes: [33], top_logprobs: [] },
                ],
              },
              finish_reason: "stop",
            },
          ],
        },
        { ...llamaMeta, choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } },
        "[DONE]",
      ]),
    );
    expect(logprobsOf(events)).toEqual([
      [
        {
          token: "é",
          logprob: -0.5,
          bytes: [0xc3, 0xa9],
          topLogprobs: [{ token: "x", logprob: -9999, bytes: [120] }],
        },
        { token: "!", logprob: -9999, bytes: [33], topLogprobs: [] },
      ],
    ]);
  });

  it("reasoning and tool-call tokens are not reported; a text-less chunk's tokens go with the next content", () => {
    const chunk = (delta: Record<string, unknown>, tokens: string[], finish: string | null = null) => ({
      ...vllmMeta,
      choices: [
        { index: 0, delta, logprobs: { content: tokens.map((t) => entry(t, -1)) }, finish_reason: finish },
      ],
    });
    const events = decode(
      sse([
        chunk({ reasoning_content: "Hmm" }, ["Hmm"]),
        chunk({}, ["\n"]),
        chunk({ content: "Hi" }, ["Hi"]),
        chunk(
          { tool_calls: [{ index: 0, id: "c", type: "function", function: { name: "f", arguments: "{}" } }] },
          ["{}"],
          "tool_calls",
        ),
        { ...vllmMeta, choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } },
        "[DONE]",
      ]),
    );
    expect(logprobsOf(events).map((list) => list?.map((e) => e.token))).toEqual([["\n", "Hi"]]);
    expect(events.some((e) => e.type === "delta" && e.target !== undefined && e.logprobs !== undefined)).toBe(
      false,
    );
  });

  it("no logprobs in the stream: deltas without the field", () => {
    expect(logprobsOf(decode(VLLM_REASONING))).toEqual([undefined, undefined]);
  });
});

describe("UpstreamStreamDecoder: framing", () => {
  const fixtures = { VLLM_REASONING, LLAMA_FINISH_ON_CONTENT, LLAMA_CURRENT, OPENAI_TOOLS };

  it.each(Object.entries(fixtures))(
    "%s split anywhere (every piece size 1..17) decodes the same",
    (_, text) => {
      const whole = decode(text);
      for (let size = 1; size <= 17; size++) expect(decode(text, 1, size)).toEqual(whole);
    },
  );

  it("CRLF line endings decode as LF ones", () => {
    const crlf = VLLM_REASONING.replaceAll("\n", "\r\n");
    expect(decode(crlf, 1, 5)).toEqual(decode(VLLM_REASONING));
  });

  it("a split inside a line waits for the rest of it", () => {
    const decoder = new UpstreamStreamDecoder({ n: 1 });
    const line = `data: ${JSON.stringify(vllmChoice({ content: "Hello" }))}\n\n`;
    expect(decoder.push(line.slice(0, 30))).toEqual([]);
    expect(decoder.started).toBe(false);
    expect(decoder.push(line.slice(30))).toEqual([{ type: "delta", choice: 0, text: "Hello" }]);
    expect(decoder.started).toBe(true);
  });

  it("joins an event's data lines, as SSE says", () => {
    const text =
      'data: {"choices":[{"index":0,\ndata: "delta":{"content":"x"},"finish_reason":"stop"}]}\n\n' +
      'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n';
    expect(decode(text)).toEqual([
      { type: "delta", choice: 0, text: "x" },
      { type: "finish", choice: 0, reason: "stop" },
      { type: "usage", usage: { promptTokens: 3, completionTokens: 1, cachedTokens: 0 } },
    ]);
  });

  it("a last event without its blank line still counts at the end", () => {
    const text = `${sse([vllmChoice({ content: "x" }, "stop"), { choices: [], usage: { prompt_tokens: 2, completion_tokens: 1 } }])}data: [DONE]`;
    expect(decode(text).at(-1)).toEqual({
      type: "usage",
      usage: { promptTokens: 2, completionTokens: 1, cachedTokens: 0 },
    });
  });

  it("started: false through role chunks and comments, true at the first delta (or a bare finish)", () => {
    const decoder = new UpstreamStreamDecoder({ n: 1 });
    decoder.push(`: keep-alive\n\n${sse([vllmChoice({ role: "assistant", content: "" })])}`);
    expect(decoder.started).toBe(false);
    decoder.push(sse([vllmChoice({}, "length")]));
    expect(decoder.started).toBe(true);
  });

  it("usage: the last reported wins and is readable before [DONE]; deltas counts relayed fragments", () => {
    const decoder = new UpstreamStreamDecoder({ n: 1 });
    decoder.push(
      sse([
        { ...vllmChoice({ content: "a" }), usage: { prompt_tokens: 5, completion_tokens: 1 } },
        { ...vllmChoice({ content: "b" }), usage: { prompt_tokens: 5, completion_tokens: 2 } },
      ]),
    );
    expect(decoder.usage).toEqual({ promptTokens: 5, completionTokens: 2, cachedTokens: 0 });
    expect(decoder.deltas).toBe(2);
  });

  it("a repeated finish for a choice is said once", () => {
    const text = sse([
      vllmChoice({ content: "a" }, "stop"),
      vllmChoice({}, "stop"),
      { choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } },
      "[DONE]",
    ]);
    expect(decode(text).filter((event) => event.type === "finish")).toHaveLength(1);
  });
});

describe("UpstreamStreamDecoder: failures", () => {
  it("an error frame mid-stream throws an UpstreamError after the events before it were returned", () => {
    const decoder = new UpstreamStreamDecoder({ n: 1 });
    expect(decoder.push(sse([hearthChoice(0, { content: "Hel" })]))).toHaveLength(1);
    const frame = sse([
      { error: { message: "The engine failed.", type: "server_error", param: null, code: "internal_error" } },
    ]);
    let thrown: unknown;
    try {
      decoder.push(frame);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(UpstreamError);
    expect(thrown).toMatchObject({ status: 502, retryable: true, clientError: false });
  });

  it("vLLM's error frame with a numeric code keeps its status and, for a 400, its message", () => {
    const decoder = new UpstreamStreamDecoder({ n: 1 });
    const frame = sse([
      {
        error: {
          message: "This model's maximum context length is 2048 tokens.",
          type: "BadRequestError",
          param: null,
          code: 400,
        },
      },
    ]);
    expect(() => decoder.push(frame)).toThrow(
      expect.objectContaining({
        status: 400,
        clientError: true,
        message: "This model's maximum context length is 2048 tokens.",
      }),
    );
  });

  it("older llama-server `error:` lines and `event: error` events are error frames", () => {
    const line = 'error: {"code":500,"message":"slot unavailable","type":"server_error"}\n\n';
    expect(() => new UpstreamStreamDecoder({ n: 1 }).push(line)).toThrow(UpstreamError);
    const event = 'event: error\ndata: {"message":"overloaded","type":"server_error"}\n\n';
    expect(() => new UpstreamStreamDecoder({ n: 1 }).push(event)).toThrow(
      expect.objectContaining({ status: 502, retryable: true }),
    );
  });

  it("a stream without [DONE] is a protocol error at its end", () => {
    const cut = VLLM_REASONING.slice(0, VLLM_REASONING.indexOf("data: [DONE]"));
    const decoder = new UpstreamStreamDecoder({ n: 1 });
    expect(decoder.push(cut).length).toBeGreaterThan(0);
    expect(decoder.usage).toBeDefined();
    expect(() => decoder.end()).toThrow(UpstreamProtocolError);
  });

  it("a stream cut mid-generation is a protocol error at its end, its deltas already returned", () => {
    const decoder = new UpstreamStreamDecoder({ n: 1 });
    decoder.push(sse([vllmChoice({ content: "partial" })]));
    decoder.push('data: {"id":"chatcmpl-9f1c","choi');
    expect(decoder.deltas).toBe(1);
    expect(() => decoder.end()).toThrow(/without \[DONE\]/);
  });

  it("[DONE] without a usage chunk is a protocol error at the end", () => {
    const text = sse([vllmChoice({ content: "x" }, "stop"), "[DONE]"]);
    expect(() => decode(text)).toThrow(/without a usage chunk/);
  });

  it("[DONE] before every choice finished is a protocol error", () => {
    const text = sse([
      hearthChoice(0, { content: "a" }, "stop"),
      { choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } },
      "[DONE]",
    ]);
    expect(() => decode(text, 2)).toThrow(/finish_reason for choice 1/);
  });

  it("a choice index >= n is a protocol error", () => {
    expect(() => decode(sse([hearthChoice(1, { content: "x" })]), 1)).toThrow(UpstreamProtocolError);
    expect(() => decode(sse([hearthChoice(-1, { content: "x" })]), 2)).toThrow(/out of range/);
  });

  it("malformed chunks, bad usage, arguments before a name and deltas after a finish are protocol errors", () => {
    const push = (text: string) => () => new UpstreamStreamDecoder({ n: 1 }).push(text);
    expect(push("data: {not json\n\n")).toThrow(UpstreamProtocolError);
    expect(push("data: [1,2]\n\n")).toThrow(UpstreamProtocolError);
    expect(push(sse([{ choices: {} }]))).toThrow(UpstreamProtocolError);
    expect(push(sse([{ choices: [], usage: { prompt_tokens: "9" } }]))).toThrow(/usage/);
    expect(push(sse([openaiChoice({ tool_calls: [{ index: 0, function: { arguments: "{}" } }] })]))).toThrow(
      /before the call's name/,
    );
    expect(push(sse([vllmChoice({}, "stop"), vllmChoice({ content: "more" })]))).toThrow(/after its finish/);
  });

  it("refuses a non-positive n", () => {
    expect(() => new UpstreamStreamDecoder({ n: 0 })).toThrow(RangeError);
  });
});
