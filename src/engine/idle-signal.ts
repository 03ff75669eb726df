// Waits for an engine to have no work left (what `drain()` awaits), woken by the work's own end instead of a timer.

/**
 * A promise per waiter, resolved at the first `check()` that finds `isIdle()` true. The owner calls `check()`
 * wherever work ends (a job leaves the queue or the loop, a stream ends): idleness can begin nowhere else.
 */
export class IdleSignal {
  private waiters: (() => void)[] = [];

  constructor(private readonly isIdle: () => boolean) {}

  /** Resolves at once when idle now, else when a later `check()` finds it idle. */
  wait(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Some work has ended: wakes the waiters if none is left. */
  check(): void {
    if (this.waiters.length === 0 || !this.isIdle()) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}
