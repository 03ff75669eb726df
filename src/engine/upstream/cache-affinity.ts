// What routing learns from each upstream stream's usage: where a conversation's prefix is cached (its pin), when
// that endpoint lost it, and each endpoint's prefix-cache hit rate.
import { REPIN_REASONS, type RepinReason } from "../types.js";

/** Conversations remembered per model when the config names no `affinityKeys`. */
export const DEFAULT_AFFINITY_KEYS = 50_000;

/**
 * Cached tokens that count as a hit: a request that reused fewer took (about) nothing from the cache. Above a chat
 * template's fixed opening (SmolLM2's default system prompt is ~20 tokens, which unrelated prompts share) and at
 * least two of vLLM's 16-token blocks.
 */
export const MIN_HIT_TOKENS = 32;

/** A key's pin: the endpoint that evaluated its prefix last, and what that request took from the cache. */
interface Pin {
  endpoint: number;
  cachedTokens: number;
}

/** One stream's reported usage, as the endpoint that served it counted it. */
export interface ServedStream {
  /** The request's affinity key; undefined when affinity is off (only the counters learn). */
  key: string | undefined;
  /** The endpoint's index in the model's config. */
  endpoint: number;
  promptTokens: number;
  cachedTokens: number;
}

/**
 * One model's learner. Rendezvous hashing (routing.ts) places a conversation the first time; from then on the
 * conversation is pinned to the endpoint that served it last, because that is where its prefix is cached: after a
 * fail-over it stays on the endpoint that now holds its cache instead of going back to a cold one. Routing
 * overrides the pin (and the next served request moves it) only when that endpoint is down, excluded or over the
 * load bound. A pinned endpoint that reports a miss where its last request of the key hit has lost its cache
 * (restart, eviction): the pin stays (it evaluated the prefix again just now, so it is warm again, and no other
 * endpoint is known to be warmer), and the old hit no longer counts as evidence. Bounded: the least recently
 * served key is forgotten first. No I/O, no clock: everything it knows comes through `served`.
 */
export class CacheAffinity {
  /** Key → pin; a Map's order is insertion order, so re-inserting on each use keeps the least recent first. */
  private readonly pins = new Map<string, Pin>();
  private readonly promptTokens: number[];
  private readonly cachedTokens: number[];
  private readonly repinCounts: Record<RepinReason, number>;

  constructor(
    endpoints: number,
    private readonly maxKeys: number = DEFAULT_AFFINITY_KEYS,
  ) {
    this.promptTokens = new Array<number>(endpoints).fill(0);
    this.cachedTokens = new Array<number>(endpoints).fill(0);
    this.repinCounts = Object.fromEntries(REPIN_REASONS.map((r) => [r, 0])) as Record<RepinReason, number>;
  }

  /** The endpoint a key is pinned to, if it was served before (and not forgotten since). */
  pinOf(key: string | undefined): number | undefined {
    return key === undefined ? undefined : this.pins.get(key)?.endpoint;
  }

  /** Keys remembered now (at most `maxKeys`). */
  get size(): number {
    return this.pins.size;
  }

  /**
   * Learns from a stream the endpoint reported usage for. `healthy` says whether an endpoint is admitted now: a key
   * served away from a pin that is down moved for that reason, from one that is up for its load. Returns why the
   * key was re-pinned, if it was.
   */
  served(stream: ServedStream, healthy: (endpoint: number) => boolean): RepinReason | undefined {
    const { key, endpoint, promptTokens, cachedTokens } = stream;
    if (endpoint < 0 || endpoint >= this.promptTokens.length) return undefined;
    this.promptTokens[endpoint] = (this.promptTokens[endpoint] ?? 0) + promptTokens;
    this.cachedTokens[endpoint] = (this.cachedTokens[endpoint] ?? 0) + cachedTokens;
    if (key === undefined) return undefined;
    const before = this.pins.get(key);
    this.pins.delete(key);
    this.pins.set(key, { endpoint, cachedTokens });
    if (this.pins.size > this.maxKeys) {
      const oldest = this.pins.keys().next();
      if (oldest.done !== true) this.pins.delete(oldest.value);
    }
    const reason = repinReason(before, endpoint, cachedTokens, healthy);
    if (reason !== undefined) this.repinCounts[reason]++;
    return reason;
  }

  /** Prompt and cached tokens an endpoint reported since start (its hit rate is their ratio). */
  endpointStats(endpoint: number): { promptTokens: number; cachedTokens: number } {
    return {
      promptTokens: this.promptTokens[endpoint] ?? 0,
      cachedTokens: this.cachedTokens[endpoint] ?? 0,
    };
  }

  /** Re-pins since start, by reason. */
  repins(): Readonly<Record<RepinReason, number>> {
    return { ...this.repinCounts };
  }
}

/** Why a key served on `endpoint` with `cachedTokens` changed its pin `before`; undefined when it did not. */
function repinReason(
  before: Pin | undefined,
  endpoint: number,
  cachedTokens: number,
  healthy: (endpoint: number) => boolean,
): RepinReason | undefined {
  if (before === undefined) return undefined;
  if (before.endpoint !== endpoint) return healthy(before.endpoint) ? "endpoint_busy" : "endpoint_down";
  // Its last request here hit, this one did not: the endpoint lost the prefix (restarted, or evicted it).
  if (before.cachedTokens >= MIN_HIT_TOKENS && cachedTokens < MIN_HIT_TOKENS) return "cache_lost";
  return undefined;
}
