// A small Map-based LRU whose entries also expire after a fixed time: bounded memory, bounded staleness. Entries
// may be kept longer for stale-if-error reads, and a generation refuses values read before an invalidation.

export interface TtlCacheOptions {
  /** Entries older than this are never returned by get(), so changes made elsewhere show within this time. */
  ttlMs: number;
  maxEntries: number;
  /**
   * Entries younger than this are kept past the TTL for getStale(): what a caller may serve while the source of
   * truth is unreachable. Default 0 (none).
   */
  staleMs?: number;
  now?: () => number;
}

interface Entry<V> {
  value: V;
  storedAt: number;
}

export class TtlCache<K, V> {
  // A Map iterates in insertion order: re-inserting on a hit makes the first key the least recently used.
  private readonly entries = new Map<K, Entry<V>>();
  private readonly now: () => number;
  private readonly keepMs: number;
  private removals = 0;

  constructor(private readonly options: TtlCacheOptions) {
    this.now = options.now ?? Date.now;
    this.keepMs = Math.max(options.ttlMs, options.staleMs ?? 0);
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Bumped by every removal (an invalidation). A value read from the source before a removal may be what the
   * removal was about (a key revoked while it was being verified): setIfCurrent() refuses it.
   */
  get generation(): number {
    return this.removals;
  }

  /** A value stored less than ttlMs ago. */
  get(key: K): V | undefined {
    return this.read(key, this.options.ttlMs);
  }

  /** A value stored less than staleMs ago, even past the TTL: for when the source cannot be asked. */
  getStale(key: K): V | undefined {
    return this.read(key, this.options.staleMs ?? 0);
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, { value, storedAt: this.now() });
    while (this.entries.size > this.options.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
  }

  /**
   * Stores a value read from the source only if nothing was removed since `generation` was taken (before the
   * read). Returns whether it was stored.
   */
  setIfCurrent(generation: number, key: K, value: V): boolean {
    if (generation !== this.removals) return false;
    this.set(key, value);
    return true;
  }

  delete(key: K): void {
    this.removals++;
    this.entries.delete(key);
  }

  /** Drops every entry whose value matches; for invalidation by something other than the key. */
  deleteWhere(predicate: (value: V, key: K) => boolean): void {
    this.removals++;
    for (const [key, entry] of this.entries) if (predicate(entry.value, key)) this.entries.delete(key);
  }

  clear(): void {
    this.removals++;
    this.entries.clear();
  }

  private read(key: K, maxAgeMs: number): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    const age = this.now() - entry.storedAt;
    if (age >= this.keepMs) {
      this.entries.delete(key);
      return undefined;
    }
    if (age >= maxAgeMs) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }
}
