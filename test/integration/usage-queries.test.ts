// Usage summaries on PGlite and PostgreSQL: totals, ranges, grouping by UTC day, model and key.
import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/open-store.js";
import { usageRecords } from "../../src/store/schema.js";
import { emptyUsageTotals, UsageQueries } from "../../src/usage/queries.js";
import type { UsageRecord } from "../../src/usage/types.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";

const ORG = `org_${randomUUID()}`;
const OTHER_ORG = `org_${randomUUID()}`;

function row(at: string, overrides: Partial<UsageRecord> = {}): UsageRecord {
  return {
    at: new Date(at),
    orgId: ORG,
    keyId: "key_a",
    model: "tiny",
    requestId: `req_${randomUUID()}`,
    promptTokens: 10,
    completionTokens: 5,
    reasoningTokens: 0,
    cachedTokens: 0,
    status: "completed",
    latencyMs: 1,
    ...overrides,
  };
}

// Around a UTC midnight, so grouping by day must not depend on the session's time zone.
const RECORDS: UsageRecord[] = [
  row("2030-03-01T23:59:59.999Z", { promptTokens: 100, completionTokens: 20, cachedTokens: 64, user: "bob" }),
  row("2030-03-02T00:00:00.000Z", {
    model: "small",
    keyId: "key_b",
    completionTokens: 7,
    reasoningTokens: 3,
    user: "alice",
  }),
  row("2030-03-02T12:00:00.000Z", { status: "aborted", completionTokens: 2, user: "alice" }),
  row("2030-03-04T08:00:00.000Z", {
    model: "small",
    status: "error",
    promptTokens: 30,
    completionTokens: 0,
    endpoint: "responses",
  }),
  row("2030-03-02T10:00:00.000Z", { orgId: OTHER_ORG, promptTokens: 1000, user: "alice" }),
];

describe.each(STORE_BACKENDS)("UsageQueries on %s", (_name, makeBackend) => {
  let backend: Backend;
  let store: Store;
  let queries: UsageQueries;

  beforeAll(async () => {
    backend = await makeBackend();
    store = await openStore(backend.options);
    await store.db.insert(usageRecords).values(RECORDS);
    queries = new UsageQueries(store.db);
  });

  afterAll(async () => {
    await store?.close();
    await backend?.cleanup();
  });

  it("totals every record of the org and nothing of other orgs", async () => {
    expect(await queries.summary(ORG)).toEqual({
      totals: {
        requests: 4,
        prompt_tokens: 150,
        completion_tokens: 29,
        reasoning_tokens: 3,
        cached_tokens: 64,
        total_tokens: 179,
        aborted: 1,
        errors: 1,
      },
      groups: [],
    });
  });

  it("answers zeros for an org without usage", async () => {
    expect(await queries.summary("org_none", { by: "day" })).toEqual({
      totals: emptyUsageTotals(),
      groups: [],
    });
  });

  it("groups by UTC day, in order, whatever the session's time zone", async () => {
    const summary = await store.db.transaction(async (tx) => {
      await tx.execute(sql`set local time zone 'Pacific/Kiritimati'`);
      return new UsageQueries(tx).summary(ORG, { by: "day" });
    });
    expect(summary.groups.map((g) => [g.key, g.requests, g.total_tokens])).toEqual([
      ["2030-03-01", 1, 120],
      ["2030-03-02", 2, 29],
      ["2030-03-04", 1, 30],
    ]);
    expect(summary.totals.requests).toBe(4);
  });

  it("groups by model and by key, with totals equal to the sum of the groups", async () => {
    const byModel = await queries.summary(ORG, { by: "model" });
    expect(byModel.groups).toEqual([
      {
        key: "small",
        requests: 2,
        prompt_tokens: 40,
        completion_tokens: 7,
        reasoning_tokens: 3,
        cached_tokens: 0,
        total_tokens: 47,
        aborted: 0,
        errors: 1,
      },
      {
        key: "tiny",
        requests: 2,
        prompt_tokens: 110,
        completion_tokens: 22,
        reasoning_tokens: 0,
        cached_tokens: 64,
        total_tokens: 132,
        aborted: 1,
        errors: 0,
      },
    ]);
    expect(byModel.totals).toEqual((await queries.summary(ORG)).totals);
    const byKey = await queries.summary(ORG, { by: "key" });
    expect(byKey.groups.map((g) => [g.key, g.requests])).toEqual([
      ["key_a", 3],
      ["key_b", 1],
    ]);
  });

  it("groups by endpoint: records from before there were two count as chat completions", async () => {
    const byEndpoint = await queries.summary(ORG, { by: "endpoint" });
    expect(byEndpoint.groups.map((g) => [g.key, g.requests, g.prompt_tokens])).toEqual([
      ["chat.completions", 3, 120],
      ["responses", 1, 30],
    ]);
    expect(byEndpoint.totals).toEqual((await queries.summary(ORG)).totals);
  });

  it("filters by model: one chart series, by day", async () => {
    const small = await queries.summary(ORG, { by: "day", model: "small" });
    expect(small.groups.map((g) => [g.key, g.requests, g.total_tokens])).toEqual([
      ["2030-03-02", 1, 17],
      ["2030-03-04", 1, 30],
    ]);
    expect(small.totals.requests).toBe(2);
    expect((await queries.summary(ORG, { model: "none" })).totals).toEqual(emptyUsageTotals());
  });

  it("filters by user: exactly that string, within the org, with the other filters", async () => {
    const alice = await queries.summary(ORG, { user: "alice", by: "key" });
    expect(alice.totals).toMatchObject({ requests: 2, prompt_tokens: 20, completion_tokens: 9, aborted: 1 });
    expect(alice.groups.map((g) => [g.key, g.requests])).toEqual([
      ["key_a", 1],
      ["key_b", 1],
    ]);
    expect((await queries.summary(ORG, { user: "alice", model: "tiny" })).totals.requests).toBe(1);
    expect((await queries.summary(ORG, { user: "bob" })).totals.total_tokens).toBe(120);
    expect((await queries.summary(OTHER_ORG, { user: "alice" })).totals.prompt_tokens).toBe(1000);
    // Exact: neither a prefix nor another case matches.
    expect((await queries.summary(ORG, { user: "ali" })).totals).toEqual(emptyUsageTotals());
    expect((await queries.summary(ORG, { user: "Alice" })).totals).toEqual(emptyUsageTotals());
  });

  it("counts since inclusively and until exclusively", async () => {
    const midnight = new Date("2030-03-02T00:00:00.000Z");
    const before = await queries.summary(ORG, { until: midnight });
    expect(before.totals.requests).toBe(1);
    const after = await queries.summary(ORG, { since: midnight, by: "day" });
    expect(after.groups.map((g) => g.key)).toEqual(["2030-03-02", "2030-03-04"]);
    const window = await queries.summary(ORG, { since: midnight, until: new Date("2030-03-03T00:00:00Z") });
    expect(window.totals).toMatchObject({ requests: 2, aborted: 1, completion_tokens: 9 });
    const empty = await queries.summary(ORG, { since: new Date("2031-01-01T00:00:00Z") });
    expect(empty.totals).toEqual(emptyUsageTotals());
  });
});
