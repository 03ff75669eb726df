// Counters in fixed 60-second windows on rate-limiter-flexible: in memory, or in Redis with a memory stand-in while
// Redis cannot be reached. The store only counts; the limiter compares counts with the org's current limits.
import type { Redis } from "ioredis";
import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis } from "rate-limiter-flexible";
import { faultCause } from "../observability/fault-cause.js";
import type { Logger } from "../observability/logger.js";

export const WINDOW_SECONDS = 60;

/** Where a count lives: a give-back must reach the store that took the charge. */
export type StoreName = "primary" | "fallback";

/** A window's count right after a change, or when read. */
export interface WindowCount {
  consumed: number;
  /** Milliseconds until the window ends and its count starts again from 0. */
  resetMs: number;
  store: StoreName;
}

export interface WindowStoreOptions {
  logger: Logger;
  /** Keys are `<keyPrefix>:<key>`. */
  keyPrefix: string;
  /** Absent: counts live in this process's memory. */
  redis?: Redis;
  /** Window length; tests shorten it. Default 60 (per minute). */
  windowSeconds?: number;
}

export class WindowStore {
  private readonly primary: RateLimiterAbstract;
  private readonly fallback: RateLimiterMemory | undefined;
  private readonly logger: Logger;
  private primaryDown = false;
  readonly windowMs: number;

  constructor({ logger, keyPrefix, redis, windowSeconds = WINDOW_SECONDS }: WindowStoreOptions) {
    this.logger = logger;
    this.windowMs = windowSeconds * 1000;
    // The library's own limit is never reached: every charge is counted and the caller decides. Comparing with
    // the limit the principal carries *now* is what lets a changed limit apply at once to the same count.
    const countOnly = { points: Number.MAX_SAFE_INTEGER, duration: windowSeconds, keyPrefix };
    if (redis === undefined) {
      this.primary = new RateLimiterMemory(countOnly);
      this.fallback = undefined;
    } else {
      // rejectIfRedisNotReady: while disconnected a call fails at once (no queue, no wait) and the stand-in answers.
      this.primary = new RateLimiterRedis({
        ...countOnly,
        storeClient: redis,
        rejectIfRedisNotReady: true,
      });
      this.fallback = new RateLimiterMemory(countOnly);
    }
  }

  /** Adds `points` (an integer ≥ 0) to the key's window, opening a window if none is open. */
  async add(key: string, points: number): Promise<WindowCount> {
    const { value, store } = await this.run((limiter) => limiter.penalty(key, points));
    return { consumed: value.consumedPoints, resetMs: value.msBeforeNext, store };
  }

  /**
   * Takes `points` back from the store that counted them. A store that cannot be reached keeps them until its
   * window ends: limits err on the strict side, never on the generous one.
   */
  async subtract(key: string, points: number, store: StoreName): Promise<void> {
    const limiter = store === "fallback" ? this.fallback : this.primary;
    if (limiter === undefined || points === 0) return;
    await limiter.reward(key, points).catch((err: unknown) => {
      this.logger.debug({ err, key }, "rate limiter: a give-back did not reach the store");
    });
  }

  /** The key's open window, or undefined when none is open (nothing counted in the last minute). */
  async read(key: string): Promise<WindowCount | undefined> {
    const { value, store } = await this.run((limiter) => limiter.get(key));
    if (value === null || value.msBeforeNext <= 0) return undefined;
    return { consumed: value.consumedPoints, resetMs: value.msBeforeNext, store };
  }

  /** The primary store's answer, or the stand-in's while the primary fails; warns once per outage. */
  private async run<T>(
    call: (limiter: RateLimiterAbstract) => Promise<T>,
  ): Promise<{ value: T; store: StoreName }> {
    if (this.fallback === undefined) return { value: await call(this.primary), store: "primary" };
    let value: T;
    try {
      value = await call(this.primary);
    } catch (err) {
      if (!this.primaryDown) {
        this.primaryDown = true;
        this.logger.warn(
          faultCause(err),
          "rate limiter: Redis is unreachable; each replica enforces the limits alone, in memory, until it is back",
        );
      }
      return { value: await call(this.fallback), store: "fallback" };
    }
    if (this.primaryDown) {
      this.primaryDown = false;
      this.logger.info("rate limiter: Redis is reachable again; limits are shared by the replicas again");
    }
    return { value, store: "primary" };
  }
}
