// A single-consumer async queue: the engine pushes events, the HTTP layer iterates them; observers see every
// value as it is pushed, whether or not the consumer reads (accounting must count what a departed client missed).

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
    for (const observer of this.observers) observer.end(error);
    const fail = this.failWaiter;
    this.waiter = undefined;
    this.failWaiter = undefined;
    fail?.(error);
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const value = this.buffer.shift();
        if (value !== undefined) return Promise.resolve({ value, done: false });
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
