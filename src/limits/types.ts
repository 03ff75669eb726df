// The rate limiter port: requests and tokens per minute per organization, checked and consumed atomically.
import type { Principal } from "../auth/principal.js";

/** Whose budget a request spends: the organization, with the limits its key's principal carries (name: 429 text). */
export type LimitSubject = Pick<Principal, "orgId" | "orgName" | "rpm" | "tpm">;

export interface AdmitOptions {
  /**
   * Set when `tokens` is only an upper bound (max_tokens absent, so the pre-charge is the rest of the context): the
   * least the request can use (its prompt tokens). A pre-charge above the TPM limit is then lowered to the limit
   * instead of refused as too large; it is refused only when `minTokens` itself exceeds the limit.
   */
  minTokens?: number;
}

/** One window's state as the x-ratelimit-* headers report it. */
export interface WindowState {
  limit: number;
  remaining: number;
  /** Milliseconds until the window is fully replenished. */
  resetMs: number;
}

/** Absent window = that limit is unlimited (no headers for it). */
export interface RateSnapshot {
  requests?: WindowState;
  tokens?: WindowState;
}

/** Which limit: requests per minute (RPM) or tokens per minute (TPM). */
export type LimitKind = keyof RateSnapshot;

/**
 * One request counted in its organization's requests window (RPM), before any work is done on it: a request
 * refused later for its own fault (a 400, a TPM 429, the client leaving) keeps counting, as OpenAI's do.
 */
export interface RequestCharge {
  readonly subject: LimitSubject;
  /** The requests window after this request was counted (absent when RPM is unlimited). */
  readonly snapshot: RateSnapshot;
  /** Gives the request back: it was refused for a reason that was never the client's (overloaded, a server error). */
  refund(): Promise<void>;
}

/**
 * A request that passed the limiter: its pre-charged tokens are settled or refunded exactly once (later calls do
 * nothing). Neither call rejects: the limiter logs a store it cannot reach.
 */
export interface Admission {
  /** State after this request was charged: the response's x-ratelimit-* headers. */
  readonly snapshot: RateSnapshot;
  /** The request ended: replaces the pre-charge with the tokens it really used (prompt + completion). */
  settle(actualTokens: number): Promise<void>;
  /** The request was refused after the limiter (engine overloaded): gives back its request and its tokens. */
  refund(): Promise<void>;
}

export interface RateLimiter {
  /**
   * Counts one request in the requests window (RPM), before any work on it; throws RateLimitRefusal (a 429 with
   * retry-after at the edge) when the window is full, counting nothing.
   */
  chargeRequest(subject: LimitSubject): Promise<RequestCharge>;
  /**
   * Pre-charges `tokens` (prompt + max_tokens) to the tokens window (TPM) of a request already counted; throws
   * RateLimitRefusal when there is no room, taking no tokens (the request stays counted).
   */
  admitTokens(request: RequestCharge, tokens: number, options?: AdmitOptions): Promise<Admission>;
  /**
   * Both at once: `chargeRequest` then `admitTokens`, and a refusal of either gives everything back (consumes
   * nothing). For callers that do no work between the two (the bench, tests).
   */
  admit(subject: LimitSubject, tokens: number, options?: AdmitOptions): Promise<Admission>;
  /** Current state without consuming: headers on /v1 routes that do not generate, and the dashboard. */
  snapshot(subject: LimitSubject): Promise<RateSnapshot>;
  dispose(): Promise<void>;
}
