// Queue admission of one model: the fair bounded queue, its timeouts and aborts, and sequence leases in turn.
import { QueueFullError, QueueTimeoutError, RequestAbortedError } from "../errors.js";
import { FairQueue } from "../fair-queue.js";
import type { PromptStore } from "./prompt-store.js";
import { chooseSlots, type SlotChoice } from "./slot-choice.js";
import type { CachedSequence, SlotPool } from "./slot-pool.js";

/** What admission reads of a request. */
export interface Admittable {
  /** Prefix-cache scope (the organization, or the organization and its salt). */
  readonly scope: string;
  /** The prompt_cache_key within `scope` (undefined without one): the slot last used with it is preferred. */
  readonly cacheKey?: string | undefined;
  /** Fairness key (the organization). */
  readonly tenant: string;
  readonly prompt: readonly number[];
  /** Sequences it needs (one per choice). */
  readonly n: number;
  /** Aborting while queued drops the request. */
  readonly signal: AbortSignal | undefined;
}

export interface AdmissionOptions<T> {
  /** The model id, for the errors. */
  model: string;
  maxQueue: number;
  queueTimeoutMs: number;
  pool: SlotPool<CachedSequence>;
  /** Synchronously, when an item leaves the queue holding `lease` (its slots already marked busy). */
  admitted: (item: T, lease: SlotChoice) => void;
  /** When an item leaves the queue without sequences: queue full, queue timeout, aborted, shutting down. */
  refused: (item: T, error: Error) => void;
  /** Prompt states kept in host memory beyond the slots (prompt-store.ts); none when absent. */
  store?: Pick<PromptStore, "match" | "pin"> | undefined;
}

interface Waiting<T> {
  item: T;
  timer: NodeJS.Timeout | undefined;
  onAbort: (() => void) | undefined;
}

export class Admission<T extends Admittable> {
  private readonly queue: FairQueue<Waiting<T>>;
  private readonly waiting = new Map<T, Waiting<T>>();

  constructor(private readonly options: AdmissionOptions<T>) {
    // The organization is the fairness key (the prefix cache may be narrower: a salt). A request that needs
    // more sequences than are free lets others pass at most once per sequence. The sequence share keeps one
    // organization from taking every freed sequence while others wait.
    const pool = options.pool;
    this.queue = new FairQueue<Waiting<T>>({
      maxQueue: options.maxQueue,
      bypassLimit: pool.size,
      tenantOf: (waiting) => waiting.item.tenant,
      slots: { capacity: () => pool.size, sizeOf: (waiting) => waiting.item.n, heldBy: () => pool.heldBy() },
    });
  }

  /** Requests waiting for sequences. */
  get depth(): number {
    return this.queue.length;
  }

  /**
   * Queues an item and admits whatever fits now, in the queue's order (the item itself may leave at once).
   * Otherwise it waits, or the queue's bound refuses at once either the item (the queue is full and its
   * organization holds the most places) or the newest waiting item of the organization that does (fair-queue.ts).
   * A waiting item is refused after `queueTimeoutMs`, or when its signal aborts.
   */
  enqueue(item: T): void {
    const waiting: Waiting<T> = { item, timer: undefined, onAbort: undefined };
    this.waiting.set(item, waiting);
    // Queued before the bound is checked: a request that can start at once never needs a place.
    this.queue.push(waiting);
    this.admit();
    for (const shed of this.queue.shed()) this.refuse(shed, new QueueFullError(this.options.model));
    if (!this.waiting.has(item)) return;
    const model = this.options.model;
    const timeoutMs = this.options.queueTimeoutMs;
    waiting.timer = setTimeout(() => this.drop(item, new QueueTimeoutError(model, timeoutMs)), timeoutMs);
    const signal = item.signal;
    if (signal !== undefined) {
      waiting.onAbort = () => this.drop(item, new RequestAbortedError(model));
      signal.addEventListener("abort", waiting.onAbort, { once: true });
    }
  }

  /** Whether the item is still waiting. */
  isQueued(item: T): boolean {
    return this.waiting.has(item);
  }

  /** Leases sequences to waiting items in the fair queue's order while enough are free. */
  admit(): void {
    const pool = this.options.pool;
    // Runs every engine step: with nothing queued, skip copying each sequence's cached tokens.
    while (this.queue.length > 0) {
      const views = pool.views();
      const store = this.options.store;
      const taken = this.queue.take(({ item }) =>
        chooseSlots(views, item.prompt, item.scope, item.n, item.cacheKey, () =>
          store?.match(item.prompt, item.scope),
        ),
      );
      if (taken === undefined) return;
      const { item: waiting, lease } = taken;
      this.leave(waiting);
      pool.take(lease, waiting.item.tenant);
      if (lease.restore !== undefined) store?.pin(lease.restore);
      this.options.admitted(waiting.item, lease);
    }
  }

  /** Takes a waiting item out of the queue: `refused` with `error`. False when it was not waiting. */
  drop(item: T, error: Error): boolean {
    const waiting = this.waiting.get(item);
    if (waiting === undefined) return false;
    this.queue.remove(waiting);
    this.refuse(waiting, error);
    // A large request that held the queue may have left: others may fit now.
    this.admit();
    return true;
  }

  /** Refuses every waiting item (shutdown). */
  dropAll(error: Error): void {
    for (const { item } of this.queue.items()) this.drop(item, error);
  }

  /** A waiting item already out of the queue is refused: its caller answers 503 before any 200. */
  private refuse(waiting: Waiting<T>, error: Error): void {
    this.leave(waiting);
    this.options.refused(waiting.item, error);
  }

  private leave(waiting: Waiting<T>): void {
    this.waiting.delete(waiting.item);
    clearTimeout(waiting.timer);
    if (waiting.onAbort !== undefined) waiting.item.signal?.removeEventListener("abort", waiting.onAbort);
  }
}
