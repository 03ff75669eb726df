// The limiter's refusal: which window ran out and what the 429 needs; src/http/ words it and writes its headers.
import { Refusal } from "../refusal.js";
import type { LimitKind, RateSnapshot } from "./types.js";

export interface RateLimitRefusalFacts {
  /** The window that refused: requests (RPM) or tokens (TPM). */
  kind: LimitKind;
  /**
   * `exhausted`: the window is spent for now, waiting helps. `too_large`: the request alone needs more than the
   * whole window, so waiting cannot help.
   */
  reason: "exhausted" | "too_large";
  orgName: string;
  limit: number;
  /** What the window had used before this request (reported only for `exhausted`, never more than the limit). */
  used: number;
  /** What this request asked the window for (1 request, or its tokens). */
  requested: number;
  /** When the window has room again, 1..60000 ms (for `too_large`: the window's whole length). */
  retryAfterMs: number;
  /** Both windows at the moment of refusal (the x-ratelimit-* headers). */
  snapshot: RateSnapshot;
}

/** A requests or tokens per minute limit refused a request; nothing was consumed by the refusal. */
export class RateLimitRefusal extends Refusal {
  override name = "RateLimitRefusal";
  /** The organization's own limits: the client's to respect. */
  readonly fault = "client";
  readonly kind: LimitKind;
  readonly reason: RateLimitRefusalFacts["reason"];
  readonly orgName: string;
  readonly limit: number;
  readonly used: number;
  readonly requested: number;
  readonly retryAfterMs: number;
  readonly snapshot: RateSnapshot;

  constructor(facts: RateLimitRefusalFacts) {
    super(describe(facts));
    this.kind = facts.kind;
    this.reason = facts.reason;
    this.orgName = facts.orgName;
    this.limit = facts.limit;
    this.used = facts.used;
    this.requested = facts.requested;
    this.retryAfterMs = facts.retryAfterMs;
    this.snapshot = facts.snapshot;
  }

  /** False when waiting cannot help: the request is larger than the whole window. */
  get retryable(): boolean {
    return this.reason === "exhausted";
  }
}

/** OpenAI's words for the refusal, up to the retry hint (its duration format is the edge's). */
function describe({ kind, reason, orgName, limit, used, requested }: RateLimitRefusalFacts): string {
  if (reason === "too_large") {
    return (
      `Request too large for tokens per min (TPM) in organization ${orgName}: Limit ${limit}, ` +
      `Requested ${requested}. The input or output tokens must be reduced in order to run successfully.`
    );
  }
  const name = kind === "requests" ? "requests per min (RPM)" : "tokens per min (TPM)";
  return `Rate limit reached for ${name} in organization ${orgName}: Limit ${limit}, Used ${used}, Requested ${requested}.`;
}
