import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { QueueFullError } from "../errors.js";
import { Admission, type Admittable } from "./admission.js";
import type { SlotChoice } from "./slot-choice.js";
import { type CachedSequence, SlotPool } from "./slot-pool.js";

interface Item extends Admittable {
  name: string;
}

function item(name: string, extra: Partial<Item> = {}): Item {
  // The first letter is the organization: a1, a2 belong to "a".
  const org = name.charAt(0);
  return { name, scope: org, tenant: org, prompt: [1, 2, 3, 4], n: 1, signal: undefined, ...extra };
}

/** An admission over `sequences` fake sequences, recording what it admits and refuses. */
function setup(sequences = 2, { maxQueue = 4, queueTimeoutMs = 1000 } = {}) {
  const held: CachedSequence[] = Array.from({ length: sequences }, () => ({ contextTokens: [] }));
  const pool = new SlotPool(held);
  const log: string[] = [];
  const leases = new Map<string, SlotChoice>();
  const admission = new Admission<Item>({
    model: "m",
    maxQueue,
    queueTimeoutMs,
    pool,
    admitted: (i, lease) => {
      log.push(i.name);
      leases.set(i.name, lease);
    },
    refused: (i, error) => log.push(`${i.name}:${error.name}`),
  });
  /** Frees an admitted item's sequences and admits what fits now (what the step loop does). */
  const finish = (name: string) => {
    const lease = leases.get(name);
    if (lease === undefined) throw new Error(`${name} holds nothing`);
    pool.free(lease);
    admission.admit();
  };
  return { admission, pool, log, leases, finish };
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("Admission", () => {
  it("admits at once, before enqueue returns, while sequences are free", () => {
    const { admission, pool, log } = setup(2);
    admission.enqueue(item("a1"));
    expect(log).toEqual(["a1"]);
    admission.enqueue(item("b1"));
    expect(log).toEqual(["a1", "b1"]);
    expect(pool.busyCount).toBe(2);
    expect(admission.depth).toBe(0);
  });

  it("queues when every sequence is busy and admits in turns between organizations as they free up", () => {
    const { admission, log, finish } = setup(1, { maxQueue: 8 });
    admission.enqueue(item("a0"));
    for (const name of ["a1", "a2", "b1", "c1"]) admission.enqueue(item(name));
    expect(admission.depth).toBe(4);
    finish("a0");
    finish("a1");
    finish("b1");
    finish("c1");
    expect(log).toEqual(["a0", "a1", "b1", "c1", "a2"]);
    expect(admission.depth).toBe(0);
  });

  it("lets one organization fill the whole queue while no one else waits: 2 sequences, 4 places, 30 → 6 in", () => {
    const { admission, log, pool } = setup(2, { maxQueue: 4 });
    for (let i = 1; i <= 30; i++) admission.enqueue(item(`a${i}`));
    expect(log.slice(0, 2)).toEqual(["a1", "a2"]);
    expect(pool.busyCount).toBe(2);
    expect(admission.depth).toBe(4);
    // Refused at once, before enqueue returned: the newest each time.
    expect(log.slice(2)).toEqual(Array.from({ length: 24 }, (_, i) => `a${i + 7}:QueueFullError`));
  });

  it("refuses at once the newest queued request of the organization holding the most when another arrives", () => {
    const { admission, log, finish } = setup(1, { maxQueue: 4 });
    admission.enqueue(item("a0"));
    for (const name of ["a1", "a2", "a3", "a4"]) admission.enqueue(item(name));
    expect(log).toEqual(["a0"]);
    // b arrives at the full queue: a4 (queued, never admitted) is refused within b1's enqueue.
    admission.enqueue(item("b1"));
    expect(log).toEqual(["a0", "a4:QueueFullError"]);
    admission.enqueue(item("c1"));
    expect(log.slice(2)).toEqual(["a3:QueueFullError"]);
    // a, b and c hold 2, 1, 1: d's arrival takes a's newest; a fifth organization's would take its own.
    admission.enqueue(item("d1"));
    admission.enqueue(item("b2"));
    expect(log.slice(3)).toEqual(["a2:QueueFullError", "b2:QueueFullError"]);
    expect(admission.depth).toBe(4);
    for (const name of ["a0", "a1", "b1", "c1"]) finish(name);
    expect(log.slice(5)).toEqual(["a1", "b1", "c1", "d1"]);
  });

  it("counts an organization's salted requests in its one tenancy: a salt narrows the cache, not fairness", () => {
    const { admission, log } = setup(1, { maxQueue: 3 });
    admission.enqueue(item("a0"));
    for (const salt of ["x", "y", "z"]) admission.enqueue(item(`a${salt}`, { scope: `a\u0000${salt}` }));
    admission.enqueue(item("b1"));
    // Were each salt its own tenant, every one would hold one place and b1 itself would be refused.
    expect(log).toEqual(["a0", "az:QueueFullError"]);
  });

  it("gives freed sequences to an organization within its share before one over it, while both wait", () => {
    const { admission, log, finish } = setup(4, { maxQueue: 16 });
    for (const name of ["a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2"]) admission.enqueue(item(name));
    expect(log).toEqual(["a1", "a2", "a3", "a4"]);
    // a holds 3 of 4 sequences, over its share (2 of 4 with b waiting): b1 first, though a's turn came first.
    finish("a1");
    // a holds 2 and b 1: another for a would put it over its share; b2 is within b's.
    finish("a2");
    expect(log.slice(4)).toEqual(["b1", "b2"]);
    // b waits no more: a is not capped.
    finish("a3");
    finish("b1");
    expect(log.slice(6)).toEqual(["a5", "a6"]);
  });

  it("refuses a request still queued after the queue timeout", () => {
    const { admission, log, finish } = setup(1, { queueTimeoutMs: 500 });
    admission.enqueue(item("a0"));
    const b1 = item("b1");
    admission.enqueue(b1);
    vi.advanceTimersByTime(499);
    expect(admission.isQueued(b1)).toBe(true);
    vi.advanceTimersByTime(1);
    expect(log).toEqual(["a0", "b1:QueueTimeoutError"]);
    expect(admission.depth).toBe(0);
    finish("a0");
    expect(log).toHaveLength(2);
  });

  it("never times out a request once admitted", () => {
    const { admission, log, finish } = setup(1, { queueTimeoutMs: 500 });
    admission.enqueue(item("a0"));
    admission.enqueue(item("b1"));
    vi.advanceTimersByTime(400);
    finish("a0");
    vi.advanceTimersByTime(1000);
    expect(log).toEqual(["a0", "b1"]);
  });

  it("drops a request whose client leaves while it is queued; an abort after admission is not its concern", () => {
    const { admission, log, finish } = setup(1);
    const leaving = new AbortController();
    const later = new AbortController();
    admission.enqueue(item("a0"));
    const b1 = item("b1", { signal: leaving.signal });
    admission.enqueue(b1);
    admission.enqueue(item("c1", { signal: later.signal }));
    leaving.abort();
    expect(admission.isQueued(b1)).toBe(false);
    expect(log).toEqual(["a0", "b1:AbortError"]);
    finish("a0");
    later.abort();
    expect(log).toEqual(["a0", "b1:AbortError", "c1"]);
    expect(admission.depth).toBe(0);
  });

  it("holds a request needing several sequences at the front; others pass it at most once per sequence", () => {
    const { admission, log, finish } = setup(2, { maxQueue: 8 });
    admission.enqueue(item("x1"));
    admission.enqueue(item("x2"));
    admission.enqueue(item("a1", { n: 2 }));
    for (const name of ["b1", "c1", "d1"]) admission.enqueue(item(name));
    finish("x1"); // one free: b1 passes a1
    finish("b1"); // one free: c1 passes a1 (the second and last time)
    finish("c1"); // one free, a1 needs two: nothing starts, d1 waits behind a1
    expect(log).toEqual(["x1", "x2", "b1", "c1"]);
    finish("x2");
    expect(log.at(-1)).toBe("a1");
    finish("a1");
    expect(log.at(-1)).toBe("d1");
  });

  it("leases the free sequence holding the longest cached prefix of the same organization", () => {
    const { admission, pool, leases } = setup(3);
    const slot1 = pool.slot(1);
    const slot2 = pool.slot(2);
    (slot1.sequence as { contextTokens: number[] }).contextTokens = [1, 2, 3, 9];
    slot1.scope = "b";
    (slot2.sequence as { contextTokens: number[] }).contextTokens = [1, 2, 9];
    slot2.scope = "a";
    admission.enqueue(item("a1"));
    expect(leases.get("a1")).toEqual({ primary: 2, others: [], reusable: 2 });
    // Slot 1 first, beside the busy slot 2 (slot-choice.ts runCost): the three decode in one ubatch.
    admission.enqueue(item("a2", { n: 2 }));
    expect(leases.get("a2")).toEqual({ primary: 1, others: [0], reusable: 0 });
  });

  it("refuses every queued request at shutdown", () => {
    const { admission, log } = setup(1);
    admission.enqueue(item("a0"));
    admission.enqueue(item("a1"));
    admission.enqueue(item("b1"));
    admission.dropAll(new QueueFullError("m"));
    expect(log).toEqual(["a0", "a1:QueueFullError", "b1:QueueFullError"]);
    expect(admission.depth).toBe(0);
  });
});
