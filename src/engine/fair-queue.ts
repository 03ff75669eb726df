// The bounded wait queue of one model, fair across tenants: round-robin between them, FIFO within each.

/**
 * Rules (docs/operations.md, "Overload and queueing"):
 * - At most `maxQueue` items in total, and at most `tenantShare(maxQueue)` of them from one tenant, so one
 *   tenant flooding the queue leaves room for the others.
 * - Tenants take turns: the tenant at the front of the ring offers its oldest item; once one of its items
 *   starts, it goes to the back of the ring. A tenant that has nothing queued leaves the ring; when it queues
 *   again it joins at the back.
 * - An item that cannot start yet (it needs more sequences than are free: n > 1) keeps its tenant's turn.
 *   Other tenants' oldest items that do fit may start past it, but only `bypassLimit` times; after that
 *   nothing starts until enough sequences are free for it, so a large request is delayed, never starved.
 */
export interface FairQueueOptions<T> {
  maxQueue: number;
  bypassLimit: number;
  tenantOf: (item: T) => string;
}

interface Entry<T> {
  item: T;
  /** Items of other tenants that started past this one while it was at the front and did not fit. */
  bypassed: number;
}

/** Places one tenant may hold in a queue of `maxQueue`: half of it, rounded up, at least one. */
export function tenantShare(maxQueue: number): number {
  return Math.max(1, Math.ceil(maxQueue / 2));
}

export class FairQueue<T> {
  /** Tenants with queued items, in turn order; each maps to its items, oldest first. */
  private readonly ring: string[] = [];
  private readonly byTenant = new Map<string, Entry<T>[]>();
  private size = 0;

  constructor(private readonly options: FairQueueOptions<T>) {}

  get length(): number {
    return this.size;
  }

  /** Items queued by one tenant. */
  queuedBy(tenant: string): number {
    return this.byTenant.get(tenant)?.length ?? 0;
  }

  /** Whether one more item of this tenant fits within the total bound and the tenant's share. */
  hasRoomFor(tenant: string): boolean {
    return this.size < this.options.maxQueue && this.queuedBy(tenant) < tenantShare(this.options.maxQueue);
  }

  /** Appends an item (bounds are the caller's check: it may queue first and refuse after trying to start it). */
  push(item: T): void {
    const tenant = this.options.tenantOf(item);
    let entries = this.byTenant.get(tenant);
    if (entries === undefined) {
      entries = [];
      this.byTenant.set(tenant, entries);
      this.ring.push(tenant);
    }
    entries.push({ item, bypassed: 0 });
    this.size++;
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
    const front = this.ring[0];
    if (front === undefined) return undefined;
    const head = this.byTenant.get(front)?.[0] as Entry<T>;
    const lease = start(head.item);
    if (lease !== undefined) return { item: this.shift(front), lease };
    if (head.bypassed >= this.options.bypassLimit) return undefined;
    for (const tenant of this.ring.slice(1)) {
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
