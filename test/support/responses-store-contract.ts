// The behaviour every ResponsesStore shares (memory, PGlite, PostgreSQL): organization scoping, expiry, paging,
// deletion, and reading a previous_response_id chain back within its bounds. Each suite calls it with its store.
import { randomUUID } from "node:crypto";
import { beforeAll, expect, it } from "vitest";
import {
  type ChainBounds,
  ResponseChainTooLargeError,
  type ResponseItem,
  type ResponsesStore,
  type StoredResponse,
} from "../../src/responses/types.js";

export interface ResponsesStoreHarness {
  store: ResponsesStore;
  /** The store's clock: tests move it forward to expire responses. */
  clock: { now: Date };
  /** A new organization (a row, for the stores with a foreign key). */
  newOrg(): Promise<string>;
}

const HOUR = 3_600_000;
export const WIDE_BOUNDS: ChainBounds = Object.freeze({
  maxResponses: 100,
  maxItems: 10_000,
  maxBytes: 1 << 24,
});

/** A response of `orgId` with `inputs` user messages and one assistant message, all with ids. */
export function storedResponse(
  orgId: string,
  clock: { now: Date },
  options: { id?: string; previous?: string; inputs?: number; ttlMs?: number; text?: string } = {},
): StoredResponse {
  const id = options.id ?? `resp_${randomUUID().replaceAll("-", "")}`;
  const text = options.text ?? "hello";
  const inputItems: ResponseItem[] = Array.from({ length: options.inputs ?? 1 }, (_, i) => ({
    type: "message",
    id: `msg_${id}_in${i + 1}`,
    role: "user",
    content: [{ type: "input_text", text: `${text} ${i + 1}` }],
  }));
  const output: ResponseItem[] = [
    {
      type: "message",
      id: `msg_${id}_out`,
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: `re: ${text}`, annotations: [] }],
    },
  ];
  return {
    id,
    orgId,
    model: "tiny",
    createdAt: clock.now,
    expiresAt: new Date(clock.now.getTime() + (options.ttlMs ?? HOUR)),
    previousResponseId: options.previous,
    inputItems,
    response: {
      id,
      object: "response",
      status: "completed",
      model: "tiny",
      output,
      usage: { total_tokens: 3 },
    },
  };
}

const ids = (items: readonly ResponseItem[] | undefined) => items?.map((item) => item.id);

export function responsesStoreContract(harness: () => ResponsesStoreHarness): void {
  let h: ResponsesStoreHarness;
  let org: string;
  let other: string;
  beforeAll(async () => {
    h = harness();
    org = await h.newOrg();
    other = await h.newOrg();
  });

  it("keeps a response whole and gives it back to its organization only, exactly as for an unknown id", async () => {
    const record = storedResponse(org, h.clock, { text: 'caf\u00e9 \u{1F600} "quoted" \\ back' });
    await h.store.save(record);
    expect(await h.store.get(org, record.id)).toEqual({ ...record, previousResponseId: undefined });
    for (const [who, id] of [
      [other, record.id],
      [org, "resp_unknown"],
    ] as const) {
      expect(await h.store.get(who, id)).toBeUndefined();
      expect(await h.store.inputItems(who, id, { limit: 20, order: "desc" })).toBeUndefined();
      expect(await h.store.conversation(who, id, WIDE_BOUNDS)).toBeUndefined();
      expect(await h.store.delete(who, id)).toBe(false);
    }
    // Another organization's attempt to delete it changed nothing.
    expect((await h.store.get(org, record.id))?.id).toBe(record.id);
  });

  it("a saved response cannot be changed through the object it was saved from or read into", async () => {
    const record = storedResponse(org, h.clock);
    await h.store.save(record);
    const first = record.inputItems[0];
    if (first !== undefined) first.role = "system";
    const read = await h.store.get(org, record.id);
    (read?.response.output as ResponseItem[]).length = 0;
    const again = await h.store.get(org, record.id);
    expect(again?.inputItems[0]?.role).toBe("user");
    expect(again?.response.output).toHaveLength(1);
  });

  it("deletes once: then it is gone for every read", async () => {
    const record = storedResponse(org, h.clock);
    await h.store.save(record);
    expect(await h.store.delete(org, record.id)).toBe(true);
    expect(await h.store.get(org, record.id)).toBeUndefined();
    expect(await h.store.inputItems(org, record.id, { limit: 20, order: "asc" })).toBeUndefined();
    expect(await h.store.delete(org, record.id)).toBe(false);
  });

  it("pages input items as OpenAI lists do: desc by default order, after an item id, limit, has_more", async () => {
    const record = storedResponse(org, h.clock, { inputs: 5 });
    await h.store.save(record);
    const item = (n: number) => `msg_${record.id}_in${n}`;
    const page = (query: { after?: string; limit: number; order: "asc" | "desc" }) =>
      h.store.inputItems(org, record.id, query);
    const first = await page({ limit: 2, order: "desc" });
    expect([ids(first?.items), first?.hasMore]).toEqual([[item(5), item(4)], true]);
    const second = await page({ after: item(4), limit: 2, order: "desc" });
    expect([ids(second?.items), second?.hasMore]).toEqual([[item(3), item(2)], true]);
    const last = await page({ after: item(2), limit: 2, order: "desc" });
    expect([ids(last?.items), last?.hasMore]).toEqual([[item(1)], false]);
    const asc = await page({ after: item(2), limit: 2, order: "asc" });
    expect([ids(asc?.items), asc?.hasMore]).toEqual([[item(3), item(4)], true]);
    const whole = await page({ limit: 100, order: "asc" });
    expect([ids(whole?.items), whole?.hasMore]).toEqual([[1, 2, 3, 4, 5].map(item), false]);
    expect(whole?.items[0]).toEqual(record.inputItems[0]);
    const exact = await page({ after: item(3), limit: 2, order: "asc" });
    expect([ids(exact?.items), exact?.hasMore]).toEqual([[item(4), item(5)], false]);
    expect(await page({ after: item(5), limit: 2, order: "asc" })).toEqual({ items: [], hasMore: false });
    expect(await page({ after: "msg_nowhere", limit: 2, order: "desc" })).toEqual({
      items: [],
      hasMore: false,
    });
  });

  it("an expired response is absent at once and removed by the sweep; unexpired ones stay", async () => {
    const start = h.clock.now;
    const short = storedResponse(org, h.clock, { ttlMs: 1000 });
    const shortOther = storedResponse(other, h.clock, { ttlMs: 1000 });
    const long = storedResponse(org, h.clock, { ttlMs: 10 * HOUR });
    for (const r of [short, shortOther, long]) await h.store.save(r);
    h.clock.now = new Date(start.getTime() + 2000);
    try {
      expect(await h.store.get(org, short.id)).toBeUndefined();
      expect(await h.store.inputItems(org, short.id, { limit: 20, order: "desc" })).toBeUndefined();
      expect(await h.store.delete(org, short.id)).toBe(false);
      expect(await h.store.conversation(org, short.id, WIDE_BOUNDS)).toBeUndefined();
      // Everything saved by the earlier tests expires within the hour; these two within the second.
      expect(await h.store.removeExpired(h.clock.now)).toBe(2);
      expect(await h.store.removeExpired(h.clock.now)).toBe(0);
      expect((await h.store.get(org, long.id))?.id).toBe(long.id);
      // Back in time the removed rows stay removed: the sweep deleted them.
      h.clock.now = start;
      expect(await h.store.get(org, short.id)).toBeUndefined();
      expect(await h.store.get(other, shortOther.id)).toBeUndefined();
    } finally {
      h.clock.now = start;
    }
  });

  it("rebuilds a previous_response_id chain oldest first: each response's input items, then its output", async () => {
    const r1 = storedResponse(org, h.clock, { inputs: 2 });
    const r2 = storedResponse(org, h.clock, { previous: r1.id });
    const r3 = storedResponse(org, h.clock, { previous: r2.id });
    for (const r of [r1, r2, r3]) await h.store.save(r);
    const items = await h.store.conversation(org, r3.id, WIDE_BOUNDS);
    expect(ids(items)).toEqual(
      [r1, r2, r3].flatMap((r) =>
        [...r.inputItems, ...(r.response.output as ResponseItem[])].map((i) => i.id),
      ),
    );
    expect(items?.[0]).toEqual(r1.inputItems[0]);
    expect(ids(await h.store.conversation(org, r1.id, WIDE_BOUNDS))).toEqual([
      `msg_${r1.id}_in1`,
      `msg_${r1.id}_in2`,
      `msg_${r1.id}_out`,
    ]);
  });

  it("a chain stops at a missing ancestor (deleted, expired or another organization's): the rest still counts", async () => {
    const r1 = storedResponse(org, h.clock);
    const r2 = storedResponse(org, h.clock, { previous: r1.id });
    const r3 = storedResponse(org, h.clock, { previous: r2.id });
    const foreign = storedResponse(other, h.clock);
    const onForeign = storedResponse(org, h.clock, { previous: foreign.id });
    for (const r of [r1, r2, r3, foreign, onForeign]) await h.store.save(r);
    expect(await h.store.delete(org, r1.id)).toBe(true);
    expect(ids(await h.store.conversation(org, r3.id, WIDE_BOUNDS))).toEqual([
      `msg_${r2.id}_in1`,
      `msg_${r2.id}_out`,
      `msg_${r3.id}_in1`,
      `msg_${r3.id}_out`,
    ]);
    expect(ids(await h.store.conversation(org, onForeign.id, WIDE_BOUNDS))).toEqual([
      `msg_${onForeign.id}_in1`,
      `msg_${onForeign.id}_out`,
    ]);
  });

  it("refuses a chain beyond each bound, naming it; a chain exactly at the bounds is read", async () => {
    const r1 = storedResponse(org, h.clock, { inputs: 3 });
    const r2 = storedResponse(org, h.clock, { previous: r1.id });
    const r3 = storedResponse(org, h.clock, { previous: r2.id });
    for (const r of [r1, r2, r3]) await h.store.save(r);
    const all = await h.store.conversation(org, r3.id, WIDE_BOUNDS);
    const count = all?.length ?? 0;
    const bytes = (all ?? []).reduce((n, item) => n + Buffer.byteLength(JSON.stringify(item)), 0);
    expect(count).toBe(8);
    const exact = { maxResponses: 3, maxItems: count, maxBytes: bytes };
    expect(await h.store.conversation(org, r3.id, exact)).toEqual(all);
    for (const [bound, tighter] of [
      ["maxResponses", { ...exact, maxResponses: 2 }],
      ["maxItems", { ...exact, maxItems: count - 1 }],
      ["maxBytes", { ...exact, maxBytes: bytes - 1 }],
    ] as const) {
      const refused = await h.store.conversation(org, r3.id, tighter).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(ResponseChainTooLargeError);
      expect(refused).toMatchObject({ bound, limit: tighter[bound] });
    }
  });

  it("a cycle of previous_response_id links is read once around, and bounded", async () => {
    const a = storedResponse(org, h.clock, { id: `resp_a${randomUUID().slice(0, 8)}` });
    const b = storedResponse(org, h.clock, { id: `resp_b${randomUUID().slice(0, 8)}`, previous: a.id });
    a.previousResponseId = b.id;
    const c = storedResponse(org, h.clock, { previous: b.id });
    for (const r of [a, b, c]) await h.store.save(r);
    expect(ids(await h.store.conversation(org, c.id, WIDE_BOUNDS))).toEqual([
      `msg_${a.id}_in1`,
      `msg_${a.id}_out`,
      `msg_${b.id}_in1`,
      `msg_${b.id}_out`,
      `msg_${c.id}_in1`,
      `msg_${c.id}_out`,
    ]);
    await expect(h.store.conversation(org, a.id, { ...WIDE_BOUNDS, maxResponses: 1 })).rejects.toBeInstanceOf(
      ResponseChainTooLargeError,
    );
  });
}
