// Throttles failed dashboard sign-ins: per account and address, per account, and per address.
// Only failures count; once a budget is spent every attempt is refused, right password or not, until it refills.
import type { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterStoreAbstract } from "rate-limiter-flexible";

export interface ThrottleRule {
  /** What the budget is per. */
  per: "account-and-address" | "account" | "address";
  /** Failed attempts allowed in `windowSeconds`. */
  failures: number;
  windowSeconds: number;
}

/**
 * 5 wrong passwords for one account from one address, 20 for one account from anywhere (slow distributed
 * guessing), 50 from one address over any accounts (spraying), each per 15 minutes.
 */
export const DEFAULT_THROTTLE_RULES: readonly ThrottleRule[] = Object.freeze([
  { per: "account-and-address", failures: 5, windowSeconds: 900 },
  { per: "account", failures: 20, windowSeconds: 900 },
  { per: "address", failures: 50, windowSeconds: 900 },
]);

export interface SignInAttempt {
  /** Lowercased email as typed. */
  email: string;
  /** Client address (the socket's peer unless the deployment says otherwise). */
  address: string;
}

export interface SignInThrottle {
  /** Milliseconds until the attempt may be made; 0 when it may be made now. */
  waitMs(attempt: SignInAttempt): Promise<number>;
  recordFailure(attempt: SignInAttempt): Promise<void>;
  /** A successful sign-in forgives that account's failures from that address. */
  recordSuccess(attempt: SignInAttempt): Promise<void>;
}

/**
 * Counters of rate-limiter-flexible: in this process, or in Redis (shared by every replica) when a connection is
 * given. While Redis cannot answer, each replica counts in memory (the insurance limiter), so sign-in is never
 * left unthrottled nor blocked by an outage.
 */
export function createSignInThrottle(
  rules: readonly ThrottleRule[] = DEFAULT_THROTTLE_RULES,
  redis?: Redis,
): SignInThrottle {
  const limiters = rules.map((rule) => {
    const options = {
      keyPrefix: `hearth:sign-in:${rule.per}`,
      points: rule.failures,
      duration: rule.windowSeconds,
    };
    const memory = new RateLimiterMemory(options);
    const limiter: RateLimiterMemory | RateLimiterStoreAbstract =
      redis === undefined
        ? memory
        : new RateLimiterRedis({ ...options, storeClient: redis, insuranceLimiter: memory });
    return { rule, limiter };
  });
  const keyOf = (rule: ThrottleRule, a: SignInAttempt): string =>
    rule.per === "account" ? a.email : rule.per === "address" ? a.address : `${a.email}\n${a.address}`;

  return {
    async waitMs(attempt) {
      let wait = 0;
      for (const { rule, limiter } of limiters) {
        const state = await limiter.get(keyOf(rule, attempt));
        if (state !== null && state.consumedPoints >= rule.failures)
          wait = Math.max(wait, state.msBeforeNext);
      }
      return wait;
    },
    async recordFailure(attempt) {
      for (const { rule, limiter } of limiters) {
        // consume rejects once the budget is spent; the attempt was refused anyway, nothing more to do.
        await limiter.consume(keyOf(rule, attempt)).catch(() => {});
      }
    },
    async recordSuccess(attempt) {
      for (const { rule, limiter } of limiters) {
        if (rule.per === "account-and-address") await limiter.delete(keyOf(rule, attempt));
      }
    },
  };
}
