import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../types.js";
import {
  AFFINITY_PREFIX_CHARS,
  affinityKey,
  chooseEndpoint,
  loadBound,
  type RoutableEndpoint,
} from "./routing.js";

function endpoints(loads: number[], { maxInFlight = 16, down = [] as number[] } = {}): RoutableEndpoint[] {
  return loads.map((inFlight, i) => ({
    id: `http://10.0.0.${i + 1}:8000/v1`,
    healthy: !down.includes(i),
    inFlight,
    maxInFlight,
  }));
}

const system: ChatMessage = { role: "system", content: "You are the support assistant of ACME. ".repeat(20) };

function conversation(first: string, ...rest: string[]): ChatMessage[] {
  return [
    system,
    { role: "user", content: first },
    ...rest.map((content, i): ChatMessage => ({ role: i % 2 === 0 ? "assistant" : "user", content })),
  ];
}

describe("affinityKey", () => {
  it("is the same for conversations that begin alike and different for another organization", () => {
    const turn1 = affinityKey("org-a", conversation("Where is my order?"));
    const turn3 = affinityKey("org-a", conversation("Where is my order?", "It left today.", "Thanks!"));
    expect(turn3).toBe(turn1);
    expect(affinityKey("org-b", conversation("Where is my order?"))).not.toBe(turn1);
    expect(affinityKey("org-a", conversation("Cancel my order"))).not.toBe(turn1);
  });

  it("keys a long system prompt alone, so every chat under it goes together", () => {
    const long: ChatMessage = { role: "system", content: "x".repeat(AFFINITY_PREFIX_CHARS + 10) };
    const a = affinityKey("org-a", [long, { role: "user", content: "one" }]);
    const b = affinityKey("org-a", [long, { role: "user", content: "two" }]);
    expect(a).toBe(b);
  });

  it("cannot be forged across organizations by moving text between the id and the prompt", () => {
    const a = affinityKey("org", [{ role: "user", content: "x" }]);
    const b = affinityKey("or", [{ role: "user", content: "gx" }]);
    expect(a).not.toBe(b);
  });
});

describe("chooseEndpoint", () => {
  it("keeps an organization's same-prefix conversations on one endpoint while it is not overloaded", () => {
    const pool = endpoints([0, 0, 0, 0]);
    const key = affinityKey("org-a", conversation("Where is my order?"));
    const first = chooseEndpoint(pool, key);
    expect(first).toBeDefined();
    for (let i = 0; i < 20; i++) expect(chooseEndpoint(pool, key)).toBe(first);
    // Still there while under 1.25 × the average + 1: 2 on it and 1 on each other → ceil(1.25 × 6 / 4 + 1) = 3.
    const loaded = endpoints([1, 1, 1, 1]).map((e, i) => (i === first ? { ...e, inFlight: 2 } : e));
    expect(loadBound(loaded)).toBe(3);
    expect(chooseEndpoint(loaded, key)).toBe(first);
  });

  it("spreads organizations sending the same conversation over the endpoints", () => {
    const pool = endpoints([0, 0, 0, 0]);
    const chosen = new Set<number | undefined>();
    for (let org = 0; org < 40; org++)
      chosen.add(chooseEndpoint(pool, affinityKey(`org-${org}`, conversation("hi"))));
    expect(chosen.size).toBe(4);
  });

  it("moves an affine request to its next-ranked endpoint when its own is over the load bound", () => {
    const key = affinityKey("org-a", conversation("Where is my order?"));
    const idle = endpoints([0, 0, 0, 0]);
    const home = chooseEndpoint(idle, key) as number;
    const busy = idle.map((e, i) => (i === home ? { ...e, inFlight: 10 } : e));
    // Average (10 + 1) / 4 → bound ceil(1.25 × 2.75 + 1) = 5: the home endpoint is over it.
    expect(loadBound(busy)).toBe(5);
    const next = chooseEndpoint(busy, key);
    expect(next).not.toBe(home);
    expect(next).toBeDefined();
  });

  it("falls back to least outstanding requests when every endpoint is over the bound or without a key", () => {
    expect(chooseEndpoint(endpoints([3, 1, 2]), undefined)).toBe(1);
    expect(chooseEndpoint(endpoints([2, 2, 2]), undefined)).toBe(0);
    // Endpoint 0 (tried) pulls the average down: both others are at the bound of 10, so least outstanding.
    const key = affinityKey("org-a", conversation("x"));
    expect(loadBound(endpoints([0, 10, 10]))).toBe(10);
    expect(chooseEndpoint(endpoints([0, 11, 10]), key, new Set([0]))).toBe(2);
    expect(chooseEndpoint(endpoints([0, 10, 10]), key, new Set([0]))).toBe(1);
  });

  it("never chooses an ejected, full or already tried endpoint", () => {
    const key = affinityKey("org-a", conversation("Where is my order?"));
    for (let org = 0; org < 30; org++) {
      const k = affinityKey(`org-${org}`, conversation("hello"));
      expect(chooseEndpoint(endpoints([0, 0, 0], { down: [0, 2] }), k)).toBe(1);
    }
    expect(chooseEndpoint(endpoints([0, 0], { down: [0, 1] }), key)).toBeUndefined();
    expect(chooseEndpoint(endpoints([2, 2], { maxInFlight: 2 }), key)).toBeUndefined();
    expect(chooseEndpoint(endpoints([0, 0]), key, new Set([0]))).toBe(1);
    expect(chooseEndpoint(endpoints([0, 0]), key, new Set([0, 1]))).toBeUndefined();
  });
});

describe("affinityKey with a prompt_cache_key", () => {
  it("keys on the organization and the key instead of the conversation", () => {
    const keyed = affinityKey("org-a", conversation("Where is my order?"), "user-42");
    expect(affinityKey("org-a", conversation("Something else entirely"), "user-42")).toBe(keyed);
    expect(affinityKey("org-a", conversation("Where is my order?"), "user-43")).not.toBe(keyed);
    expect(affinityKey("org-a", conversation("Where is my order?"))).not.toBe(keyed);
  });

  it("never lets another organization's same key share the ranking", () => {
    const keyed = affinityKey("org-a", conversation("q"), "shared");
    expect(affinityKey("org-b", conversation("q"), "shared")).not.toBe(keyed);
    // Length-prefixed: an organization id cannot absorb part of another's key.
    expect(affinityKey("org-a\0key", [], "x")).not.toBe(affinityKey("org-a", [], "key\0x"));
  });

  it("sends every request with one key to the same endpoint while it is under its load bound", () => {
    const pool = endpoints([0, 0, 0, 0]);
    const chosen = new Set(
      ["a", "b", "c", "d", "e"].map((q) => chooseEndpoint(pool, affinityKey("org-a", conversation(q), "k"))),
    );
    expect(chosen.size).toBe(1);
  });
});

describe("affinityKey with an X-Session-Id", () => {
  it("keys on the organization and the session when no prompt_cache_key is sent; prompt_cache_key wins", () => {
    const session = affinityKey("org-a", conversation("Where is my order?"), undefined, "s-1");
    expect(affinityKey("org-a", conversation("Something else"), undefined, "s-1")).toBe(session);
    expect(affinityKey("org-a", conversation("Where is my order?"), undefined, "s-2")).not.toBe(session);
    expect(affinityKey("org-b", conversation("Where is my order?"), undefined, "s-1")).not.toBe(session);
    expect(affinityKey("org-a", conversation("Where is my order?"))).not.toBe(session);
    // prompt_cache_key first: the session id no longer matters; a session id never equals the same prompt_cache_key.
    const keyed = affinityKey("org-a", conversation("q"), "k", "s-1");
    expect(affinityKey("org-a", conversation("q"), "k", "s-2")).toBe(keyed);
    expect(affinityKey("org-a", conversation("q"), "k")).toBe(keyed);
    expect(affinityKey("org-a", conversation("q"), undefined, "k")).not.toBe(keyed);
  });
});

describe("chooseEndpoint with a pinned endpoint", () => {
  const key = affinityKey("org-a", conversation("Where is my order?"));
  const home = chooseEndpoint(endpoints([0, 0, 0, 0]), key) as number;
  const other = (home + 1) % 4;

  it("prefers the pin over the rendezvous ranking while it is open and under the load bound", () => {
    expect(chooseEndpoint(endpoints([0, 0, 0, 0]), key, new Set(), other)).toBe(other);
    // Without a key (affinity off) there is no pin: least outstanding.
    expect(chooseEndpoint(endpoints([1, 1, 0, 1]), undefined, new Set(), other)).toBe(2);
  });

  it("goes back to the ranking when the pin is down, tried, full or over the bound", () => {
    expect(chooseEndpoint(endpoints([0, 0, 0, 0], { down: [other] }), key, new Set(), other)).toBe(home);
    expect(chooseEndpoint(endpoints([0, 0, 0, 0]), key, new Set([other]), other)).toBe(home);
    const full = endpoints([0, 0, 0, 0], { maxInFlight: 2 }).map((e, i) =>
      i === other ? { ...e, inFlight: 2 } : e,
    );
    expect(chooseEndpoint(full, key, new Set(), other)).toBe(home);
    const busy = endpoints([0, 0, 0, 0]).map((e, i) => (i === other ? { ...e, inFlight: 10 } : e));
    expect(chooseEndpoint(busy, key, new Set(), other)).toBe(home);
  });
});
