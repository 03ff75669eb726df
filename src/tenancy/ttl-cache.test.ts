import { describe, expect, it } from "vitest";
import { TtlCache } from "./ttl-cache.js";

describe("TtlCache", () => {
  it("forgets entries after the TTL", () => {
    let now = 1000;
    const cache = new TtlCache<string, number>({ ttlMs: 100, maxEntries: 10, now: () => now });
    cache.set("a", 1);
    now += 99;
    expect(cache.get("a")).toBe(1);
    now += 1;
    expect(cache.get("a")).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("evicts the least recently used entry beyond maxEntries", () => {
    const cache = new TtlCache<string, number>({ ttlMs: 10_000, maxEntries: 2 });
    cache.set("a", 1);
    cache.set("b", 2);
    expect(cache.get("a")).toBe(1); // a is now the most recent
    cache.set("c", 3);
    expect(cache.get("b")).toBeUndefined();
    expect(cache.get("a")).toBe(1);
    expect(cache.get("c")).toBe(3);
  });

  it("deletes by key and by predicate", () => {
    const cache = new TtlCache<string, { org: string }>({ ttlMs: 10_000, maxEntries: 10 });
    cache.set("k1", { org: "x" });
    cache.set("k2", { org: "y" });
    cache.set("k3", { org: "x" });
    cache.deleteWhere((v) => v.org === "x");
    expect(cache.get("k1")).toBeUndefined();
    expect(cache.get("k3")).toBeUndefined();
    cache.delete("k2");
    expect(cache.size).toBe(0);
  });
});

describe("TtlCache stale-if-error and generations", () => {
  it("keeps entries past the TTL for getStale() only, up to staleMs", () => {
    let now = 0;
    const cache = new TtlCache<string, number>({ ttlMs: 100, staleMs: 1000, maxEntries: 10, now: () => now });
    cache.set("a", 1);
    now = 100;
    expect(cache.get("a")).toBeUndefined();
    expect(cache.getStale("a")).toBe(1);
    now = 999;
    expect(cache.getStale("a")).toBe(1);
    now = 1000;
    expect(cache.getStale("a")).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  // Each removal is an invalidation somewhere: a key revoked (delete: the store said it is no longer valid), a key
  // or an org changed (deleteWhere), or the broadcast lost (clear). Any of them may land while a value is read.
  const removals: [string, (cache: TtlCache<string, number>) => void][] = [
    ["delete", (cache) => cache.delete("b")],
    ["deleteWhere", (cache) => cache.deleteWhere((v) => v === 99)],
    ["clear", (cache) => cache.clear()],
  ];
  it.each(removals)("refuses a value read before an invalidation by %s", (_, remove) => {
    const cache = new TtlCache<string, number>({ ttlMs: 100, maxEntries: 10 });
    const before = cache.generation;
    remove(cache); // an invalidation while the value was being read
    expect(cache.setIfCurrent(before, "a", 1)).toBe(false);
    expect(cache.get("a")).toBeUndefined();
    expect(cache.setIfCurrent(cache.generation, "a", 1)).toBe(true);
    expect(cache.get("a")).toBe(1);
  });
});
