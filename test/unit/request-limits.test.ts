// Pre-admission work through the HTTP API on the fake engine: the request is counted (RPM) before any work on it,
// so 400s still spend the window and a key at its limit gets 429 before its body is read; each size bound of a
// request (messages, prompt characters, stop, tools, schema bytes, user, metadata) answers a 400 naming the limit
// and the parameter, and a request at the bound is served; OpenAI's rule for assistant messages without content.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QueueFullError } from "../../src/engine/errors.js";
import type { GenerationRequest, PreparedRequest } from "../../src/engine/types.js";
import { FAKE_MODEL, type FakeEngine } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

/** Room for thousands of messages: the context check must not decide the tests of the request bounds. */
const ROOMY = "roomy";

let harness: TestApp<FakeEngine>;
/** Calls of the engine's `prepare` (rendering and tokenizing on a real engine), refused or not. */
let prepares = 0;

beforeAll(async () => {
  harness = await startTestApp({ models: [{ id: FAKE_MODEL }, { id: ROOMY, contextSize: 131072 }] });
  const engine = harness.engine;
  const prepare = engine.prepare.bind(engine);
  engine.prepare = (request: GenerationRequest): Promise<PreparedRequest> => {
    prepares++;
    return prepare(request);
  };
});

afterAll(async () => {
  await harness?.close();
});

interface ErrorJson {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const user = (content: string) => ({ role: "user", content });
const body = (overrides: Record<string, unknown> = {}) => ({
  model: ROOMY,
  messages: [user("Say hello.")],
  max_tokens: 4,
  ...overrides,
});

async function expect400(response: Response, param: string, message: string | RegExp): Promise<void> {
  expect(response.status).toBe(400);
  const { error } = (await response.json()) as ErrorJson;
  expect(error.type).toBe("invalid_request_error");
  expect(error.param).toBe(param);
  if (typeof message === "string") expect(error.message).toBe(message);
  else expect(error.message).toMatch(message);
}

async function expect200(response: Response): Promise<void> {
  if (response.status !== 200)
    throw new Error(`expected 200, got ${response.status}: ${await response.text()}`);
  await response.body?.cancel();
}

/** A body that is not JSON. */
function notJson(key: string): Promise<Response> {
  return Promise.resolve(
    harness.app.request("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: "{not json",
    }),
  );
}

/** A new org with `rpm` requests per minute and a key for it. */
async function orgWithRpm(name: string, rpm: number): Promise<string> {
  await harness.services.tenancy.orgs.create(name, [FAKE_MODEL, ROOMY], { rpm });
  return (await harness.services.tenancy.keys.create(name)).key;
}

describe("requests per minute are charged before any work on the request", () => {
  it("counts requests refused with 400, so a key at its RPM gets 429 before its body is read or prepared", async () => {
    const key = await orgWithRpm("flood", 4);
    const before = prepares;
    // Refused at each stage: validation, a size bound, the engine's context check (after prepare).
    await expect400(await harness.chat(body({ temperature: 5 }), key), "temperature", /temperature/);
    await expect400(
      await harness.chat(body({ stop: ["x".repeat(257)] }), key),
      "stop[0]",
      /at most 256 character/,
    );
    const overflow = await harness.chat(body({ model: FAKE_MODEL, max_tokens: 1_000_000 }), key);
    expect(overflow.status).toBe(400);
    expect(((await overflow.json()) as ErrorJson).error.code).toBe("context_length_exceeded");
    expect(prepares).toBe(before + 1);
    // Not even JSON: still the client's request, still counted.
    const garbage = await notJson(key);
    expect(garbage.status).toBe(400);

    // The window is spent by refusals alone: valid requests and garbage alike now get 429, and nothing is prepared.
    const limited = await harness.chat(body(), key);
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as ErrorJson).error).toMatchObject({
      type: "requests",
      code: "rate_limit_exceeded",
    });
    expect(limited.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const unread = await notJson(key);
    expect(unread.status).toBe(429);
    expect(prepares).toBe(before + 1);
  });

  it("gives the request back when the refusal is the server's (engine overloaded)", async () => {
    const key = await orgWithRpm("overloaded", 2);
    harness.engine.replyOnce({ enqueueError: new QueueFullError(ROOMY) });
    const refused = await harness.chat(body(), key);
    expect(refused.status).toBe(503);
    await refused.body?.cancel();
    await expect200(await harness.chat(body(), key));
    await expect200(await harness.chat(body(), key));
    expect((await harness.chat(body(), key)).status).toBe(429);
  });
});

describe("size bounds of one request", () => {
  it("messages: 2048 served, 2049 refused before the engine", async () => {
    await expect200(await harness.chat(body({ messages: Array.from({ length: 2048 }, () => user("hi")) })));
    const before = prepares;
    await expect400(
      await harness.chat(body({ messages: Array.from({ length: 2049 }, () => user("hi")) })),
      "messages",
      "Invalid 'messages': expected an array with at most 2048 element(s), but got 2049 instead.",
    );
    expect(prepares).toBe(before);
  });

  it("prompt characters: 1,048,576 served, one more refused before the engine", async () => {
    // One word is one fake token: the context check does not decide this.
    await expect200(await harness.chat(body({ messages: [user("a".repeat(1_048_576))] })));
    const before = prepares;
    await expect400(
      await harness.chat(body({ messages: [user("a".repeat(1_048_000)), user("b".repeat(577))] })),
      "messages",
      "Invalid 'messages': the messages may total at most 1048576 characters, but they have 1048577.",
    );
    // Tools' descriptions are prompt text too.
    const described = [{ type: "function", function: { name: "f", description: "d".repeat(1_048_000) } }];
    await expect400(
      await harness.chat(body({ messages: [user("b".repeat(577))], tools: described })),
      "tools",
      "Invalid 'tools': the messages and the tools' descriptions may total at most 1048576 characters, but they have 1048577.",
    );
    expect(prepares).toBe(before);
  });

  it("stop: strings of 256 characters served, 257 refused", async () => {
    await expect200(await harness.chat(body({ stop: ["a".repeat(256), "b"] })));
    await expect400(
      await harness.chat(body({ stop: "s".repeat(257) })),
      "stop",
      "Invalid 'stop': expected a string with at most 256 character(s), but got 257 instead.",
    );
    await expect400(
      await harness.chat(body({ stop: ["a", "s".repeat(300)] })),
      "stop[1]",
      "Invalid 'stop[1]': expected a string with at most 256 character(s), but got 300 instead.",
    );
  });

  it("tools: 128 served (OpenAI's bound), 129 refused", async () => {
    const tools = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ type: "function", function: { name: `f${i}` } }));
    await expect200(await harness.chat(body({ tools: tools(128) })));
    await expect400(
      await harness.chat(body({ tools: tools(129) })),
      "tools",
      "Invalid 'tools': expected an array with at most 128 element(s), but got 129 instead.",
    );
  });

  it("schema bytes: 64 KiB of JSON schemas in all served, one byte more refused naming the schema", async () => {
    const schema = (bytes: number) => {
      const empty = JSON.stringify({ type: "object", description: "" }).length;
      return { type: "object", description: "d".repeat(bytes - empty) };
    };
    expect(JSON.stringify(schema(65536)).length).toBe(65536);
    const format = (s: unknown) => ({ type: "json_schema", json_schema: { name: "answer", schema: s } });
    await expect200(await harness.chat(body({ response_format: format(schema(65536)) })));
    await expect400(
      await harness.chat(body({ response_format: format(schema(65537)) })),
      "response_format.json_schema.schema",
      /may total at most 65536 bytes, but they reach 65537 bytes here/,
    );
    // The bound is on all schemas together: two tools of 40,000 bytes each cross it at the second.
    const tools = [0, 1].map((i) => ({
      type: "function",
      function: { name: `f${i}`, parameters: schema(40_000) },
    }));
    await expect400(
      await harness.chat(body({ tools })),
      "tools[1].function.parameters",
      /may total at most 65536 bytes, but they reach 80000 bytes here/,
    );
  });

  it("nesting: 128 levels checked, deeper refused naming the field (10,000 levels overflowed the stack: a 500)", async () => {
    const nested = (levels: number) => {
      let value: unknown = { type: "string" };
      for (let i = 1; i < levels; i++) value = { type: "object", properties: { a: value } };
      return value;
    };
    /** `levels` objects inside each other: the body is level 1, so the innermost is at level `levels` + 1. */
    const chain = (levels: number) => {
      let value: unknown = {};
      for (let i = 1; i < levels; i++) value = [value];
      return value;
    };
    // The deepest schema the compiler takes (32 levels) is far within the bound.
    const deepest = { type: "function", function: { name: "f", parameters: nested(32) } };
    await expect200(await harness.chat(body({ tools: [deepest] })));
    // At the bound, validation answers (metadata values are strings), not the nesting check.
    const atBound = await harness.chat(body({ metadata: { k: chain(126) } }));
    expect(atBound.status).toBe(400);
    expect(((await atBound.json()) as ErrorJson).error.message).not.toMatch(/nests deeper/);
    await expect400(
      await harness.chat(body({ metadata: { k: chain(127) } })),
      "metadata",
      "Invalid 'metadata': the request body nests deeper than 128 levels.",
    );
    // 10,000 levels, as text (JSON.stringify of such an object overflows the test's own stack).
    const deep = `${'{"type":"object","properties":{"a":'.repeat(10_000)}{"type":"string"}${"}}".repeat(10_000)}`;
    const base = JSON.stringify(body()).slice(0, -1);
    for (const [param, field] of [
      ["tools", `"tools":[{"type":"function","function":{"name":"f","parameters":${deep}}}]`],
      [
        "response_format",
        `"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":${deep}}}`,
      ],
    ] as const) {
      const response = await harness.app.request("/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${harness.apiKey}`, "content-type": "application/json" },
        body: `${base},${field}}`,
      });
      await expect400(response, param, `Invalid '${param}': the request body nests deeper than 128 levels.`);
    }
  });

  it("user and safety_identifier: 64 characters served, 65 refused", async () => {
    await expect200(await harness.chat(body({ user: "u".repeat(64), safety_identifier: "s".repeat(64) })));
    for (const field of ["user", "safety_identifier"]) {
      await expect400(
        await harness.chat(body({ [field]: "u".repeat(65) })),
        field,
        `Invalid '${field}': expected a string with at most 64 character(s), but got 65 instead.`,
      );
    }
  });

  it("metadata: 16 pairs, keys of 64 and values of 512 characters served; more refused", async () => {
    const pairs = (count: number) =>
      Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, "v"]));
    await expect200(await harness.chat(body({ metadata: pairs(16) })));
    await expect200(await harness.chat(body({ metadata: { ["k".repeat(64)]: "v".repeat(512) } })));
    await expect400(
      await harness.chat(body({ metadata: pairs(17) })),
      "metadata",
      "Invalid 'metadata': expected at most 16 key-value pairs, but got 17 instead.",
    );
    await expect400(
      await harness.chat(body({ metadata: { ["k".repeat(65)]: "v" } })),
      "metadata",
      "Invalid 'metadata': keys must be at most 64 characters, but one has 65.",
    );
    await expect400(
      await harness.chat(body({ metadata: { key: "v".repeat(513) } })),
      "metadata.key",
      "Invalid 'metadata.key': expected a string with at most 512 character(s), but got 513 instead.",
    );
  });
});

describe("assistant messages", () => {
  const call = { id: "call_1", type: "function", function: { name: "lookup", arguments: "{}" } };
  const tools = [{ type: "function", function: { name: "lookup" } }];

  it("refuses one with neither content nor tool_calls, in OpenAI's words", async () => {
    await expect400(
      await harness.chat(
        body({ messages: [user("q"), { role: "assistant", content: null }, user("again")] }),
      ),
      "messages[1].content",
      "Invalid value for 'content': expected a string, got null.",
    );
    await expect400(
      await harness.chat(body({ messages: [user("q"), { role: "assistant" }, user("again")] })),
      "messages[1].content",
      "Missing required parameter: 'messages[1].content'.",
    );
    await expect400(
      await harness.chat(
        body({ messages: [user("q"), { role: "assistant", content: null, tool_calls: [] }, user("again")] }),
      ),
      "messages[1].content",
      "Invalid value for 'content': expected a string, got null.",
    );
  });

  it("accepts one with tool_calls and null or absent content, and one with empty content", async () => {
    for (const assistant of [
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "assistant", tool_calls: [call] },
    ]) {
      await expect200(
        await harness.chat(
          body({
            tools,
            messages: [user("q"), assistant, { role: "tool", tool_call_id: "call_1", content: "42" }],
          }),
        ),
      );
    }
    await expect200(
      await harness.chat(body({ messages: [user("q"), { role: "assistant", content: "" }, user("again")] })),
    );
  });
});
