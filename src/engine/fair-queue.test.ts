import { describe, expect, it } from "vitest";
import { FairQueue } from "./fair-queue.js";

interface Item {
  name: string;
  tenant: string;
  /** Sequences it needs. */
  n: number;
}

const item = (name: string, n = 1): Item => ({ name, tenant: name.charAt(0), n });

function queue(maxQueue: number, bypassLimit = 2) {
  return new FairQueue<Item>({ maxQueue, bypassLimit, tenantOf: (i) => i.tenant });
}

/** What an engine does with a new item: queues it, starts what fits, then refuses what is beyond the bound. */
function offer(q: FairQueue<Item>, i: Item, free: { count: number }) {
  q.push(i);
  const started = drain(q, free);
  return { started, refused: q.shed().map((r) => r.name) };
}

/** Starts items while `free` sequences last; returns their names in start order. */
function drain(q: FairQueue<Item>, free: { count: number }): string[] {
  const started: string[] = [];
  while (true) {
    const taken = q.take((i) => (i.n <= free.count ? i.n : undefined));
    if (taken === undefined) return started;
    free.count -= taken.lease;
    started.push(taken.item.name);
  }
}

describe("FairQueue", () => {
  it("lets one tenant fill the whole queue while no one else waits: 2 sequences, 4 places, 30 requests → 6 in", () => {
    const q = queue(4);
    const free = { count: 2 };
    const started: string[] = [];
    const refused: string[] = [];
    for (let i = 1; i <= 30; i++) {
      const r = offer(q, item(`a${i}`), free);
      started.push(...r.started);
      refused.push(...r.refused);
    }
    expect(started).toEqual(["a1", "a2"]);
    expect(q.items().map((i) => i.name)).toEqual(["a3", "a4", "a5", "a6"]);
    // The newest is refused each time: those that queued first keep their places.
    expect(refused).toEqual(Array.from({ length: 24 }, (_, i) => `a${i + 7}`));
  });

  it("gives a newcomer at a full queue the place of the newest item of the tenant holding the most", () => {
    const q = queue(4);
    const none = { count: 0 };
    for (const name of ["a1", "a2", "a3", "a4"]) expect(offer(q, item(name), none).refused).toEqual([]);
    // b arrives: a holds all four places, its newest gives way.
    expect(offer(q, item("b1"), none).refused).toEqual(["a4"]);
    expect(offer(q, item("b2"), none).refused).toEqual(["a3"]);
    // Now equal: b's third would make b the largest, so b's own newest (the newcomer) is refused.
    expect(offer(q, item("b3"), none).refused).toEqual(["b3"]);
    // c arrives while a and b hold two each: of the two, the one whose newest arrived last gives way.
    expect(offer(q, item("c1"), none).refused).toEqual(["b2"]);
    expect(q.items().map((i) => i.name)).toEqual(["a1", "a2", "b1", "c1"]);
    expect(offer(q, item("c2"), none).refused).toEqual(["c2"]);
    expect(queue(0).shed()).toEqual([]);
    const empty = queue(0);
    expect(offer(empty, item("a1"), none).refused).toEqual(["a1"]);
    expect(offer(empty, item("a2"), { count: 1 }).started).toEqual(["a2"]);
  });

  it("serves a tenant over its sequence share only after the others within theirs, while they wait", () => {
    const held = new Map<string, number>();
    const q = new FairQueue<Item>({
      maxQueue: 16,
      bypassLimit: 2,
      tenantOf: (i) => i.tenant,
      slots: { capacity: () => 4, sizeOf: (i) => i.n, heldBy: () => held },
    });
    const next = () => q.take((i) => i.n)?.item.name;
    for (const name of ["a1", "a2", "a3", "b1", "b2"]) q.push(item(name));
    // a holds 3 of 4 sequences, b none: two tenants, a share of 2 each. a's turn comes first, yet b goes.
    held.set("a", 3);
    expect(next()).toBe("b1");
    held.set("b", 1);
    // a holds 2 (one finished): one more would put it over its share; b within its share goes again.
    held.set("a", 2);
    expect(next()).toBe("b2");
    held.set("b", 2);
    // b has nothing queued: a is alone in the queue and never capped.
    expect(next()).toBe("a1");
    held.set("a", 3);
    // c arrives holding nothing while a is over its share: c first, then a again once c waits no more.
    q.push(item("c1"));
    expect(next()).toBe("c1");
    expect(next()).toBe("a2");
    // Everyone waiting over its share: the ring's order, so free sequences are never left idle.
    held.clear();
    held.set("a", 2);
    held.set("d", 3);
    q.push(item("d1"));
    expect(q.items().map((i) => i.name)).toEqual(["a3", "d1"]);
    expect(next()).toBe("a3");
    // A tenant holding nothing is within its share even for a request larger than a share (2 of 4 among d, e
    // and a): it would starve otherwise. d, over its share, comes last although its turn came first.
    q.push(item("e1", 4));
    q.push(item("a4"));
    held.set("a", 1);
    expect(q.items().map((i) => i.name)).toEqual(["d1", "e1", "a4"]);
    expect(next()).toBe("e1");
    expect(next()).toBe("a4");
    expect(next()).toBe("d1");
  });

  it("takes turns between tenants and keeps each tenant's order", () => {
    const q = queue(16);
    for (const name of ["a1", "a2", "a3", "b1", "c1", "b2"]) q.push(item(name));
    expect(drain(q, { count: 100 })).toEqual(["a1", "b1", "c1", "a2", "b2", "a3"]);
    expect(q.length).toBe(0);
  });

  it("puts a tenant that comes back at the back of the ring", () => {
    const q = queue(16);
    q.push(item("a1"));
    q.push(item("a2"));
    expect(drain(q, { count: 1 })).toEqual(["a1"]);
    q.push(item("b1"));
    q.push(item("a3"));
    expect(drain(q, { count: 3 })).toEqual(["a2", "b1", "a3"]);
  });

  it("starts nothing while no sequence is free", () => {
    const q = queue(4);
    q.push(item("a1"));
    expect(drain(q, { count: 0 })).toEqual([]);
    expect(q.length).toBe(1);
  });

  it("lets small requests pass a large one a bounded number of times, then holds sequences for it", () => {
    const q = queue(16, 2);
    q.push(item("a1", 3));
    for (const name of ["b1", "c1", "b2", "c2"]) q.push(item(name));
    const free = { count: 2 };
    // a1 needs 3 of 2 free sequences: two others may start past it, then the queue waits for a1.
    expect(drain(q, free)).toEqual(["b1", "c1"]);
    free.count = 2;
    expect(drain(q, free)).toEqual([]);
    free.count = 3;
    expect(drain(q, free)).toEqual(["a1"]);
    free.count = 2;
    expect(drain(q, free)).toEqual(["b2", "c2"]);
  });

  it("removes an item from the middle and drops an emptied tenant from the ring", () => {
    const q = queue(16);
    const b1 = item("b1");
    for (const i of [item("a1"), b1, item("a2")]) q.push(i);
    expect(q.remove(b1)).toBe(true);
    expect(q.remove(b1)).toBe(false);
    expect(q.queuedBy("b")).toBe(0);
    expect(q.items().map((i) => i.name)).toEqual(["a1", "a2"]);
    expect(drain(q, { count: 5 })).toEqual(["a1", "a2"]);
  });
});
