// Builds the rate limiter the config asks for: in memory by default, Redis (shared by replicas) with HEARTH_REDIS_URL.
// PLACEHOLDER until the limits work lands: admits everything and reports no windows.
import type { Logger } from "../observability/logger.js";
import type { RateLimiter } from "./types.js";

export interface RateLimiterOptions {
  redisUrl: string | undefined;
  logger: Logger;
}

export function createRateLimiter(_options: RateLimiterOptions): RateLimiter {
  const admission = { snapshot: {}, settle: async () => {}, refund: async () => {} };
  return {
    admit: async () => admission,
    snapshot: async () => ({}),
    dispose: async () => {},
  };
}
