// A single-consumer async queue: the engine pushes events, the HTTP layer iterates them.

export class Channel<T> implements AsyncIterable<T> {
  private readonly buffer: T[] = [];
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private failWaiter: ((error: unknown) => void) | undefined;
  private closed = false;
  private error: unknown;
  private hasError = false;

  push(value: T): void {
    if (this.closed) return;
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
