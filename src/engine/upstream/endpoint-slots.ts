// Slots on one upstream model's endpoints: a free one chosen by routing, else a bounded fair wait for one.
import { QueueFullError, QueueTimeoutError, RequestAbortedError } from "../errors.js";
import { FairQueue } from "../fair-queue.js";
import type { Endpoint, EndpointPool } from "./endpoint-pool.js";
import { chooseEndpoint, hasCandidate } from "./routing.js";

/** No healthy endpoint can take the request (all down, or all tried): the same 503 as a full queue, at once. */
export class NoHealthyEndpointError extends QueueFullError {
  override name = "NoHealthyEndpointError";
  constructor(model: string, detail: string) {
    super(model);
    this.message = `The engine for model ${model} is overloaded: ${detail}.`;
  }
}

/** What a slot is asked for. */
export interface SlotRequest {
  /** The organization: fairness key of the wait. */
  readonly scope: string;
  /** Affinity key (routing.ts). */
  readonly key: string | undefined;
  /** Endpoints already tried by this request. */
  readonly exclude: ReadonlySet<number>;
  readonly signal: AbortSignal | undefined;
}

interface Waiter {
  request: SlotRequest;
  resolve: (endpoint: Endpoint) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
  onAbort: (() => void) | undefined;
}

export interface EndpointSlotsOptions {
  pool: EndpointPool;
  maxQueue: number;
  queueTimeoutMs: number;
  /** The endpoint a key is pinned to (cache-affinity.ts); routing prefers it while it is open and under the bound. */
  pinOf?: (key: string | undefined) => number | undefined;
}

export class EndpointSlots {
  private readonly queue: FairQueue<Waiter>;
  /** Slots held right now, by organization: the queue's slot share. */
  private readonly held = new Map<string, number>();

  constructor(private readonly options: EndpointSlotsOptions) {
    // Every request needs one slot, but a retry may not use the endpoints it tried: it must never hold up the
    // others, hence no bypass limit. The slot share counts the healthy endpoints' slots.
    const { pool } = options;
    this.queue = new FairQueue<Waiter>({
      maxQueue: options.maxQueue,
      bypassLimit: Number.POSITIVE_INFINITY,
      tenantOf: (waiter) => waiter.request.scope,
      slots: {
        capacity: () => pool.endpoints.reduce((sum, e) => sum + (e.healthy ? e.maxInFlight : 0), 0),
        sizeOf: () => 1,
        heldBy: () => this.held,
      },
    });
  }

  get depth(): number {
    return this.queue.length;
  }

  private get model(): string {
    return this.options.pool.model;
  }

  /**
   * A slot on an endpoint: at once when one is free, else after a fair wait. Refused at once when no healthy
   * endpoint is left to try or the queue is full and the request's organization holds the most places; while
   * waiting, when an organization arriving at the full queue takes its place (fair-queue.ts), after
   * `queueTimeoutMs`, or when the request's signal aborts. Give the slot back with `release(endpoint, scope)`.
   */
  acquire(request: SlotRequest): Promise<Endpoint> {
    const { pool } = this.options;
    if (request.signal?.aborted) return Promise.reject(new RequestAbortedError(this.model));
    if (!hasCandidate(pool.endpoints, request.exclude)) {
      return Promise.reject(this.noEndpoint(request));
    }
    // Those already waiting go first.
    if (this.queue.length === 0) {
      const free = this.free(request);
      if (free !== undefined) return Promise.resolve(free);
    }
    return new Promise<Endpoint>((resolve, reject) => {
      const waiter: Waiter = { request, resolve, reject, timer: undefined, onAbort: undefined };
      const { queueTimeoutMs } = this.options;
      waiter.timer = setTimeout(
        () => this.drop(waiter, new QueueTimeoutError(this.model, queueTimeoutMs)),
        queueTimeoutMs,
      );
      if (request.signal !== undefined) {
        waiter.onAbort = () => this.drop(waiter, new RequestAbortedError(this.model));
        request.signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.queue.push(waiter);
      this.pump();
      for (const shed of this.queue.shed()) this.refuse(shed, new QueueFullError(this.model));
    });
  }

  /** Gives back a slot `acquire` gave a request of `scope`, and hands free slots to waiting requests. */
  release(endpoint: Endpoint, scope: string): void {
    this.options.pool.release(endpoint);
    const holds = (this.held.get(scope) ?? 0) - 1;
    if (holds > 0) this.held.set(scope, holds);
    else this.held.delete(scope);
    this.pump();
  }

  /** After a change of health: refuses waiters with no healthy endpoint left, admits what fits now. */
  healthChanged(): void {
    for (const waiter of this.queue.items()) {
      if (!hasCandidate(this.options.pool.endpoints, waiter.request.exclude)) {
        this.drop(waiter, this.noEndpoint(waiter.request));
      }
    }
    this.pump();
  }

  /** Refuses every waiting request (shutdown). */
  dropAll(error: Error): void {
    for (const waiter of this.queue.items()) this.drop(waiter, error);
  }

  private pump(): void {
    const { pool } = this.options;
    while (this.queue.length > 0) {
      const taken = this.queue.take((waiter) => {
        const i = this.choose(waiter.request);
        return i === undefined ? undefined : pool.endpoints[i];
      });
      if (taken === undefined) return;
      this.leave(taken.item);
      this.hold(taken.lease, taken.item.request.scope);
      taken.item.resolve(taken.lease);
    }
  }

  private choose({ key, exclude }: SlotRequest): number | undefined {
    return chooseEndpoint(this.options.pool.endpoints, key, exclude, this.options.pinOf?.(key));
  }

  private free(request: SlotRequest): Endpoint | undefined {
    const { pool } = this.options;
    const i = this.choose(request);
    const endpoint = i === undefined ? undefined : pool.endpoints[i];
    if (endpoint !== undefined) this.hold(endpoint, request.scope);
    return endpoint;
  }

  private hold(endpoint: Endpoint, scope: string): void {
    this.options.pool.acquire(endpoint);
    this.held.set(scope, (this.held.get(scope) ?? 0) + 1);
  }

  private drop(waiter: Waiter, error: Error): void {
    if (!this.queue.remove(waiter)) return;
    this.refuse(waiter, error);
  }

  /** A waiter already out of the queue is refused: its request answers 503 before any 200. */
  private refuse(waiter: Waiter, error: Error): void {
    this.leave(waiter);
    waiter.reject(error);
  }

  private leave(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.request.signal?.removeEventListener("abort", waiter.onAbort);
  }

  private noEndpoint(request: SlotRequest): NoHealthyEndpointError {
    const { pool } = this.options;
    const down = pool.endpoints.filter((e) => !e.healthy);
    if (down.length === pool.endpoints.length) {
      const reasons = down.map((e) => `endpoint ${e.index}: ${e.lastError ?? "down"}`).join("; ");
      return new NoHealthyEndpointError(this.model, `no endpoint is healthy (${reasons})`);
    }
    const tried = request.exclude.size;
    return new NoHealthyEndpointError(
      this.model,
      `no healthy endpoint is left to try after ${tried} attempt${tried === 1 ? "" : "s"}`,
    );
  }
}
