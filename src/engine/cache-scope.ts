// Whose cached prompt tokens a request may reuse: its organization, narrowed by its cache salt when it sent one.
import { createHash } from "node:crypto";
import type { GenerationRequest } from "./types.js";

type Scoped = Pick<GenerationRequest, "cacheScope" | "cacheSalt">;
type Keyed = Scoped & Pick<GenerationRequest, "promptCacheKey">;

/** `org` alone, or `org` + NUL + salt (a NUL cannot occur in an org id, so no two pairs collide). */
export function cacheScopeOf(request: Scoped): string {
  return request.cacheSalt === undefined
    ? request.cacheScope
    : `${request.cacheScope}\u0000${request.cacheSalt}`;
}

/**
 * The request's `prompt_cache_key` within its cache scope, or undefined without one: the same key sent by another
 * organization (or with another salt) is another key, so it can never draw a request to someone else's cache.
 */
export function scopedCacheKey(request: Keyed): string | undefined {
  if (request.promptCacheKey === undefined) return undefined;
  return createHash("sha256")
    .update(JSON.stringify([cacheScopeOf(request), request.promptCacheKey]))
    .digest("hex");
}

/**
 * The `cache_salt` sent to an upstream engine that isolates its prefix cache by salt (vLLM, another Hearth): one
 * value per organization and client salt, opaque, so the upstream never learns our organization ids.
 */
export function upstreamCacheSalt(request: Scoped): string {
  return createHash("sha256").update(cacheScopeOf(request)).digest("hex").slice(0, 32);
}
