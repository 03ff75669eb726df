// Rate limits through a real `hearth serve` and the official openai client: x-ratelimit-* headers on /v1, 429s
// (requests and tokens, streamed or not) answered before any 200, with OpenAI's body and retry headers.
import OpenAI, { type APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
const MESSAGES = [{ role: "user" as const, content: "Say hello." }];
let server: ServerProcess;

beforeAll(async () => {
  // Memory limiter: this suite must not depend on (or write to) a shared Redis.
  server = await startServerProcess({ env: { HEARTH_REDIS_URL: "" } });
});

afterAll(async () => {
  await server?.stop();
});

async function hearth(...args: string[]): Promise<string> {
  return (await hearthCli(server, args)).stdout;
}

/** A new organization with the model and the given limits, and a client holding one of its keys. */
async function orgClient(name: string, limits: { rpm?: number; tpm?: number }): Promise<OpenAI> {
  const flags = Object.entries(limits).flatMap(([flag, value]) => [`--${flag}`, String(value)]);
  await hearth("orgs", "create", name, "--models", MODEL, ...flags);
  const key = (await hearth("keys", "create", "--org", name)).trim().split("\n").at(-1) ?? "";
  return openaiClient(server, key);
}

async function rateLimited(promise: Promise<unknown>): Promise<APIError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.RateLimitError);
  return err as APIError;
}

/** The x-ratelimit-* headers of a response, by name. */
function limitHeaders(headers: Headers): Record<string, string> {
  return Object.fromEntries([...headers].filter(([name]) => name.startsWith("x-ratelimit-")));
}

/** Reads the org's windows through GET /v1/models (which consumes nothing) until `done` holds. */
async function modelsHeadersUntil(
  client: OpenAI,
  done: (headers: Record<string, string>) => boolean,
): Promise<Record<string, string>> {
  let headers: Record<string, string> = {};
  for (let i = 0; i < 100; i++) {
    headers = limitHeaders((await client.models.list().withResponse()).response.headers);
    if (done(headers)) return headers;
    await new Promise((r) => setTimeout(r, 50));
  }
  return headers;
}

function expectRetryHeaders(headers: Headers): void {
  const seconds = Number(headers.get("retry-after"));
  const ms = Number(headers.get("retry-after-ms"));
  expect(Number.isInteger(seconds)).toBe(true);
  expect(seconds).toBeGreaterThanOrEqual(1);
  expect(seconds).toBeLessThanOrEqual(60);
  expect(ms).toBeGreaterThanOrEqual(1);
  expect(ms).toBeLessThanOrEqual(60_000);
  expect(seconds).toBe(Math.ceil(ms / 1000));
}

describe("x-ratelimit-* headers", () => {
  it("are on /v1 responses: the org's windows, the pre-charge at admission, the real count after", async () => {
    const client = await orgClient("headers-org", { rpm: 5, tpm: 10_000 });
    const before = await client.models.list().withResponse();
    expect(limitHeaders(before.response.headers)).toEqual({
      "x-ratelimit-limit-requests": "5",
      "x-ratelimit-remaining-requests": "5",
      "x-ratelimit-reset-requests": "0s",
      "x-ratelimit-limit-tokens": "10000",
      "x-ratelimit-remaining-tokens": "10000",
      "x-ratelimit-reset-tokens": "0s",
    });

    const { data: completion, response } = await client.chat.completions
      .create({ model: MODEL, messages: MESSAGES, max_tokens: 5 })
      .withResponse();
    const usage = completion.usage;
    if (usage === undefined) throw new Error("no usage");
    const headers = limitHeaders(response.headers);
    expect(headers["x-ratelimit-limit-requests"]).toBe("5");
    expect(headers["x-ratelimit-remaining-requests"]).toBe("4");
    // Charged at admission: prompt + max_tokens.
    expect(headers["x-ratelimit-remaining-tokens"]).toBe(String(10_000 - usage.prompt_tokens - 5));
    expect(headers["x-ratelimit-reset-requests"]).toMatch(/^(\d+(\.\d+)?s|\d+ms|1m0s)$/);

    // Settled: the window holds what the request really used.
    const after = await modelsHeadersUntil(
      client,
      (h) => h["x-ratelimit-remaining-tokens"] === String(10_000 - usage.total_tokens),
    );
    expect(after["x-ratelimit-remaining-tokens"]).toBe(String(10_000 - usage.total_tokens));
    expect(after["x-ratelimit-remaining-requests"]).toBe("4");
  });

  it("are absent for an unlimited org", async () => {
    const client = await orgClient("unlimited-org", {});
    const { response } = await client.chat.completions
      .create({ model: MODEL, messages: MESSAGES, max_tokens: 1 })
      .withResponse();
    expect(limitHeaders(response.headers)).toEqual({});
    expect(limitHeaders((await client.models.list().withResponse()).response.headers)).toEqual({});
  });
});

describe("requests per minute", () => {
  it("answers the request over the limit 429 before any 200, streamed or not, with OpenAI's body", async () => {
    const client = await orgClient("rpm-org", { rpm: 3 });
    await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 1 });
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      max_tokens: 1,
      stream: true,
    });
    for await (const _ of stream) {
      // drain
    }
    await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 1 });

    const err = await rateLimited(
      client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 1 }),
    );
    expect(err.status).toBe(429);
    expect(err.error).toEqual({
      message: expect.stringMatching(
        /^Rate limit reached for requests per min \(RPM\) in organization rpm-org: Limit 3, Used 3, Requested 1\. Please try again in (\d+(\.\d+)?s|\d+ms|1m0s)\.$/,
      ),
      type: "requests",
      param: null,
      code: "rate_limit_exceeded",
    });
    expect(err.message).not.toMatch(/https?:\/\/|127\.0\.0\.1/);
    const headers = err.headers as Headers;
    expectRetryHeaders(headers);
    expect(headers.get("x-request-id")).toMatch(/^req_/);
    expect(limitHeaders(headers)).toMatchObject({
      "x-ratelimit-limit-requests": "3",
      "x-ratelimit-remaining-requests": "0",
    });

    // Streamed: the same 429, as a status (the SDK throws at create), never a 200 with an error in the stream.
    const streamed = await rateLimited(
      client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 1, stream: true }),
    );
    expect(streamed.status).toBe(429);
    expect(streamed.type).toBe("requests");
    expect(streamed.code).toBe("rate_limit_exceeded");
    expectRetryHeaders(streamed.headers as Headers);

    // Refusals consumed nothing and /v1/models still answers, with the spent window.
    const now = await modelsHeadersUntil(client, () => true);
    expect(now["x-ratelimit-remaining-requests"]).toBe("0");
  });

  it("takes a changed limit at once (hearth orgs set-limits)", async () => {
    const client = await orgClient("change-org", { rpm: 1 });
    await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 1 });
    await rateLimited(client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 1 }));
    await hearth("orgs", "set-limits", "change-org", "--rpm", "2");
    const { response } = await client.chat.completions
      .create({ model: MODEL, messages: MESSAGES, max_tokens: 1 })
      .withResponse();
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("2");
    expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("0");
  });
});

describe("tokens per minute", () => {
  it("refuses a max_tokens larger than the whole window, without asking the client to retry", async () => {
    const client = await orgClient("tpm-large-org", { tpm: 500 });
    for (const stream of [false, true]) {
      const err = await rateLimited(
        client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 1000, stream }),
      );
      expect(err.error).toMatchObject({ type: "tokens", param: null, code: "rate_limit_exceeded" });
      expect(err.message).toMatch(
        /Request too large for tokens per min \(TPM\) in organization tpm-large-org: Limit 500, Requested \d+\. The input or output tokens must be reduced in order to run successfully\./,
      );
      const headers = err.headers as Headers;
      expect(headers.get("x-should-retry")).toBe("false");
      expectRetryHeaders(headers);
    }
    // Nothing was charged.
    const now = await modelsHeadersUntil(client, () => true);
    expect(now["x-ratelimit-remaining-tokens"]).toBe("500");
  });

  it("refuses a request whose pre-charge does not fit what is left, streamed or not", async () => {
    const client = await orgClient("tpm-org", { tpm: 500 });
    const first = await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 50 });
    const usage = first.usage;
    if (usage === undefined) throw new Error("no usage");
    const left = 500 - usage.total_tokens;
    await modelsHeadersUntil(client, (h) => h["x-ratelimit-remaining-tokens"] === String(left));
    // One token more than is left: refused.
    const maxTokens = left - usage.prompt_tokens + 1;
    for (const stream of [false, true]) {
      const err = await rateLimited(
        client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: maxTokens, stream }),
      );
      expect(err.error).toMatchObject({ type: "tokens", code: "rate_limit_exceeded" });
      expect(err.message).toContain(
        `Rate limit reached for tokens per min (TPM) in organization tpm-org: Limit 500, Used ${usage.total_tokens}, Requested ${left + 1}. Please try again in `,
      );
      expectRetryHeaders(err.headers as Headers);
      expect(limitHeaders(err.headers as Headers)).toMatchObject({
        "x-ratelimit-remaining-tokens": String(left),
      });
    }
    // Exactly what is left: admitted (the 200's headers are all this needs; the stream is then dropped).
    const { data: stream, response } = await client.chat.completions
      .create({ model: MODEL, messages: MESSAGES, max_tokens: maxTokens - 1, stream: true })
      .withResponse();
    expect(response.status).toBe(200);
    expect(response.headers.get("x-ratelimit-remaining-tokens")).toBe("0");
    stream.controller.abort();
  });
});
