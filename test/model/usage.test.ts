// Usage over HTTP with a real server process, the real model and a real PostgreSQL: every admitted request leaves
// one record with the tokens its response reported (or, without reported usage, the tokens actually generated),
// and `hearth usage --json` adds them up.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/open-store.js";
import { type UsageRecordRow, usageRecords } from "../../src/store/schema.js";
import type { UsageTotals } from "../../src/usage/queries.js";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";
import { type Backend, postgresBackend } from "../support/store-backends.js";

const MODEL = "smollm2-135m-instruct";
const STORY: OpenAI.ChatCompletionMessageParam[] = [
  { role: "user", content: "Write a very long story about a lighthouse keeper and the sea." },
];

let backend: Backend;
let server: ServerProcess;
let store: Store;
/** Requests whose responses reported usage, and those that did not (no include_usage, aborted). */
let reported: { id: string; client: OpenAI };
let unreported: { id: string; client: OpenAI };
let suiteStartedAt: Date;

async function hearth(...args: string[]): Promise<string> {
  return (await hearthCli(server, args)).stdout;
}

async function newKey(name: string): Promise<{ id: string; client: OpenAI }> {
  const created = JSON.parse(
    await hearth("keys", "create", "--org", "default", "--name", name, "--json"),
  ) as {
    id: string;
    key: string;
  };
  return { id: created.id, client: openaiClient(server, created.key) };
}

/** The request's usage record, once the meter has written it (within its flush interval). */
async function recordOf(requestId: string | null): Promise<UsageRecordRow> {
  expect(requestId).toMatch(/^req_/);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const [row] = await store.db
      .select()
      .from(usageRecords)
      .where(eq(usageRecords.requestId, requestId ?? ""));
    if (row !== undefined) return row;
    if (Date.now() > deadline) throw new Error(`no usage record for ${requestId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const reportedUsage: OpenAI.CompletionUsage[] = [];
const unreportedRecords: UsageRecordRow[] = [];

function expectRecordMatches(record: UsageRecordRow, usage: OpenAI.CompletionUsage | null | undefined) {
  expect(usage).toBeDefined();
  if (usage === null || usage === undefined) return;
  expect(record).toMatchObject({
    status: "completed",
    model: MODEL,
    keyId: reported.id,
    promptTokens: usage.prompt_tokens,
    completionTokens: usage.completion_tokens,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    reasoningTokens: usage.completion_tokens_details?.reasoning_tokens ?? 0,
  });
  expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
  reportedUsage.push(usage);
}

beforeAll(async () => {
  backend = await postgresBackend();
  const databaseUrl = backend.options.databaseUrl ?? "";
  server = await startServerProcess({ env: { HEARTH_DATABASE_URL: databaseUrl } });
  store = await openStore(backend.options);
  suiteStartedAt = new Date();
  reported = await newKey("reported");
  unreported = await newKey("unreported");
});

afterAll(async () => {
  await server?.stop();
  await store?.close();
  await backend?.cleanup();
});

describe("usage records of chat completions", () => {
  it("non-streamed, n=1 and n=2: the record holds the reported usage", async () => {
    for (const n of [1, 2]) {
      const { data, response } = await reported.client.chat.completions
        .create({ model: MODEL, messages: STORY, max_tokens: 8, n })
        .withResponse();
      expect(data.choices).toHaveLength(n);
      expectRecordMatches(await recordOf(response.headers.get("x-request-id")), data.usage);
    }
  });

  it("streamed with include_usage, n=1 and n=2: the record holds the usage of the last chunk", async () => {
    for (const n of [1, 2]) {
      const { data: stream, response } = await reported.client.chat.completions
        .create({
          model: MODEL,
          messages: STORY,
          max_tokens: 8,
          n,
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
      expectRecordMatches(await recordOf(response.headers.get("x-request-id")), usage);
    }
  });

  it("streamed without include_usage: the record holds the tokens generated", async () => {
    const { data: stream, response } = await unreported.client.chat.completions
      .create({ model: MODEL, messages: STORY, max_tokens: 8, stream: true })
      .withResponse();
    let contentChunks = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      expect(chunk.usage ?? undefined).toBeUndefined();
      const choice = chunk.choices[0];
      if (choice?.delta.content) contentChunks++;
      finish = choice?.finish_reason ?? finish;
    }
    const record = await recordOf(response.headers.get("x-request-id"));
    expect(record).toMatchObject({ status: "completed", keyId: unreported.id });
    // The same messages as the reported requests: the same prompt.
    expect(record.promptTokens).toBe(reportedUsage[0]?.prompt_tokens);
    // Every content chunk carries at least one token.
    expect(record.completionTokens).toBeGreaterThanOrEqual(contentChunks);
    if (finish === "length") expect(record.completionTokens).toBe(8);
    else expect(record.completionTokens).toBeLessThanOrEqual(8);
    unreportedRecords.push(record);
  });

  it("a stream the client aborts: status aborted with the tokens generated until then", async () => {
    const maxTokens = 1500;
    const { data: stream, response } = await unreported.client.chat.completions
      .create({ model: MODEL, messages: STORY, max_tokens: maxTokens, stream: true })
      .withResponse();
    let contentChunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) contentChunks++;
      if (contentChunks === 6) break; // leaving the loop aborts the request
    }
    expect(contentChunks).toBe(6);
    const record = await recordOf(response.headers.get("x-request-id"));
    expect(record).toMatchObject({ status: "aborted", keyId: unreported.id });
    expect(record.completionTokens).toBeGreaterThanOrEqual(contentChunks);
    expect(record.completionTokens).toBeLessThan(maxTokens);
    unreportedRecords.push(record);
  });

  it("hearth usage --json adds up exactly what the responses reported and the records of the others", async () => {
    expect(reportedUsage).toHaveLength(4);
    expect(unreportedRecords).toHaveLength(2);
    const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
    const expectedReported: UsageTotals = {
      requests: 4,
      prompt_tokens: sum(reportedUsage.map((u) => u.prompt_tokens)),
      completion_tokens: sum(reportedUsage.map((u) => u.completion_tokens)),
      reasoning_tokens: sum(reportedUsage.map((u) => u.completion_tokens_details?.reasoning_tokens ?? 0)),
      cached_tokens: sum(reportedUsage.map((u) => u.prompt_tokens_details?.cached_tokens ?? 0)),
      total_tokens: sum(reportedUsage.map((u) => u.total_tokens)),
      aborted: 0,
      errors: 0,
    };
    const expectedUnreported: UsageTotals = {
      requests: 2,
      prompt_tokens: sum(unreportedRecords.map((r) => r.promptTokens)),
      completion_tokens: sum(unreportedRecords.map((r) => r.completionTokens)),
      reasoning_tokens: 0,
      cached_tokens: sum(unreportedRecords.map((r) => r.cachedTokens)),
      total_tokens: sum(unreportedRecords.map((r) => r.promptTokens + r.completionTokens)),
      aborted: 1,
      errors: 0,
    };
    const byKey = JSON.parse(
      await hearth("usage", "--org", "default", "--by", "key", "--json"),
    ) as UsageTotals & {
      groups: ({ key: string } & UsageTotals)[];
    };
    // Groups come in the database's collation order of the (random) key ids: compare them in one order.
    const byId = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : 1);
    expect([...byKey.groups].sort(byId)).toEqual(
      [
        { key: reported.id, ...expectedReported },
        { key: unreported.id, ...expectedUnreported },
      ].sort(byId),
    );
    const total = JSON.parse(await hearth("usage", "--org", "default", "--json")) as UsageTotals;
    expect(total).toMatchObject({
      requests: 6,
      prompt_tokens: expectedReported.prompt_tokens + expectedUnreported.prompt_tokens,
      completion_tokens: expectedReported.completion_tokens + expectedUnreported.completion_tokens,
      total_tokens: expectedReported.total_tokens + expectedUnreported.total_tokens,
      aborted: 1,
      errors: 0,
    });
    // The admin API the CLI reads, asked directly: by UTC day, since the suite started.
    const adminToken = readFileSync(join(server.dataDir, "admin-token"), "utf8").trim();
    const since = encodeURIComponent(suiteStartedAt.toISOString());
    const response = await fetch(`${server.url}/admin/v1/orgs/default/usage?by=day&since=${since}`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(response.status).toBe(200);
    const byDay = (await response.json()) as { groups: { key: string; requests: number }[] };
    expect(byDay.groups.at(-1)?.key).toBe(new Date().toISOString().slice(0, 10));
    expect(byDay.groups.reduce((n, g) => n + g.requests, 0)).toBe(6);
  });
});
