// A small Map-based LRU whose entries also expire after a fixed time: bounded memory, bounded staleness.

export interface TtlCacheOptions {
  /** Entries older than this are never returned, so changes made elsewhere show within this time. */
  ttlMs: number;
  maxEntries: number;
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

  constructor(private readonly options: TtlCacheOptions) {
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    this.entries.delete(key);
    if (this.now() - entry.storedAt >= this.options.ttlMs) return undefined;
    this.entries.set(key, entry);
    return entry.value;
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

  delete(key: K): void {
    this.entries.delete(key);
  }

  /** Drops every entry whose value matches; for invalidation by something other than the key. */
  deleteWhere(predicate: (value: V, key: K) => boolean): void {
    for (const [key, entry] of this.entries) if (predicate(entry.value, key)) this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
