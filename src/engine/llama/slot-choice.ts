// Which free sequences a request leases: the longest same-scope cached prefix first; else the slots whose caches
// are worth least (empty, then least recently used), so other scopes' prefixes stay for their next requests. A slot
// whose cache goes on past the shared prefix is kept: the prompt then starts in a cheaper slot from a copy of the
// prefix, so the conversation it holds is still there when it comes back.

export interface SlotView {
  id: number;
  busy: boolean;
  /** Tokens held in the sequence's KV cache. */
  tokens: readonly number[];
  /** Cache scope (organization) that put them there. */
  scope: string | undefined;
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

/** Returns undefined when fewer than `count` slots are free. Pure: the caller marks the slots busy. */
export function chooseSlots(
  slots: readonly SlotView[],
  prompt: readonly number[],
  scope: string,
  count: number,
): SlotChoice | undefined {
  // Cheapest to overwrite first: empty caches, then the least recently used (llama-server picks its slots alike).
  // Taking the lowest free id instead made two scopes taking turns overwrite each other's prefix every time.
  const free = slots
    .filter((s) => !s.busy)
    .sort(
      (a, b) =>
        Number(a.tokens.length > 0) - Number(b.tokens.length > 0) || a.lastUsed - b.lastUsed || a.id - b.id,
    );
  if (free.length < count) return undefined;
  let primary = free[0] as SlotView;
  let best = 0;
  for (const slot of free) {
    if (slot.scope !== scope) continue;
    const shared = Math.min(commonPrefixLength(slot.tokens, prompt), prompt.length - 1);
    if (shared > best) {
      best = shared;
      primary = slot;
    }
  }
  // Keep a cache that goes another way than the prompt when another free slot can take it (and its copies).
  const diverges = best < prompt.length - 1;
  if (best > 0 && diverges && primary.tokens.length - best >= KEEP_SUFFIX && free.length > count) {
    const source = primary.id;
    const [first, ...rest] = free.filter((s) => s.id !== source).slice(0, count) as [SlotView, ...SlotView[]];
    return { primary: first.id, others: rest.map((s) => s.id), reusable: best, source };
  }
  const others = free
    .filter((s) => s.id !== primary.id)
    .slice(0, count - 1)
    .map((s) => s.id);
  return { primary: primary.id, others, reusable: best };
}
