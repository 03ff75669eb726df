// The fan-out alone: this replica's changes reach its caches and then the listeners; other replicas' only the caches.
import { describe, expect, it } from "vitest";
import { type CacheInvalidation, CacheInvalidations } from "./invalidation.js";

describe("cache invalidations", () => {
  it("applies a change made here to every cache first, then hands it to the listeners", () => {
    const invalidations = new CacheInvalidations();
    const seen: string[] = [];
    invalidations.addCache((event) => seen.push(`keys:${event.kind}`));
    invalidations.addCache((event) => seen.push(`grants:${event.kind}`));
    invalidations.onInvalidation((event) => seen.push(`broadcast:${event.kind}`));
    invalidations.changed({ kind: "org", orgId: "org_1" });
    expect(seen).toEqual(["keys:org", "grants:org", "broadcast:org"]);
  });

  it("applies a change made elsewhere to the caches without sending it on again", () => {
    const invalidations = new CacheInvalidations();
    const dropped: CacheInvalidation[] = [];
    const sent: CacheInvalidation[] = [];
    invalidations.addCache((event) => dropped.push(event));
    invalidations.onInvalidation((event) => sent.push(event));
    invalidations.invalidate({ kind: "key", keyId: "key_1" });
    expect(dropped).toEqual([{ kind: "key", keyId: "key_1" }]);
    expect(sent).toEqual([]);
  });
});
