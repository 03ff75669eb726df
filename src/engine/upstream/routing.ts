// Which endpoint serves a request: prefix affinity by bounded-load rendezvous hashing, else least outstanding.
import { createHash } from "node:crypto";
import type { ChatMessage } from "../types.js";

/**
 * Characters of the conversation's beginning that make up the affinity key. Conversations that share this much
 * text share a prefix worth caching (a few hundred tokens); a long system prompt alone fills it, so every chat
 * under that prompt goes together, while chats under a short one are told apart by their first user message.
 */
export const AFFINITY_PREFIX_CHARS = 2048;

/** An endpoint as routing sees it. `id` is stable across restarts (its URL), so the ranking is too. */
export interface RoutableEndpoint {
  readonly id: string;
  readonly healthy: boolean;
  readonly inFlight: number;
  readonly maxInFlight: number;
}

/**
 * The affinity key of a request: the organization, then the client's `prompt_cache_key` when it sent one (OpenAI's
 * way of saying which requests share a prefix), else its `X-Session-Id`, else the leading system messages and the
 * first other message, cut at AFFINITY_PREFIX_CHARS. The organization is always hashed in, so two organizations
 * sending the same conversation or the same key get unrelated rankings (their caches never become each other's
 * business).
 */
export function affinityKey(
  orgId: string,
  messages: readonly ChatMessage[],
  promptCacheKey?: string,
  sessionId?: string,
): string {
  const hash = createHash("sha256");
  // Length-prefixed, so no organization id can be made to collide with another's id plus a prompt.
  hash.update(`${orgId.length}:${orgId}\0`);
  // Tagged apart from each other and from a conversation's text, which starts with a role: no kind of key
  // collides with another.
  if (promptCacheKey !== undefined) return hash.update(`key\0${promptCacheKey}`).digest("hex");
  if (sessionId !== undefined) return hash.update(`session\0${sessionId}`).digest("hex");
  let budget = AFFINITY_PREFIX_CHARS;
  for (const message of messages) {
    if (budget <= 0) break;
    const text = `${message.role}\0${message.content}\0`.slice(0, budget);
    hash.update(text);
    budget -= text.length;
    if (message.role !== "system") break;
  }
  return hash.digest("hex");
}

/** The rendezvous (highest random weight) score of an endpoint for a key. */
function score(key: string, endpointId: string): number {
  return createHash("sha256").update(key).update("\0").update(endpointId).digest().readUInt32BE(0);
}

/** Busiest an endpoint may be and still take its affine requests: 1.25 × the average load, plus one. */
export function loadBound(endpoints: readonly RoutableEndpoint[]): number {
  const healthy = endpoints.filter((e) => e.healthy);
  if (healthy.length === 0) return 0;
  // The average counts the request being placed, so a pool at rest still allows a few affine requests each.
  const average = (healthy.reduce((sum, e) => sum + e.inFlight, 0) + 1) / healthy.length;
  return Math.ceil(1.25 * average + 1);
}

/**
 * The index of the endpoint to serve a request, or undefined when no healthy endpoint has a free slot.
 * With a key: the endpoint it is pinned to (`pinned`: where its prefix was cached last, cache-affinity.ts), else
 * the highest-ranked healthy endpoint, each only under the load bound and its maxInFlight. Otherwise, or when
 * every ranked one is over its bound: the healthy endpoint with the fewest requests in flight (ties: the first).
 * `exclude` holds endpoints this request already tried.
 */
export function chooseEndpoint(
  endpoints: readonly RoutableEndpoint[],
  key: string | undefined,
  exclude: ReadonlySet<number> = new Set(),
  pinned?: number,
): number | undefined {
  const open: number[] = [];
  endpoints.forEach((e, i) => {
    if (e.healthy && !exclude.has(i) && e.inFlight < e.maxInFlight) open.push(i);
  });
  if (open.length === 0) return undefined;
  if (key !== undefined) {
    const bound = loadBound(endpoints);
    if (pinned !== undefined && open.includes(pinned) && (endpoints[pinned]?.inFlight ?? bound) < bound) {
      return pinned;
    }
    const ranked = open
      .map((i) => ({ i, score: score(key, (endpoints[i] as RoutableEndpoint).id) }))
      .sort((a, b) => b.score - a.score || a.i - b.i);
    const affine = ranked.find(({ i }) => (endpoints[i] as RoutableEndpoint).inFlight < bound);
    if (affine !== undefined) return affine.i;
  }
  let best = open[0] as number;
  for (const i of open) {
    if ((endpoints[i] as RoutableEndpoint).inFlight < (endpoints[best] as RoutableEndpoint).inFlight)
      best = i;
  }
  return best;
}

/** Whether any healthy endpoint outside `exclude` exists (full or not): if not, waiting is pointless. */
export function hasCandidate(endpoints: readonly RoutableEndpoint[], exclude: ReadonlySet<number>): boolean {
  return endpoints.some((e, i) => e.healthy && !exclude.has(i));
}
