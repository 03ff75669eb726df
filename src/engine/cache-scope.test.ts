// The scoped prompt_cache_key: one organization's key is never another's.
import { describe, expect, it } from "vitest";
import { scopedCacheKey } from "./cache-scope.js";

describe("scopedCacheKey", () => {
  it("is undefined without a key, and the same for one organization, salt and key", () => {
    expect(scopedCacheKey({ cacheScope: "org_A" })).toBeUndefined();
    const key = scopedCacheKey({ cacheScope: "org_A", promptCacheKey: "k" });
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(scopedCacheKey({ cacheScope: "org_A", promptCacheKey: "k" })).toBe(key);
  });

  it("differs for another organization, another salt or another key", () => {
    const key = scopedCacheKey({ cacheScope: "org_A", promptCacheKey: "k" });
    expect(scopedCacheKey({ cacheScope: "org_B", promptCacheKey: "k" })).not.toBe(key);
    expect(scopedCacheKey({ cacheScope: "org_A", cacheSalt: "s", promptCacheKey: "k" })).not.toBe(key);
    expect(scopedCacheKey({ cacheScope: "org_A", promptCacheKey: "k2" })).not.toBe(key);
    // No splicing: a salt cannot absorb part of the key.
    expect(scopedCacheKey({ cacheScope: "o", cacheSalt: "s", promptCacheKey: "\u0000k" })).not.toBe(
      scopedCacheKey({ cacheScope: "o", cacheSalt: "s\u0000", promptCacheKey: "k" }),
    );
  });
});
