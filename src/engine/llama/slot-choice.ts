// Which free sequences a request leases: the longest same-scope cached prefix first; else the slots whose caches
// are worth least (empty, then least recently used), so other scopes' prefixes stay for their next requests. A slot
// whose cache goes on past the shared prefix is kept: the prompt then starts in a cheaper slot from a copy of the
// prefix, so the conversation it holds is still there when it comes back. A request with a prompt_cache_key (scoped
// to its organization) takes the slot its key last used when no slot shares a longer prefix, and overwrites slots
// other keys hold only when nothing else is free.

export interface SlotView {
  id: number;
  busy: boolean;
  /** Tokens held in the sequence's KV cache. */
  tokens: readonly number[];
  /** Cache scope (organization) that put them there. */
  scope: string | undefined;
  /** The scoped prompt_cache_key of the request that put them there (undefined: none). */
  key?: string | undefined;
  /** When the slot was last freed, on the pool's own clock (0: never used). */
  lastUsed: number;
}

export interface SlotChoice {
  /** The slot that evaluates the prompt; the others receive a copy of its state. */
  primary: number;
  others: number[];
  /** Prompt tokens already in the primary slot (never the whole prompt: the last token is always evaluated). */
  reusable: number;
  /**
   * A free slot holding the reusable prefix and more: the primary copies the prefix from it before its prompt.
   * Leased too until that copy is done, so no other request overwrites it first.
   */
  source?: number;
}

/**
 * Cached tokens past the shared prefix worth keeping when the prompt goes another way: a slot holding at least this
 * many more is copied from, not overwritten. A conversation's next turn, or the same prompt again, extends the
 * cache instead (it diverges only where the previous answer was), so it goes on in its own slot; another
 * conversation on the same system prompt keeps its own.
 */
export const KEEP_SUFFIX = 8;

export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const max = Math.min(a.length, b.length);
  let i = 0;
  while (i < max && a[i] === b[i]) i++;
  return i;
}

/** A slot whose cache another prompt_cache_key put there: a keyed request overwrites it last. */
function heldByOtherKey(slot: SlotView, key: string | undefined): boolean {
  return key !== undefined && slot.key !== undefined && slot.key !== key;
}

/**
 * Returns undefined when fewer than `count` slots are free. Pure: the caller marks the slots busy. `key` is the
 * request's scoped prompt_cache_key (cache-scope.ts `scopedCacheKey`), undefined without one.
 */
export function chooseSlots(
  slots: readonly SlotView[],
  prompt: readonly number[],
  scope: string,
  count: number,
  key?: string,
): SlotChoice | undefined {
  // Cheapest to overwrite first: empty caches, then (for a keyed request) caches no other key holds, then the least
  // recently used (llama-server picks its slots alike). Taking the lowest free id instead made two scopes taking
  // turns overwrite each other's prefix every time.
  const free = slots
    .filter((s) => !s.busy)
    .sort(
      (a, b) =>
        Number(a.tokens.length > 0) - Number(b.tokens.length > 0) ||
        Number(heldByOtherKey(a, key)) - Number(heldByOtherKey(b, key)) ||
        a.lastUsed - b.lastUsed ||
        a.id - b.id,
    );
  if (free.length < count) return undefined;
  let primary = free[0] as SlotView;
  let best = 0;
  for (const slot of free) {
    if (slot.scope !== scope) continue;
    const shared = Math.min(commonPrefixLength(slot.tokens, prompt), prompt.length - 1);
    // On a tie the key's own slot wins: requests with one key share more than this prompt shows yet.
    const ownKey = key !== undefined && slot.key === key && primary.key !== key;
    if (shared > best || (shared === best && shared > 0 && ownKey)) {
      best = shared;
      primary = slot;
    }
  }
  // Keep a cache that goes another way than the prompt when other free slots can take the prompt (and its copies)
  // without overwriting another key's cache.
  const diverges = best < prompt.length - 1;
  const spare = free.filter((s) => s.id !== primary.id && !heldByOtherKey(s, key));
  if (best > 0 && diverges && primary.tokens.length - best >= KEEP_SUFFIX && spare.length >= count) {
    const [first, ...rest] = spare.slice(0, count) as [SlotView, ...SlotView[]];
    return { primary: first.id, others: rest.map((s) => s.id), reusable: best, source: primary.id };
  }
  const others = free
    .filter((s) => s.id !== primary.id)
    .slice(0, count - 1)
    .map((s) => s.id);
  return { primary: primary.id, others, reusable: best };
}
