// A single-consumer async queue: the engine pushes events, the HTTP layer iterates them; observers see every
// value as it is pushed, whether or not the consumer reads (accounting must count what a departed client missed).
// The consumer's pace is visible to the producer (`backlog`, `drained`): an engine pauses a generation whose
// reader has fallen behind (a client that stopped reading), instead of buffering its whole output.

/** Values a reader may fall behind before engines pause its generation (a few dozen tokens). */
export const MAX_BACKLOG = 64;

/** Sees a channel's values as they are pushed, then its end once (`error` set when it failed). */
export interface ChannelObserver<T> {
  value(value: T): void;
  end(error?: unknown): void;
}

export class Channel<T> implements AsyncIterable<T> {
  private readonly buffer: T[] = [];
  private readonly observers: ChannelObserver<T>[] = [];
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private failWaiter: ((error: unknown) => void) | undefined;
  private closed = false;
  private error: unknown;
  private hasError = false;
  private drainWaiters: { max: number; resolve: () => void }[] = [];

  /** Values pushed and not read yet. */
  get backlog(): number {
    return this.buffer.length;
  }

  /** Resolves once at most `max` values are unread, the channel has ended, or `signal` aborts. */
  drained(max: number, signal?: AbortSignal): Promise<void> {
    if (this.closed || this.buffer.length <= max || signal?.aborted === true) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = {
        max,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.drainWaiters = this.drainWaiters.filter((w) => w !== waiter);
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.drainWaiters.push(waiter);
    });
  }

  /** Observes every later value and the end; on a channel that already ended, `end` is called at once. */
  observe(observer: ChannelObserver<T>): void {
    if (this.closed) {
      observer.end(...(this.hasError ? [this.error] : []));
      return;
    }
    this.observers.push(observer);
  }

  push(value: T): void {
    if (this.closed) return;
    for (const observer of this.observers) observer.value(value);
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      this.failWaiter = undefined;
      waiter({ value, done: false });
    } else {
      this.buffer.push(value);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.wakeProducers();
    for (const observer of this.observers) observer.end();
    const waiter = this.waiter;
    this.waiter = undefined;
    this.failWaiter = undefined;
    waiter?.({ value: undefined, done: true });
  }

  /** Ends the stream with an error thrown to the consumer after the buffered values. */
  fail(error: unknown): void {
    if (this.closed) return;
    this.error = error;
    this.hasError = true;
    this.closed = true;
    this.wakeProducers();
    for (const observer of this.observers) observer.end(error);
    const fail = this.failWaiter;
    this.waiter = undefined;
    this.failWaiter = undefined;
    fail?.(error);
  }

  /** Resolves the `drained` waits the backlog (or the end) now satisfies. */
  private wakeProducers(): void {
    if (this.drainWaiters.length === 0) return;
    const ready = this.drainWaiters.filter((w) => this.closed || this.buffer.length <= w.max);
    this.drainWaiters = this.drainWaiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const value = this.buffer.shift();
        if (value !== undefined) {
          this.wakeProducers();
          return Promise.resolve({ value, done: false });
        }
        if (this.hasError) return Promise.reject(this.error);
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.waiter = resolve;
          this.failWaiter = reject;
        });
      },
    };
  }
}
