// Builds the rate limiter the config asks for: in memory by default, Redis (shared by replicas) with HEARTH_REDIS_URL.
import { Redis } from "ioredis";
import type { Logger } from "../observability/logger.js";
import { OrgRateLimiter } from "./org-rate-limiter.js";
import type { RateLimiter } from "./types.js";
import { WindowStore } from "./window-store.js";

export const DEFAULT_KEY_PREFIX = "hearth:limits";

export interface RateLimiterOptions {
  redisUrl: string | undefined;
  logger: Logger;
  /** Redis keys are `<keyPrefix>:rpm:<orgId>` and `<keyPrefix>:tpm:<orgId>`; default `hearth:limits`. */
  keyPrefix?: string;
  /** Window length in seconds; default 60 (per minute). Tests shorten it. */
  windowSeconds?: number;
}

// A request must never wait long on Redis: commands fail at once while disconnected (no offline queue) and after
// COMMAND_TIMEOUT_MS when Redis hangs; the limiter then answers from memory. Reconnection goes on in the background.
const CONNECT_TIMEOUT_MS = 1000;
const COMMAND_TIMEOUT_MS = 500;
const MAX_RECONNECT_DELAY_MS = 2000;

export function createRateLimiter({
  redisUrl,
  logger,
  keyPrefix = DEFAULT_KEY_PREFIX,
  windowSeconds,
}: RateLimiterOptions): RateLimiter {
  const window = windowSeconds === undefined ? {} : { windowSeconds };
  if (redisUrl === undefined) {
    return new OrgRateLimiter({ windows: new WindowStore({ logger, keyPrefix, ...window }), logger });
  }
  const redis = new Redis(redisUrl, {
    enableOfflineQueue: false,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    retryStrategy: (attempt) => Math.min(attempt * 200, MAX_RECONNECT_DELAY_MS),
  });
  // Without a listener an 'error' event would crash the process; the limiter warns once per outage itself.
  redis.on("error", (err: unknown) => logger.debug({ err }, "rate limiter: Redis connection error"));
  logger.info({ redis: describe(redisUrl) }, "rate limits are shared through Redis");
  return new OrgRateLimiter({
    windows: new WindowStore({ logger, keyPrefix, redis, ...window }),
    logger,
    close: async () => {
      if (redis.status === "ready") await redis.quit().catch(() => redis.disconnect());
      else redis.disconnect();
    },
  });
}

/** host:port/db for the log; never the password. */
function describe(redisUrl: string): string {
  try {
    const url = new URL(redisUrl);
    return `${url.hostname}:${url.port || "6379"}${url.pathname === "/" ? "" : url.pathname}`;
  } catch {
    return "(unparsable URL)";
  }
}
