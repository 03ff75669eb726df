// The cache-invalidation fan-out: a change drops what it made stale from this replica's caches at once and is
// handed to listeners (the Redis broadcast), which carry it to the other replicas. The model catalogue rides on it.

/**
 * A change that stale cache entries must not outlive: a revoked key, or an org whose limits or grants changed.
 * Applied at once on the replica that made it, and sent to the others by a broadcast when one is wired.
 */
export type CacheInvalidation =
  | { kind: "key"; keyId: string }
  | { kind: "org"; orgId: string }
  /**
   * The model catalogue (src/catalogue/catalogue.ts): a model was added or removed ("changed": read the store again), or
   * an operator loaded or unloaded it (every replica does the same).
   */
  | { kind: "model"; modelId: string; action: "changed" | "load" | "unload" }
  /** Changes may have been missed (the broadcast was cut off): drop everything. Never sent to other replicas. */
  | { kind: "all" };

type InvalidationHandler = (event: CacheInvalidation) => void;

export class CacheInvalidations {
  /** This replica's caches (keys, grants), each dropping what an event made stale. */
  private readonly caches: InvalidationHandler[] = [];
  private readonly listeners: InvalidationHandler[] = [];

  /** Registers one of this replica's caches; `drop` removes the entries `event` made stale. */
  addCache(drop: InvalidationHandler): void {
    this.caches.push(drop);
  }

  /** Drops what a change made elsewhere (another replica) made stale in this replica's caches. */
  invalidate(event: CacheInvalidation): void {
    for (const drop of this.caches) drop(event);
  }

  /**
   * Calls `listener` after every change this replica makes that other replicas' caches must drop (the
   * broadcast's publisher). Without one, other replicas see changes within the cache TTL.
   */
  onInvalidation(listener: InvalidationHandler): void {
    this.listeners.push(listener);
  }

  /** A change this replica made: applied to its own caches first, then handed to the listeners. */
  changed(event: CacheInvalidation): void {
    this.invalidate(event);
    for (const listener of this.listeners) listener(event);
  }
}
