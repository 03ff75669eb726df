// The periodic removal of expired stored responses: reads already treat them as absent, the sweep gives the space
// back. One run at a time, on an unref'd timer, stopped (and waited for) before the store closes.

export interface ResponsesSweepOptions {
  /** Removes what expired before `now`; returns how many (ResponsesStore.removeExpired). */
  removeExpired: (now: Date) => Promise<number>;
  /** Between two runs. */
  intervalMs: number;
  /** Before the first run (default: the interval). */
  firstDelayMs?: number;
  onRemoved?: (count: number) => void;
  /** A failed run (the store is down): the next run tries again. */
  onError: (err: unknown) => void;
  now?: () => Date;
}

/** How often to sweep for a retention: hourly, or more often when responses live less than two hours. */
export function sweepIntervalMs(retentionMs: number): number {
  return Math.max(1000, Math.min(3_600_000, Math.floor(retentionMs / 2)));
}

export class ResponsesSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: ResponsesSweepOptions) {
    this.schedule(options.firstDelayMs ?? options.intervalMs);
  }

  /** One sweep now (or the one under way). */
  run(): Promise<void> {
    this.running ??= this.sweep().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** No further runs; resolves once a run under way has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async sweep(): Promise<void> {
    try {
      const removed = await this.options.removeExpired(this.options.now?.() ?? new Date());
      if (removed > 0) this.options.onRemoved?.(removed);
    } catch (err) {
      this.options.onError(err);
    }
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run().finally(() => this.schedule(this.options.intervalMs));
    }, delayMs);
    // The sweep alone must not keep a finished process alive.
    this.timer.unref();
  }
}
