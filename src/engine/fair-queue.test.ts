import { describe, expect, it } from "vitest";
import { FairQueue, tenantShare } from "./fair-queue.js";

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
  it("gives each tenant half the queue, rounded up, and at least one place", () => {
    expect([0, 1, 2, 3, 4, 64].map(tenantShare)).toEqual([1, 1, 1, 2, 2, 32]);
    const q = queue(4);
    q.push(item("a1"));
    expect(q.hasRoomFor("a")).toBe(true);
    q.push(item("a2"));
    expect(q.hasRoomFor("a")).toBe(false);
    expect(q.hasRoomFor("b")).toBe(true);
    q.push(item("b1"));
    q.push(item("c1"));
    expect(q.length).toBe(4);
    expect(q.hasRoomFor("d")).toBe(false);
    expect(queue(0).hasRoomFor("a")).toBe(false);
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
