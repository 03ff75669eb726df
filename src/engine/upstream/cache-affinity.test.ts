import { describe, expect, it } from "vitest";
import { CacheAffinity, MIN_HIT_TOKENS } from "./cache-affinity.js";

const up = () => true;
const down = () => false;

describe("CacheAffinity", () => {
  it("pins a key to the endpoint that served it and counts each endpoint's prompt and cached tokens", () => {
    const learner = new CacheAffinity(2, 10);
    expect(learner.pinOf("a")).toBeUndefined();
    expect(learner.served({ key: "a", endpoint: 1, promptTokens: 100, cachedTokens: 0 }, up)).toBeUndefined();
    expect(learner.pinOf("a")).toBe(1);
    learner.served({ key: "a", endpoint: 1, promptTokens: 120, cachedTokens: 96 }, up);
    expect(learner.endpointStats(1)).toEqual({ promptTokens: 220, cachedTokens: 96 });
    expect(learner.endpointStats(0)).toEqual({ promptTokens: 0, cachedTokens: 0 });
    expect(learner.repins()).toEqual({ cache_lost: 0, endpoint_down: 0, endpoint_busy: 0 });
  });

  it("moves the pin to where the key was served, saying whether its old endpoint was down or busy", () => {
    const learner = new CacheAffinity(3, 10);
    learner.served({ key: "a", endpoint: 0, promptTokens: 100, cachedTokens: 80 }, up);
    expect(learner.served({ key: "a", endpoint: 2, promptTokens: 100, cachedTokens: 0 }, down)).toBe(
      "endpoint_down",
    );
    expect(learner.pinOf("a")).toBe(2);
    expect(learner.served({ key: "a", endpoint: 1, promptTokens: 100, cachedTokens: 0 }, up)).toBe(
      "endpoint_busy",
    );
    expect(learner.pinOf("a")).toBe(1);
    expect(learner.repins()).toEqual({ cache_lost: 0, endpoint_down: 1, endpoint_busy: 1 });
  });

  it("counts a lost cache where the key's last request on the same endpoint hit and this one did not; the pin stays", () => {
    const learner = new CacheAffinity(2, 10);
    learner.served({ key: "a", endpoint: 0, promptTokens: 600, cachedTokens: 0 }, up);
    // A miss after a miss is no loss: nothing was cached yet (the first request of a conversation).
    expect(learner.served({ key: "a", endpoint: 0, promptTokens: 600, cachedTokens: 0 }, up)).toBeUndefined();
    learner.served({ key: "a", endpoint: 0, promptTokens: 640, cachedTokens: 600 }, up);
    expect(learner.served({ key: "a", endpoint: 0, promptTokens: 680, cachedTokens: 0 }, up)).toBe(
      "cache_lost",
    );
    expect(learner.pinOf("a")).toBe(0);
    // The old hit is no longer evidence: the next miss is not a second loss; a hit again is evidence again.
    expect(learner.served({ key: "a", endpoint: 0, promptTokens: 680, cachedTokens: 0 }, up)).toBeUndefined();
    learner.served({ key: "a", endpoint: 0, promptTokens: 700, cachedTokens: 680 }, up);
    // A template's shared opening (below MIN_HIT_TOKENS) is no hit: a drop to it is a loss.
    expect(
      learner.served({ key: "a", endpoint: 0, promptTokens: 700, cachedTokens: MIN_HIT_TOKENS - 1 }, up),
    ).toBe("cache_lost");
    expect(learner.repins().cache_lost).toBe(2);
  });

  it("forgets the least recently served key beyond its size", () => {
    const learner = new CacheAffinity(2, 2);
    learner.served({ key: "a", endpoint: 0, promptTokens: 1, cachedTokens: 0 }, up);
    learner.served({ key: "b", endpoint: 1, promptTokens: 1, cachedTokens: 0 }, up);
    learner.served({ key: "a", endpoint: 0, promptTokens: 1, cachedTokens: 0 }, up);
    learner.served({ key: "c", endpoint: 1, promptTokens: 1, cachedTokens: 0 }, up);
    expect(learner.size).toBe(2);
    expect(learner.pinOf("b")).toBeUndefined();
    expect(learner.pinOf("a")).toBe(0);
    expect(learner.pinOf("c")).toBe(1);
  });

  it("without a key (affinity off) counts tokens and pins nothing", () => {
    const learner = new CacheAffinity(1, 10);
    expect(
      learner.served({ key: undefined, endpoint: 0, promptTokens: 10, cachedTokens: 5 }, up),
    ).toBeUndefined();
    expect(learner.size).toBe(0);
    expect(learner.pinOf(undefined)).toBeUndefined();
    expect(learner.endpointStats(0)).toEqual({ promptTokens: 10, cachedTokens: 5 });
    // An index outside the model's endpoints is ignored.
    learner.served({ key: "x", endpoint: 3, promptTokens: 10, cachedTokens: 5 }, up);
    expect(learner.size).toBe(0);
  });
});
