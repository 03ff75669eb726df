// The bounded wait queue of one model, fair across tenants: round-robin between them, FIFO within each.

/**
 * Rules (docs/operations.md, "Overload and queueing"):
 * - Work-conserving bound: at most `maxQueue` items in total, and one tenant may fill all of it while no one
 *   else waits. When an item arrives at a full queue, `shed()` refuses the newest item of the tenant holding the
 *   most places (the newcomer itself when its tenant holds the most, ties going to the newest item): a tenant
 *   flooding the queue gives its places back one by one to the tenants that arrive, until the places are shared
 *   equally. The evicted item never started, so its caller can still refuse it (503) before any answer.
 * - Tenants take turns: the tenant at the front of the ring offers its oldest item; once one of its items
 *   starts, it goes to the back of the ring. A tenant that has nothing queued leaves the ring; when it queues
 *   again it joins at the back.
 * - Sequence share (with `slots`): while another tenant waits, a tenant that already holds sequences and would
 *   hold more than `ceil(capacity / active tenants)` with its next item is over its share: it starts only after
 *   every tenant within its share that can start now. A tenant holding nothing is never over its share (a
 *   request larger than a share still gets its turn); a tenant alone in the queue is never capped.
 * - An item that cannot start yet (it needs more sequences than are free: n > 1) keeps its tenant's turn.
 *   Other tenants' oldest items that do fit may start past it, but only `bypassLimit` times; after that
 *   nothing starts until enough sequences are free for it, so a large request is delayed, never starved.
 */
export interface FairQueueOptions<T> {
  maxQueue: number;
  bypassLimit: number;
  tenantOf: (item: T) => string;
  /** The sequences behind the queue; absent: no sequence share (every tenant takes its turns). */
  slots?: SlotShare<T>;
}

/** What the sequence share reads: the capacity, what an item needs, what each tenant holds now. */
export interface SlotShare<T> {
  capacity: () => number;
  /** Sequences the item holds once started (its n). */
  sizeOf: (item: T) => number;
  /** Sequences held right now, by tenant (tenants holding none may be left out). */
  heldBy: () => ReadonlyMap<string, number>;
}

interface Entry<T> {
  item: T;
  /** Arrival order across tenants: the newest item of a tie is shed first. */
  arrival: number;
  /** Items of other tenants that started past this one while it was at the front and did not fit. */
  bypassed: number;
}

export class FairQueue<T> {
  /** Tenants with queued items, in turn order; each maps to its items, oldest first. */
  private readonly ring: string[] = [];
  private readonly byTenant = new Map<string, Entry<T>[]>();
  private size = 0;
  private arrivals = 0;

  constructor(private readonly options: FairQueueOptions<T>) {}

  get length(): number {
    return this.size;
  }

  /** Items queued by one tenant. */
  queuedBy(tenant: string): number {
    return this.byTenant.get(tenant)?.length ?? 0;
  }

  /** Appends an item; the bound is enforced by `shed()` (callers push, try to start, then shed). */
  push(item: T): void {
    const tenant = this.options.tenantOf(item);
    let entries = this.byTenant.get(tenant);
    if (entries === undefined) {
      entries = [];
      this.byTenant.set(tenant, entries);
      this.ring.push(tenant);
    }
    entries.push({ item, arrival: this.arrivals++, bypassed: 0 });
    this.size++;
  }

  /**
   * Removes the items beyond `maxQueue`, each the newest of the tenant holding the most places, and returns them
   * for the caller to refuse.
   */
  shed(): T[] {
    const shed: T[] = [];
    while (this.size > this.options.maxQueue) {
      const tenant = this.largestTenant();
      if (tenant === undefined) break;
      const entries = this.byTenant.get(tenant) as Entry<T>[];
      const entry = entries.pop() as Entry<T>;
      this.size--;
      if (entries.length === 0) this.leaveRing(tenant);
      shed.push(entry.item);
    }
    return shed;
  }

  /** Removes an item wherever it is (timeout, client gone); false when it was not queued. */
  remove(item: T): boolean {
    const tenant = this.options.tenantOf(item);
    const entries = this.byTenant.get(tenant);
    const i = entries?.findIndex((e) => e.item === item) ?? -1;
    if (entries === undefined || i < 0) return false;
    entries.splice(i, 1);
    this.size--;
    if (entries.length === 0) this.leaveRing(tenant);
    return true;
  }

  /**
   * Dequeues the next item that may start now. `start` returns what the item needs to start (its lease) or
   * undefined when it cannot start yet; it must not change anything, as it is asked about several items.
   */
  take<L>(start: (item: T) => L | undefined): { item: T; lease: L } | undefined {
    const order = this.turnOrder();
    const front = order[0];
    if (front === undefined) return undefined;
    const head = this.byTenant.get(front)?.[0] as Entry<T>;
    const lease = start(head.item);
    if (lease !== undefined) return { item: this.shift(front), lease };
    if (head.bypassed >= this.options.bypassLimit) return undefined;
    for (const tenant of order.slice(1)) {
      const candidate = this.byTenant.get(tenant)?.[0] as Entry<T>;
      const candidateLease = start(candidate.item);
      if (candidateLease === undefined) continue;
      head.bypassed++;
      return { item: this.shift(tenant), lease: candidateLease };
    }
    return undefined;
  }

  /** Every queued item, oldest first per tenant. */
  items(): T[] {
    return this.ring.flatMap((tenant) => (this.byTenant.get(tenant) ?? []).map((e) => e.item));
  }

  /** The ring, with the tenants over their sequence share moved behind the others (each part in ring order). */
  private turnOrder(): readonly string[] {
    const slots = this.options.slots;
    if (slots === undefined || this.ring.length < 2) return this.ring;
    const held = slots.heldBy();
    const active = new Set(this.ring);
    for (const [tenant, count] of held) if (count > 0) active.add(tenant);
    const share = Math.max(1, Math.ceil(slots.capacity() / active.size));
    const over = (tenant: string): boolean => {
      const holds = held.get(tenant) ?? 0;
      const head = this.byTenant.get(tenant)?.[0] as Entry<T>;
      return holds > 0 && holds + slots.sizeOf(head.item) > share;
    };
    const within = this.ring.filter((t) => !over(t));
    return within.length === this.ring.length ? this.ring : [...within, ...this.ring.filter(over)];
  }

  /** The tenant holding the most places; among equals, the one whose newest item arrived last. */
  private largestTenant(): string | undefined {
    let best: string | undefined;
    let bestCount = 0;
    let bestArrival = -1;
    for (const [tenant, entries] of this.byTenant) {
      const newest = (entries.at(-1) as Entry<T>).arrival;
      if (entries.length > bestCount || (entries.length === bestCount && newest > bestArrival)) {
        best = tenant;
        bestCount = entries.length;
        bestArrival = newest;
      }
    }
    return best;
  }

  /** Takes a tenant's oldest item and sends the tenant to the back of the ring (or out of it). */
  private shift(tenant: string): T {
    const entries = this.byTenant.get(tenant) as Entry<T>[];
    const entry = entries.shift() as Entry<T>;
    this.size--;
    if (entries.length === 0) {
      this.leaveRing(tenant);
    } else {
      const at = this.ring.indexOf(tenant);
      this.ring.splice(at, 1);
      this.ring.push(tenant);
    }
    return entry.item;
  }

  private leaveRing(tenant: string): void {
    this.byTenant.delete(tenant);
    const at = this.ring.indexOf(tenant);
    if (at >= 0) this.ring.splice(at, 1);
  }
}
