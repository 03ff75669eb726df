import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { UpstreamModelConfig } from "../../config/schema.js";
import { QueueFullError, RequestAbortedError } from "../errors.js";
import { type Endpoint, EndpointPool } from "./endpoint-pool.js";
import { EndpointSlots, NoHealthyEndpointError, type SlotRequest } from "./endpoint-slots.js";

function setup(endpoints = 2, { maxInFlight = 1, maxQueue = 4, queueTimeoutMs = 1000 } = {}) {
  const config: UpstreamModelConfig = {
    id: "fleet",
    upstream: {
      model: "smol",
      endpoints: Array.from({ length: endpoints }, (_, i) => ({
        url: `http://10.0.0.${i}:8000/v1`,
        apiKey: undefined,
      })),
      maxInFlight,
      maxQueue,
      queueTimeoutMs,
      kind: "openai",
      probeIntervalMs: 2000,
      firstTokenTimeoutMs: 1000,
      maxAttempts: 3,
      affinity: true,
      affinityKeys: 1000,
    },
  };
  let slots: EndpointSlots | undefined;
  // Never started: no probe runs, health changes only as the test ejects.
  const pool = new EndpointPool({ config, onHealthChange: () => slots?.healthChanged() });
  slots = new EndpointSlots({ pool, maxQueue, queueTimeoutMs });
  const log: string[] = [];
  /** Asks for a slot; logs `name→endpoint` or `name:ErrorName` when it settles. */
  const ask = (name: string, extra: Partial<SlotRequest> = {}) => {
    const request: SlotRequest = {
      scope: name.charAt(0),
      key: undefined,
      exclude: new Set(),
      signal: undefined,
      ...extra,
    };
    (slots as EndpointSlots).acquire(request).then(
      (endpoint) => log.push(`${name}→${endpoint.index}`),
      (error: Error) => log.push(`${name}:${error.name}`),
    );
  };
  return { pool, slots, log, ask };
}

const settle = () => vi.advanceTimersByTimeAsync(0);

function at(pool: EndpointPool, index: number): Endpoint {
  const endpoint = pool.endpoints[index];
  if (endpoint === undefined) throw new Error(`no endpoint ${index}`);
  return endpoint;
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("EndpointSlots", () => {
  it("gives free slots at once, least loaded first, then makes requests wait and hands freed slots over in turn", async () => {
    const { pool, slots, log, ask } = setup(2);
    ask("a1");
    ask("a2");
    ask("a3");
    ask("a4");
    ask("b1");
    await settle();
    expect(log).toEqual(["a1→0", "a2→1"]);
    expect(slots.depth).toBe(3);
    // Organizations take turns, and one holding more than its share of the slots (a: 1 of 2, with b waiting)
    // gets no more while b waits: b1 first, though a3 and a4 came first.
    for (const [index, scope] of [
      [1, "a"],
      [0, "a"],
      [1, "b"],
    ] as const) {
      slots.release(at(pool, index), scope);
      await settle();
    }
    expect(log.slice(2)).toEqual(["b1→1", "a3→0", "a4→1"]);
    expect(pool.endpoints.map((e) => e.inFlight)).toEqual([1, 1]);
    expect(slots.depth).toBe(0);
  });

  it("lets one organization fill the queue, and gives a newcomer the place of its newest waiting request", async () => {
    const { log, ask, slots } = setup(1, { maxQueue: 3 });
    for (const name of ["a0", "a1", "a2", "a3", "a4"]) ask(name);
    await settle();
    expect(log).toEqual(["a0→0", "a4:QueueFullError"]);
    expect(slots.depth).toBe(3);
    ask("b1");
    await settle();
    expect(log.slice(2)).toEqual(["a3:QueueFullError"]);
    expect(slots.depth).toBe(3);
  });

  it("refuses at once beyond maxQueue, after queueTimeoutMs, and when the request's signal aborts", async () => {
    const { log, ask } = setup(1, { maxQueue: 2, queueTimeoutMs: 500 });
    const client = new AbortController();
    ask("a0");
    ask("b1", { signal: client.signal });
    ask("c1");
    ask("d1");
    await settle();
    expect(log).toEqual(["a0→0", "d1:QueueFullError"]);
    client.abort();
    await settle();
    expect(log.slice(2)).toEqual(["b1:AbortError"]);
    await vi.advanceTimersByTimeAsync(500);
    expect(log.slice(3)).toEqual(["c1:QueueTimeoutError"]);
    const aborted = new AbortController();
    aborted.abort();
    const { slots } = setup(1);
    await expect(
      slots.acquire({ scope: "a", key: undefined, exclude: new Set(), signal: aborted.signal }),
    ).rejects.toBeInstanceOf(RequestAbortedError);
  });

  it("refuses waiting requests at once when the last healthy endpoint is ejected, and new ones without waiting", async () => {
    const { pool, log, ask, slots } = setup(2);
    ask("a0");
    ask("b0");
    ask("c1");
    await settle();
    expect(log).toEqual(["a0→0", "b0→1"]);
    pool.eject(at(pool, 0), "connection reset");
    await settle();
    // One endpoint is still healthy (full): c1 keeps waiting.
    expect(log).toHaveLength(2);
    pool.eject(at(pool, 1), "connection reset");
    await settle();
    expect(log.slice(2)).toEqual(["c1:NoHealthyEndpointError"]);
    const refused = slots.acquire({ scope: "d", key: undefined, exclude: new Set(), signal: undefined });
    await expect(refused).rejects.toBeInstanceOf(QueueFullError);
    await expect(refused).rejects.toBeInstanceOf(NoHealthyEndpointError);
    pool.stop();
  });

  it("lets a re-admitted endpoint serve those waiting", async () => {
    const { pool, slots, log, ask } = setup(2);
    pool.eject(at(pool, 1), "HTTP 503");
    ask("a0");
    ask("b1");
    await settle();
    expect(log).toEqual(["a0→0"]);
    const second = pool.endpoints[1];
    if (second === undefined) throw new Error("no endpoint");
    second.healthy = true;
    slots.healthChanged();
    await settle();
    expect(log).toEqual(["a0→0", "b1→1"]);
    pool.stop();
  });

  it("never gives a retry an endpoint it tried, nor lets it hold up the others", async () => {
    const { pool, slots, log, ask } = setup(2);
    ask("a0");
    ask("b0");
    await settle();
    ask("c1", { exclude: new Set([0]) });
    ask("d1");
    await settle();
    slots.release(at(pool, 0), "a");
    await settle();
    expect(log.slice(2)).toEqual(["d1→0"]);
    slots.release(at(pool, 1), "b");
    await settle();
    expect(log.slice(3)).toEqual(["c1→1"]);
    // Every healthy endpoint tried: refused at once.
    const spent = slots.acquire({ scope: "e", key: undefined, exclude: new Set([0, 1]), signal: undefined });
    await expect(spent).rejects.toBeInstanceOf(NoHealthyEndpointError);
  });
});
