// Which free sequences a request leases. First the slots that keep the busy ones side by side (runCost: llama.cpp
// decodes each run of consecutive sequence ids in a ubatch of its own); among those, the longest same-scope cached
// prefix (copied beside the busy slots when it lies away from them and saves enough); else the slots whose caches
// are worth least (empty, then a copy of what another slot holds, then least recently used), so other scopes'
// prefixes stay for their next requests. A slot whose cache goes on past the shared prefix is kept: the prompt then
// starts in a cheaper slot from a copy of the prefix, so the conversation it holds is still there when it comes
// back. A prefix another request is generating after (a busy slot) is copied too when it saves enough prompt
// tokens: concurrent requests on one long system prompt, or the same prompt again before the first one ends, are
// not evaluated twice. A prompt state kept in host memory (prompt-store.ts) that shares enough more than any slot is
// loaded into the cheapest free slot. A request with a prompt_cache_key (scoped to its organization) takes the slot
// its key last used when no slot shares a longer prefix, and overwrites slots other keys hold only when nothing else
// is free.

export interface SlotView {
  id: number;
  busy: boolean;
  /**
   * Tokens held in the sequence's KV cache: a free slot's, and a busy slot's once its request is past its prompt
   * (its cache then only grows while it generates); none for a busy slot still preparing its prompt.
   */
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
  /** A slot holding the reusable prefix and more: the primary copies the prefix from it before its prompt. */
  source?: CopySource;
  /** A prompt-store entry holding the reusable prefix (prompt-store.ts): the primary loads it before its prompt. */
  restore?: number;
}

/** A prompt state kept in host memory (prompt-store.ts) sharing the longest prefix with a prompt. */
export interface StoredMatch {
  /** The store's entry. */
  id: number;
  /** Prompt tokens it holds (never the whole prompt: the last token is always evaluated). */
  shared: number;
}

export interface CopySource {
  slot: number;
  /**
   * A free slot is leased too until the copy is done, so no other request overwrites it first. A busy one is
   * another request's, generating: the prefix it shares stays put while it does.
   */
  leased: boolean;
}

/**
 * Cached tokens past the shared prefix worth keeping when the prompt goes another way: a slot holding at least this
 * many more is copied from, not overwritten. A conversation's next turn, or the same prompt again, extends the
 * cache instead (it diverges only where the previous answer was), so it goes on in its own slot; another
 * conversation on the same system prompt keeps its own.
 */
export const KEEP_SUFFIX = 8;

/**
 * Prompt tokens a copy from a busy slot, or a load from the prompt store, must save over the best slot (a slot whose
 * overwrite would lose fewer is not saved to the store either). llama.cpp keeps each sequence's KV
 * cache in a stream of its own (node-llama-cpp's is not unified), and a copy between streams moves the whole
 * stream at the next decode, in that decode's time: for SmolLM2 at 2,048 tokens a sequence that is 47 MB, a few
 * milliseconds, where a prompt token costs 3-4 ms of a step on 2 cores (docs/models.md).
 */
export const MIN_COPY_GAIN = 8;

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
  stored?: () => StoredMatch | undefined,
): SlotChoice | undefined {
  const free = slots.filter((s) => !s.busy);
  if (free.length < count) return undefined;
  const runs = runCost(slots);
  // Cheapest to overwrite first: empty caches, then caches another slot holds too, then (for a keyed request)
  // caches no other key holds, then the least recently used (llama-server picks its slots alike). Taking the
  // lowest free id instead made two scopes taking turns overwrite each other's prefix every time; without the
  // copies going first, a prompt copied from a busy slot overwrote the least recently used prompt, which a
  // closed loop of clients needed next (bench/anchor.ts at 4 streams).
  const copies = copiedCaches(slots);
  // Before all of that, the slots that keep the busy ones in fewest runs of consecutive ids (see runCost).
  free.sort(
    (a, b) =>
      runs(a) - runs(b) ||
      Number(a.tokens.length > 0) - Number(b.tokens.length > 0) ||
      Number(!copies.has(a.id)) - Number(!copies.has(b.id)) ||
      Number(heldByOtherKey(a, key)) - Number(heldByOtherKey(b, key)) ||
      a.lastUsed - b.lastUsed ||
      a.id - b.id,
  );
  const last = prompt.length - 1;
  const sharedWith = (slot: SlotView) =>
    slot.scope === scope ? Math.min(commonPrefixLength(slot.tokens, prompt), last) : 0;
  // In the order above, so that of equal prefixes the cheapest slot's is taken.
  let primary = free[0] as SlotView;
  let best = 0;
  for (const slot of free) {
    const shared = sharedWith(slot);
    // On a tie the key's own slot wins: requests with one key share more than this prompt shows yet.
    const ownKey = key !== undefined && slot.key === key && primary.key !== key;
    if (shared > best || (shared === best && shared > 0 && ownKey)) {
      best = shared;
      primary = slot;
    }
  }
  // The busy slot sharing the longest prefix (one still preparing its prompt shows no tokens, so shares none).
  let busy: SlotView | undefined;
  let busyShared = 0;
  for (const slot of slots) {
    const shared = slot.busy ? sharedWith(slot) : 0;
    if (shared > busyShared) {
      busyShared = shared;
      busy = slot;
    }
  }
  // A state in host memory sharing enough more than any slot: the cheapest free slots take the prompt, loading it.
  const inStore = stored?.();
  if (inStore !== undefined && inStore.shared - Math.max(best, busyShared) >= MIN_COPY_GAIN) {
    return { ...into(free, count), reusable: inStore.shared, restore: inStore.id };
  }
  // A busy slot sharing enough more: the cheapest free slots take the prompt, from a copy of its prefix.
  if (busy !== undefined && busyShared - best >= MIN_COPY_GAIN) {
    return { ...into(free, count), reusable: busyShared, source: { slot: busy.id, leased: false } };
  }
  // The prefix lies in a slot that would start a new run of busy ids while another slot keeps the runs as they are:
  // the prompt goes to that one, from a copy of the prefix when it saves enough tokens.
  const placed = free[0] as SlotView;
  if (runs(primary) > runs(placed)) {
    const near = sharedWith(placed);
    const spare = free.filter((s) => s.id !== primary.id);
    if (best - near >= MIN_COPY_GAIN && spare.length >= count) {
      return { ...into(spare, count), reusable: best, source: { slot: primary.id, leased: true } };
    }
    primary = placed;
    best = near;
  }
  // Keep a cache that goes another way than the prompt when other free slots can take the prompt (and its copies)
  // without overwriting another key's cache, nor starting a new run.
  const diverges = best < last;
  const spare = free.filter((s) => s.id !== primary.id && !heldByOtherKey(s, key));
  if (
    best > 0 &&
    diverges &&
    primary.tokens.length - best >= KEEP_SUFFIX &&
    spare.length >= count &&
    runs(spare[0] as SlotView) <= runs(primary)
  ) {
    return { ...into(spare, count), reusable: best, source: { slot: primary.id, leased: true } };
  }
  const others = free
    .filter((s) => s.id !== primary.id)
    .slice(0, count - 1)
    .map((s) => s.id);
  return { primary: primary.id, others, reusable: best };
}

/**
 * What leasing a free slot does to the runs of consecutive busy ids: -1 when it joins two, 0 when it extends one (or
 * none is busy), 1 when it starts another. llama.cpp decodes a step in one ubatch per run: each sequence keeps its KV
 * cache in a stream of its own (node-llama-cpp's contexts are not unified), and one ubatch takes only consecutive
 * streams (`split_equal`). On 2 vCPUs a ubatch of one token costs a third of one of four (SmolLM2: 5.3 against
 * 16.2 ms), so four streams spread over sixteen slots made 20 % fewer tokens than the same four side by side.
 */
function runCost(slots: readonly SlotView[]): (slot: SlotView) => number {
  const busy = new Set(slots.filter((s) => s.busy).map((s) => s.id));
  return (slot) => (busy.size === 0 ? 0 : 1 - Number(busy.has(slot.id - 1)) - Number(busy.has(slot.id + 1)));
}

/** The first `count` of these slots (at least one, cheapest first): the primary and its copies. */
function into(slots: readonly SlotView[], count: number): { primary: number; others: number[] } {
  const [first, ...rest] = slots.slice(0, count) as [SlotView, ...SlotView[]];
  return { primary: first.id, others: rest.map((s) => s.id) };
}

/**
 * Free slots whose cache another slot of the same scope holds too, but for fewer than KEEP_SUFFIX tokens: the same
 * prompt and answer twice (a prompt copied from a busy slot, then both ended alike). Of two such twins the least
 * recently used goes first.
 */
function copiedCaches(slots: readonly SlotView[]): Set<number> {
  const copies = new Set<number>();
  for (const slot of slots) {
    if (slot.busy || slot.tokens.length === 0) continue;
    // A twin shares every token before `probe`: comparing that one first turns away, without a walk along the
    // shared system prompt, the slots that only begin alike.
    const probe = slot.tokens.length - KEEP_SUFFIX;
    const covered = slots.some((other) => {
      if (other.id === slot.id || other.scope !== slot.scope) return false;
      if (probe >= 0 && other.tokens[probe] !== slot.tokens[probe]) return false;
      const shared = commonPrefixLength(slot.tokens, other.tokens);
      return shared > 0 && shared > probe;
    });
    if (covered) copies.add(slot.id);
  }
  return copies;
}
