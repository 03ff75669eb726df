// Throttles failed sign-ins (dashboard passwords, admin tokens): per account and address, per account, and per
// address. Only failures count; once a budget is spent every attempt is refused, right password or not, until it
// refills. An attempt is taken from the budgets before its credential is checked and given back when it was right.
import type { Redis } from "ioredis";
import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterStoreAbstract,
} from "rate-limiter-flexible";

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
  /**
   * Takes one attempt from every budget before the credential is checked, so concurrent guesses cannot all pass
   * a check made before any of them failed. 0: taken, go on and check; otherwise the milliseconds until an attempt
   * may be made, and nothing was taken. A wrong credential needs nothing more: its attempt stays counted.
   */
  take(attempt: SignInAttempt): Promise<number>;
  /** Gives back an attempt taken but never checked (the server was too busy to check it). */
  giveBack(attempt: SignInAttempt): Promise<void>;
  /** The credential was right: gives its attempt back and forgives that account's failures from that address. */
  succeeded(attempt: SignInAttempt): Promise<void>;
  /** Milliseconds until an attempt may be made; 0 when it may be made now. Reads only. */
  waitMs(attempt: SignInAttempt): Promise<number>;
}

/**
 * Counters of rate-limiter-flexible: in this process, or in Redis (shared by every replica) when a connection is
 * given. While Redis cannot answer, each replica counts in memory (the insurance limiter), so sign-in is never
 * left unthrottled nor blocked by an outage. `name` keeps throttles of different doors apart in Redis.
 */
export function createSignInThrottle(
  rules: readonly ThrottleRule[] = DEFAULT_THROTTLE_RULES,
  redis?: Redis,
  name = "members",
): SignInThrottle {
  const limiters = rules.map((rule) => {
    const options = {
      keyPrefix: `hearth:sign-in:${name}:${rule.per}`,
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
  const giveBack = async (attempt: SignInAttempt): Promise<void> => {
    for (const { rule, limiter } of limiters) await limiter.reward(keyOf(rule, attempt), 1);
  };

  return {
    async take(attempt) {
      // Every consume counts, refused or not (the counters are atomic, so of N at once only the budget's worth
      // are admitted); a refused attempt then gives its point back to every budget, so refusals spend nothing.
      let wait = 0;
      for (const { rule, limiter } of limiters) {
        try {
          await limiter.consume(keyOf(rule, attempt));
        } catch (refusal) {
          if (!(refusal instanceof RateLimiterRes)) throw refusal;
          wait = Math.max(wait, refusal.msBeforeNext, 1);
        }
      }
      if (wait > 0) await giveBack(attempt);
      return wait;
    },
    giveBack,
    async succeeded(attempt) {
      await giveBack(attempt);
      for (const { rule, limiter } of limiters) {
        if (rule.per === "account-and-address") await limiter.delete(keyOf(rule, attempt));
      }
    },
    async waitMs(attempt) {
      let wait = 0;
      for (const { rule, limiter } of limiters) {
        const state = await limiter.get(keyOf(rule, attempt));
        if (state !== null && state.consumedPoints >= rule.failures)
          wait = Math.max(wait, state.msBeforeNext);
      }
      return wait;
    },
  };
}
