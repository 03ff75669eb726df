// The in-memory store against the contract every ResponsesStore keeps (test/integration runs it on PGlite and
// PostgreSQL), and the pure paging and chain rules.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { responsesStoreContract } from "../../test/support/responses-store-contract.js";
import { boundedChain, pageWindow } from "./items.js";
import { MemoryResponsesStore } from "./memory-store.js";
import { ResponseChainTooLargeError } from "./types.js";

describe("MemoryResponsesStore", () => {
  responsesStoreContract(() => {
    const clock = { now: new Date("2030-01-01T00:00:00Z") };
    return {
      store: new MemoryResponsesStore({ now: () => clock.now }),
      clock,
      newOrg: async () => `org_${randomUUID()}`,
    };
  });
});

describe("pageWindow", () => {
  it("lists positions from the end for desc and from the start for asc", () => {
    expect(pageWindow(5, undefined, { limit: 2, order: "desc" })).toEqual({ from: 3, to: 5, hasMore: true });
    expect(pageWindow(5, undefined, { limit: 2, order: "asc" })).toEqual({ from: 0, to: 2, hasMore: true });
    expect(pageWindow(5, 1, { limit: 2, order: "desc" })).toEqual({ from: 0, to: 1, hasMore: false });
    expect(pageWindow(5, 3, { limit: 2, order: "asc" })).toEqual({ from: 4, to: 5, hasMore: false });
  });

  it("gives an empty page for an unknown cursor, an empty list and a cursor on the last item", () => {
    expect(pageWindow(5, -1, { limit: 2, order: "desc" })).toEqual({ from: 0, to: 0, hasMore: false });
    expect(pageWindow(0, undefined, { limit: 20, order: "desc" })).toEqual({
      from: 0,
      to: 0,
      hasMore: false,
    });
    expect(pageWindow(5, 0, { limit: 20, order: "desc" })).toEqual({ from: 0, to: 0, hasMore: false });
  });
});

describe("boundedChain", () => {
  const link = (id: string, items = 1, bytes = 10) => ({ id, items, bytes });
  const bounds = { maxResponses: 3, maxItems: 10, maxBytes: 100 };

  it("stops at the first link seen before (a cycle) and checks the bounds on what is left", () => {
    expect(boundedChain([link("a"), link("b"), link("a"), link("b")], bounds).map((l) => l.id)).toEqual([
      "a",
      "b",
    ]);
  });

  it("names the first bound exceeded, in the order responses, items, bytes", () => {
    const refused = (links: ReturnType<typeof link>[]) => {
      try {
        boundedChain(links, bounds);
        return undefined;
      } catch (err) {
        return err instanceof ResponseChainTooLargeError ? err.bound : err;
      }
    };
    expect(refused([link("a", 50, 500), link("b"), link("c"), link("d")])).toBe("maxResponses");
    expect(refused([link("a", 11, 500)])).toBe("maxItems");
    expect(refused([link("a", 10, 101)])).toBe("maxBytes");
    expect(refused([link("a", 4, 40), link("b", 3, 30), link("c", 3, 30)])).toBeUndefined();
  });
});
