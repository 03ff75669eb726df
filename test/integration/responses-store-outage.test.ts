// Stored responses across real faults of their PostgreSQL (a private server, never the shared one): a stopped
// server and a hung one make save() and the reads fail within the pool's bounds instead of hanging, the usage record
// of the same request survives in the meter and is written once the server is back, and nothing is half stored.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgResponsesStore } from "../../src/responses/pg-store.js";
import { openStore, type Store } from "../../src/store/open-store.js";
import { organizations, responses, usageRecords } from "../../src/store/schema.js";
import { StoreUnavailableError } from "../../src/store/store-status.js";
import { PgUsageMeter } from "../../src/usage/pg-meter.js";
import { type PrivatePostgres, startPrivatePostgres } from "../support/private-stores.js";
import { storedResponse } from "../support/responses-store-contract.js";

let postgres: PrivatePostgres;
let store: Store;
const dir = mkdtempSync(join(tmpdir(), "hearth-responses-outage-"));

beforeAll(async () => {
  postgres = await startPrivatePostgres();
  store = await openStore({
    dataDir: dir,
    databaseUrl: postgres.url,
    // Short bounds: a stopped server is given up after 1 s, a hung one after 2 s.
    timeouts: { connectTimeoutMs: 1000, statementTimeoutMs: 1000, idleTimeoutMs: 30_000 },
  });
});

afterAll(async () => {
  await store?.close();
  await postgres?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

/** How a promise ended, and how long it took. */
async function outcome(run: () => Promise<unknown>): Promise<{ failed: boolean; ms: number }> {
  const started = Date.now();
  const failed = await run().then(
    () => false,
    () => true,
  );
  return { failed, ms: Date.now() - started };
}

describe("stored responses while PostgreSQL is stopped or hung", () => {
  it("save fails at once while the server is down; the request's usage record is kept and written once it is back", async () => {
    const org = `org_${randomUUID()}`;
    await store.db.insert(organizations).values({ id: org, name: org });
    const clock = { now: new Date() };
    const responsesStore = new PgResponsesStore(store.db, { now: () => clock.now });
    const meter = new PgUsageMeter(store.db, {
      onError: () => {},
      flushIntervalMs: 50,
      maxRetryDelayMs: 200,
    });
    const before = storedResponse(org, clock);
    await responsesStore.save(before);

    await postgres.stopImmediately();
    const record = storedResponse(org, clock);
    try {
      // What the endpoint does when a response ends: meter it, then try to store it.
      meter.record({
        at: new Date(),
        orgId: org,
        keyId: "key_outage",
        model: "tiny",
        requestId: "req_outage",
        promptTokens: 12,
        completionTokens: 3,
        reasoningTokens: 0,
        cachedTokens: 0,
        status: "completed",
        latencyMs: 40,
        endpoint: "responses",
      });
      const save = await outcome(() => responsesStore.save(record));
      expect(save.failed).toBe(true);
      expect(save.ms).toBeLessThan(5000);
      const read = await outcome(() => responsesStore.get(org, before.id));
      expect(read.failed).toBe(true);
      expect(read.ms).toBeLessThan(5000);
      // A read's failure says what it is, so the routes answer 503 store_unavailable (retry) and not 500.
      await expect(
        responsesStore.conversation(org, before.id, { maxResponses: 10, maxItems: 100, maxBytes: 1 << 20 }),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(meter.buffered).toBe(1);
    } finally {
      await postgres.start();
    }

    const deadline = Date.now() + 20_000;
    while (meter.buffered > 0) {
      if (Date.now() > deadline) throw new Error("the usage record was not written after the restart");
      await new Promise((r) => setTimeout(r, 50));
    }
    await meter.dispose();
    const rows = await store.db.select().from(usageRecords).where(eq(usageRecords.requestId, "req_outage"));
    expect(rows.map((r) => [r.endpoint, r.promptTokens, r.completionTokens])).toEqual([["responses", 12, 3]]);
    // The failed save left nothing behind; the response saved before is intact.
    expect(await store.db.$count(responses, eq(responses.id, record.id))).toBe(0);
    expect((await responsesStore.get(org, before.id))?.response).toEqual(before.response);
  });

  it("save gives a hung server up within the pool's bounds, and works again once it answers", async () => {
    const org = `org_${randomUUID()}`;
    await store.db.insert(organizations).values({ id: org, name: org });
    const clock = { now: new Date() };
    const responsesStore = new PgResponsesStore(store.db, { now: () => clock.now });
    await postgres.freeze();
    let hung: { failed: boolean; ms: number };
    try {
      hung = await outcome(() => responsesStore.save(storedResponse(org, clock)));
    } finally {
      await postgres.thaw();
    }
    expect(hung.failed).toBe(true);
    expect(hung.ms).toBeLessThan(8000);
    const after = storedResponse(org, clock);
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await responsesStore.save(after);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect((await responsesStore.get(org, after.id))?.id).toBe(after.id);
  });
});
