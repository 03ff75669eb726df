// Stored responses on the embedded PGlite store and a real PostgreSQL: the contract every store keeps, and what
// only a database adds (jsonb's limits on text, the batched sweep, the cascade when an organization goes).
import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgResponsesStore } from "../../src/responses/pg-store.js";
import { openStore, type Store } from "../../src/store/open-store.js";
import { organizations, responses } from "../../src/store/schema.js";
import { responsesStoreContract, storedResponse, WIDE_BOUNDS } from "../support/responses-store-contract.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";
import { startTestApp } from "../support/test-app.js";

describe.each(STORE_BACKENDS)("PgResponsesStore on %s", (_name, makeBackend) => {
  let backend: Backend;
  let store: Store;
  const clock = { now: new Date("2030-01-01T00:00:00Z") };
  let responsesStore: PgResponsesStore;

  beforeAll(async () => {
    backend = await makeBackend();
    store = await openStore(backend.options);
    responsesStore = new PgResponsesStore(store.db, { now: () => clock.now, sweepBatch: 2 });
  });

  afterAll(async () => {
    await store?.close();
    await backend?.cleanup();
  });

  async function newOrg(): Promise<string> {
    const id = `org_${randomUUID()}`;
    await store.db.insert(organizations).values({ id, name: id });
    return id;
  }

  responsesStoreContract(() => ({ store: responsesStore, clock, newOrg }));

  it("stores what jsonb cannot hold as near as it can: U+0000 dropped, a lone surrogate as U+FFFD", async () => {
    const org = await newOrg();
    const record = storedResponse(org, clock, { text: "a\u0000b \\u0000 \ud800 ok \u{1F600}" });
    await responsesStore.save(record);
    const read = await responsesStore.get(org, record.id);
    const content = read?.inputItems[0]?.content as { text: string }[];
    // The literal backslash-u0000 text is text, not an escape: it stays.
    expect(content[0]?.text).toBe("ab \\u0000 \ufffd ok \u{1F600} 1");
  });

  it("records each response's share of a chain: its items and their JSON bytes", async () => {
    const org = await newOrg();
    const record = storedResponse(org, clock, { inputs: 3 });
    await responsesStore.save(record);
    const [row] = await store.db
      .select({ size: responses.size, itemCount: responses.itemCount })
      .from(responses)
      .where(eq(responses.id, record.id));
    const items = [...record.inputItems, ...(record.response.output as unknown[])];
    expect(row).toEqual({
      itemCount: 4,
      size: items.reduce((n: number, item) => n + Buffer.byteLength(JSON.stringify(item)), 0),
    });
  });

  it("a save retried after its answer was lost stores the response once", async () => {
    const org = await newOrg();
    const record = storedResponse(org, clock);
    await responsesStore.save(record);
    await responsesStore.save(record);
    const rows = await store.db.select().from(responses).where(eq(responses.id, record.id));
    expect(rows).toHaveLength(1);
  });

  it("sweeps a backlog in batches until every expired response is gone", async () => {
    const org = await newOrg();
    const kept = storedResponse(org, clock, { ttlMs: 10 * 3_600_000 });
    const expiring = Array.from({ length: 7 }, () => storedResponse(org, clock, { ttlMs: 1000 }));
    for (const r of [kept, ...expiring]) await responsesStore.save(r);
    const later = new Date(clock.now.getTime() + 2 * 3_600_000);
    // Also everything the contract's tests left with an hour to live.
    const expired = await store.db.$count(responses, sql`${responses.expiresAt} < ${later}`);
    expect(expired).toBeGreaterThanOrEqual(7);
    expect(await responsesStore.removeExpired(later)).toBe(expired);
    expect(await store.db.$count(responses, sql`${responses.expiresAt} < ${later}`)).toBe(0);
    expect((await responsesStore.get(org, kept.id))?.id).toBe(kept.id);
  });

  it("removing an organization removes its responses", async () => {
    const org = await newOrg();
    const record = storedResponse(org, clock);
    await responsesStore.save(record);
    await store.db.delete(organizations).where(eq(organizations.id, org));
    expect(await store.db.$count(responses, eq(responses.orgId, org))).toBe(0);
    expect(await responsesStore.conversation(org, record.id, WIDE_BOUNDS)).toBeUndefined();
  });

  it("refuses to save a response of an organization that does not exist", async () => {
    await expect(responsesStore.save(storedResponse(`org_${randomUUID()}`, clock))).rejects.toThrow();
  });
});

describe("stored responses in the running app (PGlite)", () => {
  it("the server sweeps expired responses on its own, and serves the stored ones by id", async () => {
    // A one-second retention: the sweep runs a second after start, then every second.
    const harness = await startTestApp({ responsesConfig: { retention: 1000 } });
    try {
      const principal = await harness.services.tenancy.keys.verify(harness.apiKey);
      const orgId = principal?.orgId ?? "";
      const clock = { now: new Date() };
      const expired = storedResponse(orgId, { now: new Date(Date.now() - 10_000) }, { ttlMs: 1000 });
      const live = storedResponse(orgId, clock, { ttlMs: 3_600_000 });
      await harness.services.responses.save(expired);
      await harness.services.responses.save(live);
      const res = await harness.app.request(`/v1/responses/${live.id}/input_items?order=asc`, {
        headers: { authorization: `Bearer ${harness.apiKey}` },
      });
      expect(await res.json()).toEqual({
        object: "list",
        data: live.inputItems,
        first_id: live.inputItems[0]?.id,
        last_id: live.inputItems[0]?.id,
        has_more: false,
      });
      const deadline = Date.now() + 10_000;
      while ((await harness.store.db.$count(responses, eq(responses.id, expired.id))) > 0) {
        if (Date.now() > deadline) throw new Error("the expired response was not swept");
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await harness.services.responses.get(orgId, live.id))?.id).toBe(live.id);
    } finally {
      await harness.close();
    }
  });
});
