// The sequences of one context as leasable slots: which are busy, what each holds in its KV cache and for whom.
import type { SlotChoice, SlotView } from "./slot-choice.js";

/** What the pool reads of a sequence (a LlamaContextSequence; a plain object in tests). */
export interface CachedSequence {
  /** Tokens held in the sequence's KV cache. */
  readonly contextTokens: readonly number[];
}

export interface Slot<S extends CachedSequence> {
  readonly id: number;
  readonly sequence: S;
  busy: boolean;
  /** Cache scope (organization) of the tokens the sequence holds: a prefix is reused only within it. */
  scope: string | undefined;
  /** The scoped prompt_cache_key of the request that last used it (undefined: none). */
  key: string | undefined;
  /** While busy: the tenant (organization) holding it, for the queue's sequence share. */
  holder: string | undefined;
  /** When it was last freed (the pool's clock; 0: never used): the least recently used cache goes first. */
  lastUsed: number;
  /**
   * While busy: other requests may copy its prefix. Its request is past its prompt, so its cache only grows
   * (`markStarted`), or it is a copy source another lease holds, its cache unchanged. False from a lease until the
   * request starts: the sequence still holds what it is about to erase.
   */
  started: boolean;
}

export class SlotPool<S extends CachedSequence> {
  readonly slots: readonly Slot<S>[];
  private clock = 0;

  /** `sequences[i]` becomes slot `i`. */
  constructor(sequences: readonly S[]) {
    this.slots = sequences.map((sequence, id) => ({
      id,
      sequence,
      busy: false,
      scope: undefined,
      key: undefined,
      holder: undefined,
      lastUsed: 0,
      started: false,
    }));
  }

  get size(): number {
    return this.slots.length;
  }

  get busyCount(): number {
    return this.slots.filter((s) => s.busy).length;
  }

  slot(id: number): Slot<S> {
    const slot = this.slots[id];
    if (slot === undefined) throw new RangeError(`no slot ${id}`);
    return slot;
  }

  /**
   * A snapshot to choose leases from: several requests may be asked about in one admission pass, and reading a
   * sequence's cached tokens copies them, so it is done once per pass (and not for a busy slot whose request has
   * not started generating: what it holds is about to change).
   */
  views(): SlotView[] {
    return this.slots.map((s) => ({
      id: s.id,
      busy: s.busy,
      scope: s.scope,
      key: s.key,
      tokens: s.busy && !s.started ? [] : s.sequence.contextTokens,
      lastUsed: s.lastUsed,
    }));
  }

  /** Sequences held right now, by tenant. */
  heldBy(): Map<string, number> {
    const held = new Map<string, number>();
    for (const { busy, holder } of this.slots) {
      if (busy && holder !== undefined) held.set(holder, (held.get(holder) ?? 0) + 1);
    }
    return held;
  }

  /** Marks a lease's slots busy (a copy source it leases too, its cache unchanged), held by `holder`. */
  take(lease: SlotChoice, holder: string): void {
    for (const id of leasedIds(lease)) {
      const slot = this.slot(id);
      slot.busy = true;
      slot.holder = holder;
      slot.started = false;
    }
    if (lease.source?.leased === true) {
      const source = this.slot(lease.source.slot);
      source.busy = true;
      source.holder = holder;
      source.started = true;
    }
  }

  /** A lease's request is past its prompt: its slots' caches only grow now, and other requests may copy them. */
  markStarted(lease: SlotChoice): void {
    for (const id of leasedIds(lease)) this.slot(id).started = true;
  }

  /** The lease's copy source has been copied from (or never will be): a leased one is free again, cache untouched. */
  releaseSource(lease: SlotChoice): void {
    if (lease.source === undefined) return;
    if (lease.source.leased) this.release(lease.source.slot);
    delete lease.source;
  }

  /** Frees a lease's slots; their KV stays as a reusable prefix. */
  free(lease: SlotChoice): void {
    this.releaseSource(lease);
    for (const id of leasedIds(lease)) this.release(id);
  }

  private release(id: number): void {
    const slot = this.slot(id);
    slot.busy = false;
    slot.holder = undefined;
    slot.lastUsed = ++this.clock;
  }
}

/** Every slot of a lease, primary first. */
export function leasedIds(lease: SlotChoice): number[] {
  return [lease.primary, ...lease.others];
}
