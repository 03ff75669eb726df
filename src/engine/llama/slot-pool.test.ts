// The slot pool: what a lease marks busy, which caches admission may read (a busy slot's only once its request is
// past its prompt), and which copy sources a lease holds.
import { describe, expect, it } from "vitest";
import { type CachedSequence, SlotPool } from "./slot-pool.js";

function pool(held: number[][]): SlotPool<CachedSequence> {
  return new SlotPool(held.map((tokens) => ({ contextTokens: tokens })));
}

describe("SlotPool", () => {
  it("shows a busy slot's cache only once its request has started generating", () => {
    const slots = pool([[1, 2, 3], [4]]);
    const lease = { primary: 0, others: [1], reusable: 2 };
    slots.take(lease, "org");
    // Leased, preparing its prompt: what the sequence holds is about to be erased.
    expect(slots.views().map((v) => [v.busy, v.tokens])).toEqual([
      [true, []],
      [true, []],
    ]);
    slots.markStarted(lease);
    expect(slots.views().map((v) => v.tokens)).toEqual([[1, 2, 3], [4]]);
    slots.free(lease);
    expect(slots.views().map((v) => [v.busy, v.tokens])).toEqual([
      [false, [1, 2, 3]],
      [false, [4]],
    ]);
    // Leased again: hidden again until it starts.
    slots.take({ primary: 1, others: [], reusable: 0 }, "org");
    expect(slots.views()[1]?.tokens).toEqual([]);
  });

  it("holds a free copy source until the copy is done, and never a busy one", () => {
    const slots = pool([[1, 2, 3, 9], [], [1, 2, 3, 7]]);
    const fromFree = { primary: 1, others: [], reusable: 3, source: { slot: 0, leased: true } };
    slots.take(fromFree, "org");
    expect(slots.views().map((v) => v.busy)).toEqual([true, true, false]);
    // The leased source's cache stays readable: it is not going to change.
    expect(slots.views()[0]?.tokens).toEqual([1, 2, 3, 9]);
    slots.releaseSource(fromFree);
    expect(fromFree.source).toBeUndefined();
    expect(slots.views().map((v) => v.busy)).toEqual([false, true, false]);

    // Slot 0 busy with another request (started), copied from: the lease neither takes nor frees it.
    slots.take({ primary: 0, others: [], reusable: 3 }, "other");
    slots.markStarted({ primary: 0, others: [], reusable: 3 });
    const fromBusy = { primary: 2, others: [], reusable: 3, source: { slot: 0, leased: false } };
    slots.take(fromBusy, "org");
    slots.free(fromBusy);
    expect(slots.views().map((v) => v.busy)).toEqual([true, true, false]);
    expect(slots.heldBy()).toEqual(
      new Map([
        ["other", 1],
        ["org", 1],
      ]),
    );
  });
});
