// Requests on their way to a model's queue: received and not yet enqueued (read, validated, rendered, tokenized,
// charged). The step loop waits a moment for them when a burst arrives (StepLoop's gather), so that requests sent
// together start in one step instead of one step apart.

/**
 * How long a request counts as arriving after its preparation started. A prepared request that is never enqueued
 * (refused by a limit, its client gone) stops counting after this; preparing takes about a millisecond here.
 */
export const ARRIVAL_TTL_MS = 20;

/**
 * How long a request whose model is not yet known counts as arriving for every model (`LlamaEngine.expectRequest`:
 * from where the HTTP edge receives it, src/http/arrivals.ts, to its enqueue or refusal). A burst of sixteen took
 * 30–40 ms from the first request received to the last enqueued on two loaded cores; a request slower than this (a
 * body still uploading) no longer holds anyone's step.
 */
export const INCOMING_TTL_MS = 250;

export class Arrivals {
  /** Each arriving request (its GenerationRequest) and when it stops counting; insertion order is expiry order. */
  private readonly expected = new Map<object, number>();

  constructor(
    private readonly ttlMs = ARRIVAL_TTL_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A request's preparation started. */
  expect(request: object): void {
    this.purge();
    this.expected.delete(request);
    this.expected.set(request, this.now() + this.ttlMs);
  }

  /** The request was enqueued, or will never be (its preparation failed). */
  arrived(request: object): void {
    this.expected.delete(request);
  }

  /** Requests still arriving. */
  get pending(): number {
    this.purge();
    return this.expected.size;
  }

  private purge(): void {
    const now = this.now();
    for (const [request, until] of this.expected) {
      if (until > now) return;
      this.expected.delete(request);
    }
  }
}
