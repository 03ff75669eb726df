// The usage meter against the embedded PGlite store and a real PostgreSQL: batching, the timer, retries after
// real write failures, the buffer bound, refused rows, dispose and records after it.
import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openStore, type Store } from "../../src/store/open-store.js";
import { usageRecords } from "../../src/store/schema.js";
import {
  PgUsageMeter,
  type PgUsageMeterOptions,
  UsageRecordsDroppedError,
} from "../../src/usage/pg-meter.js";
import type { UsageRecord } from "../../src/usage/types.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";

function usageRecord(orgId: string, n: number, overrides: Partial<UsageRecord> = {}): UsageRecord {
  return {
    at: new Date(Date.UTC(2030, 0, 1, 0, 0, n % 60)),
    orgId,
    keyId: "key_test",
    model: "tiny",
    requestId: `req_${n}`,
    promptTokens: 10 + n,
    completionTokens: n,
    reasoningTokens: 0,
    cachedTokens: 0,
    status: "completed",
    latencyMs: 5,
    ...overrides,
  };
}

async function until(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(STORE_BACKENDS)("PgUsageMeter on %s", (_name, makeBackend) => {
  let backend: Backend;
  let store: Store;
  const meters: PgUsageMeter[] = [];

  beforeAll(async () => {
    backend = await makeBackend();
    store = await openStore(backend.options);
  });

  afterAll(async () => {
    for (const meter of meters) await meter.dispose();
    await store?.close();
    await backend?.cleanup();
  });

  function meter(options: Partial<PgUsageMeterOptions> = {}) {
    const errors: unknown[] = [];
    const m = new PgUsageMeter(store.db, { onError: (err) => errors.push(err), ...options });
    meters.push(m);
    return { meter: m, errors };
  }

  async function rowsOf(orgId: string) {
    return store.db.select().from(usageRecords).where(eq(usageRecords.orgId, orgId)).orderBy(usageRecords.id);
  }

  /** A real write failure: the table is not there while `during` runs. */
  async function withoutTable(during: () => Promise<void>): Promise<void> {
    await store.db.execute(sql`alter table usage_records rename to usage_records_away`);
    try {
      await during();
    } finally {
      await store.db.execute(sql`alter table usage_records_away rename to usage_records`);
    }
  }

  it("writes everything recorded before a flush in one multi-row INSERT, in arrival order", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 60_000 });
    const inserts = vi.spyOn(store.db, "execute");
    try {
      for (let i = 0; i < 300; i++) m.record(usageRecord(org, i));
      expect(m.buffered).toBe(300);
      expect(await rowsOf(org)).toHaveLength(0);
      await m.flush();
      expect(inserts).toHaveBeenCalledTimes(1);
    } finally {
      inserts.mockRestore();
    }
    const rows = await rowsOf(org);
    expect(rows.map((r) => r.requestId)).toEqual(Array.from({ length: 300 }, (_, i) => `req_${i}`));
    expect(rows[7]).toMatchObject({
      promptTokens: 17,
      completionTokens: 7,
      status: "completed",
      keyId: "key_test",
    });
    expect(m.buffered).toBe(0);
    expect(errors).toEqual([]);
  });

  it("splits a large buffer into INSERTs of at most maxBatch rows", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m } = meter({ flushIntervalMs: 60_000, maxBatch: 100 });
    const inserts = vi.spyOn(store.db, "execute");
    try {
      for (let i = 0; i < 250; i++) m.record(usageRecord(org, i));
      await m.flush();
      expect(inserts).toHaveBeenCalledTimes(3);
    } finally {
      inserts.mockRestore();
    }
    expect(await rowsOf(org)).toHaveLength(250);
  });

  it("writes on its own within the flush interval, without a flush", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m } = meter({ flushIntervalMs: 100 });
    const started = Date.now();
    m.record(usageRecord(org, 1));
    m.record(usageRecord(org, 2));
    await until(async () => (await rowsOf(org)).length === 2);
    // Not an assertion on speed (the CPU is shared): the time is printed for the record.
    console.info(`usage meter: records visible ${Date.now() - started} ms after record() (interval 100 ms)`);
  });

  it("flush() waits for a write already in flight and for records that arrived during it", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m } = meter({ flushIntervalMs: 60_000 });
    m.record(usageRecord(org, 1));
    const first = m.flush();
    m.record(usageRecord(org, 2));
    const second = m.flush();
    await Promise.all([first, second]);
    expect((await rowsOf(org)).map((r) => r.requestId)).toEqual(["req_1", "req_2"]);
  });

  it("writes a request's record once, however often it is written (a retry after a lost answer)", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 60_000 });
    // The first write committed but its answer was lost (the store stopped or hung): the meter writes it again.
    m.record(usageRecord(org, 1));
    await m.flush();
    m.record(usageRecord(org, 1));
    m.record(usageRecord(org, 2));
    await m.flush();
    expect((await rowsOf(org)).map((r) => r.requestId)).toEqual(["req_1", "req_2"]);
    expect(errors).toEqual([]);
  });

  it("keeps the records when a write fails and writes them, once, when the store is back", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 50, maxRetryDelayMs: 100 });
    await withoutTable(async () => {
      for (let i = 0; i < 5; i++) m.record(usageRecord(org, i));
      await expect(m.flush()).rejects.toThrow();
      // The timer keeps retrying while the table is away.
      await until(async () => errors.length >= 3);
      expect(m.buffered).toBe(5);
      m.record(usageRecord(org, 5));
    });
    await until(async () => (await rowsOf(org)).length === 6);
    await m.flush();
    const rows = await rowsOf(org);
    expect(rows.map((r) => r.requestId)).toEqual(["req_0", "req_1", "req_2", "req_3", "req_4", "req_5"]);
    expect(errors.every((e) => !(e instanceof UsageRecordsDroppedError))).toBe(true);
    expect(m.buffered).toBe(0);
  });

  it("drops the oldest records past maxBuffered, loudly", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 60_000, maxBuffered: 5 });
    await withoutTable(async () => {
      for (let i = 0; i < 8; i++) m.record(usageRecord(org, i));
      await expect(m.flush()).rejects.toThrow();
    });
    await m.flush();
    expect((await rowsOf(org)).map((r) => r.requestId)).toEqual([
      "req_3",
      "req_4",
      "req_5",
      "req_6",
      "req_7",
    ]);
    const dropped = errors.filter((e) => e instanceof UsageRecordsDroppedError);
    expect(dropped.reduce((sum, e) => sum + e.count, 0)).toBe(3);
    expect(String(dropped[0])).toMatch(/dropped 1 usage record: the buffer is full \(5 records\)/);
  });

  it("gives up only a row the store refuses, and writes the rest of its batch", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 60_000 });
    await store.db.execute(
      sql`alter table usage_records add constraint usage_test_refuse check (request_id <> 'req_poison')`,
    );
    try {
      m.record(usageRecord(org, 1));
      m.record(usageRecord(org, 2, { requestId: "req_poison" }));
      m.record(usageRecord(org, 3));
      await m.flush();
    } finally {
      await store.db.execute(sql`alter table usage_records drop constraint usage_test_refuse`);
    }
    expect((await rowsOf(org)).map((r) => r.requestId)).toEqual(["req_1", "req_3"]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(UsageRecordsDroppedError);
    expect(String(errors[0])).toMatch(/refused request req_poison/);
  });

  it("stores odd values as valid rows instead of throwing", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({
      flushIntervalMs: 60_000,
      onError: () => {
        throw new Error("a broken logger");
      },
    });
    m.record(
      usageRecord(org, 1, {
        requestId: "req_\0nul",
        promptTokens: Number.NaN,
        completionTokens: 3.6,
        latencyMs: -4,
        at: new Date(Number.NaN),
      }),
    );
    await m.flush();
    const [row] = await rowsOf(org);
    expect(row).toMatchObject({ requestId: "req_nul", promptTokens: 0, completionTokens: 4, latencyMs: 0 });
    expect(Number.isNaN(row?.at.getTime())).toBe(false);
    expect(errors).toEqual([]);
  });

  it("stores the request's user, and null when it sent none or an empty one", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 60_000 });
    m.record(usageRecord(org, 1, { user: "user-\u00e9\u{1F600}-7" }));
    m.record(usageRecord(org, 2));
    m.record(usageRecord(org, 3, { user: "" }));
    m.record(usageRecord(org, 4, { user: "a\0b" }));
    await m.flush();
    expect((await rowsOf(org)).map((r) => r.user)).toEqual(["user-\u00e9\u{1F600}-7", null, null, "ab"]);
    expect(errors).toEqual([]);
  });

  it("stores the endpoint the request came through; chat.completions when the record names none", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 60_000 });
    m.record(usageRecord(org, 1, { endpoint: "responses" }));
    m.record(usageRecord(org, 2));
    m.record(usageRecord(org, 3, { endpoint: "chat.completions" }));
    await m.flush();
    expect((await rowsOf(org)).map((r) => r.endpoint)).toEqual([
      "responses",
      "chat.completions",
      "chat.completions",
    ]);
    expect(errors).toEqual([]);
  });

  it("dispose() writes the buffer and stops the timer; later records are written at once", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m } = meter({ flushIntervalMs: 60_000 });
    m.record(usageRecord(org, 1));
    await m.dispose();
    expect(await rowsOf(org)).toHaveLength(1);
    m.record(usageRecord(org, 2));
    expect(m.buffered).toBe(0);
    await m.flush();
    expect((await rowsOf(org)).map((r) => r.requestId)).toEqual(["req_1", "req_2"]);
  });

  it("dispose() retries a failing store, then gives the buffer up loudly instead of hanging", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 20, disposeTimeoutMs: 300 });
    await withoutTable(async () => {
      m.record(usageRecord(org, 1));
      m.record(usageRecord(org, 2));
      await m.dispose();
    });
    const dropped = errors.filter((e) => e instanceof UsageRecordsDroppedError);
    expect(dropped).toHaveLength(1);
    expect(dropped[0]?.count).toBe(2);
    expect(errors.length).toBeGreaterThan(2);
    expect(await rowsOf(org)).toHaveLength(0);
  });

  it("dispose() succeeds when the store comes back within its timeout", async () => {
    const org = `org_${randomUUID()}`;
    const { meter: m, errors } = meter({ flushIntervalMs: 20, disposeTimeoutMs: 30_000 });
    let disposed: Promise<void> | undefined;
    await withoutTable(async () => {
      m.record(usageRecord(org, 1));
      disposed = m.dispose();
      await until(async () => errors.length >= 2);
    });
    await disposed;
    expect(await rowsOf(org)).toHaveLength(1);
    expect(errors.every((e) => !(e instanceof UsageRecordsDroppedError))).toBe(true);
  });
});
