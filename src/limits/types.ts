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
   * Consumes one request and pre-charges `tokens` (prompt + max_tokens) atomically; throws RateLimitError
   * (errors/api-error.ts, 429 with retry-after) when either window has no room, consuming nothing.
   */
  admit(subject: LimitSubject, tokens: number, options?: AdmitOptions): Promise<Admission>;
  /** Current state without consuming: headers on /v1 routes that do not generate, and the dashboard. */
  snapshot(subject: LimitSubject): Promise<RateSnapshot>;
  dispose(): Promise<void>;
}
