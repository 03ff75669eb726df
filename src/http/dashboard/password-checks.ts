// Bounds the password checks (scrypt, 32 MiB and tens of milliseconds of a core each) running at once in this
// process: a burst of sign-ins beyond the bound is refused at once (429, retry-after), never queued.

export const DEFAULT_SIGN_IN_CONCURRENCY = 2;
/** What a refused check tells the client to wait: checks take milliseconds, so one second is plenty. */
export const BUSY_RETRY_AFTER_SECONDS = 1;

export class PasswordChecks {
  #running = 0;

  constructor(readonly limit: number = DEFAULT_SIGN_IN_CONCURRENCY) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError("limit must be a positive integer");
  }

  /** Checks running now. */
  get running(): number {
    return this.#running;
  }

  /** A slot and its release (idempotent), or null when `limit` checks are running. */
  tryEnter(): (() => void) | null {
    if (this.#running >= this.limit) return null;
    this.#running++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#running--;
    };
  }
}
