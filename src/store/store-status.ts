// Whether the store answers: one bounded, cached ping that /health and the request path share, so a PostgreSQL
// outage is seen by the load balancer and answered at once (a 503, or a cached key) instead of by a hang per request.
import { Refusal } from "../refusal.js";

/** The store could not be reached or did not answer in time; retrying later may succeed. */
export class StoreUnavailableError extends Refusal {
  override name = "StoreUnavailableError";
  readonly fault = "server";
  constructor(message = "the store is unavailable", options?: { cause?: unknown }) {
    super(message, options);
  }
}

export interface StoreStatusOptions {
  /** How long a ping's answer is reused: health checks from many balancers cost one query per period. */
  cacheMs: number;
  /** A ping that has not answered by then counts as down (the query itself is bounded by the pool's timeouts). */
  timeoutMs: number;
  /** Called when the store goes down or comes back (for a log line). */
  onChange?: (up: boolean, err?: unknown) => void;
  now?: () => number;
}

export class StoreStatus {
  private up = true;
  private checkedAt = Number.NEGATIVE_INFINITY;
  /** At most one ping is in flight, however many callers ask. */
  private pinging: Promise<boolean> | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly now: () => number;

  constructor(
    private readonly ping: () => Promise<void>,
    private readonly options: StoreStatusOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** The last known state, without waiting: false from a failure until a ping succeeds again. */
  get available(): boolean {
    return this.up;
  }

  /** Whether the store answers now: a cached answer if recent, else one bounded ping. Never rejects. */
  check(): Promise<boolean> {
    if (this.now() - this.checkedAt < this.options.cacheMs) return Promise.resolve(this.up);
    this.pinging ??= this.pingOnce().finally(() => {
      this.pinging = undefined;
    });
    return this.pinging;
  }

  /**
   * A store call failed in a way that says the store is down (a timeout, a refused or lost connection). Callers
   * stop waiting on it at once, and a background ping every `cacheMs` finds out when it is back.
   */
  failed(err: unknown): void {
    this.checkedAt = this.now();
    this.setUp(false, err);
  }

  /**
   * `work` (a store call), or a StoreUnavailableError once it has taken `timeoutMs`: a hung store costs a request
   * this long at most, not the pool's connect or statement timeout. The call itself goes on (its result is lost).
   */
  bounded<T>(work: Promise<T>): Promise<T> {
    return withTimeout(work, this.options.timeoutMs);
  }

  /** Stops the background probe (at shutdown). */
  stop(): void {
    this.stopped = true;
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
  }

  private async pingOnce(): Promise<boolean> {
    try {
      await this.bounded(this.ping());
      this.checkedAt = this.now();
      this.setUp(true);
    } catch (err) {
      this.checkedAt = this.now();
      this.setUp(false, err);
    }
    return this.up;
  }

  private setUp(up: boolean, err?: unknown): void {
    const changed = up !== this.up;
    this.up = up;
    if (!up) this.scheduleProbe();
    if (changed) this.options.onChange?.(up, err);
  }

  /** While down, ping in the background so the first request after recovery does not pay for finding out. */
  private scheduleProbe(): void {
    if (this.probeTimer !== undefined || this.stopped) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.check().then((up) => {
        if (!up) this.scheduleProbe();
      });
    }, this.options.cacheMs);
    this.probeTimer.unref();
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  // The loser of the race must not become an unhandled rejection.
  work.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new StoreUnavailableError(`the store did not answer within ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}
