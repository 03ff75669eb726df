// The one way Hearth connects to Redis (rate limits, sign-in throttles, cache invalidations): a request must
// never wait on Redis, so commands fail at once while disconnected and reconnection goes on in the background.
import { Redis } from "ioredis";
import type { Logger } from "../observability/logger.js";

// Commands fail at once while disconnected (no offline queue) and after COMMAND_TIMEOUT_MS when Redis hangs;
// callers then fall back to memory.
const CONNECT_TIMEOUT_MS = 1000;
const COMMAND_TIMEOUT_MS = 500;
const MAX_RECONNECT_DELAY_MS = 2000;

export function connectRedis(redisUrl: string, logger: Logger): Redis {
  const redis = new Redis(redisUrl, {
    enableOfflineQueue: false,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    retryStrategy: (attempt) => Math.min(attempt * 200, MAX_RECONNECT_DELAY_MS),
  });
  // Without a listener an 'error' event would crash the process; users of the connection warn once per outage.
  redis.on("error", (err: unknown) => logger.debug({ err }, "Redis connection error"));
  logger.info({ redis: describeRedisUrl(redisUrl) }, "rate limits are shared through Redis");
  return redis;
}

export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === "ready") await redis.quit().catch(() => redis.disconnect());
  else redis.disconnect();
}

/** host:port/db for the log; never the password. */
function describeRedisUrl(redisUrl: string): string {
  try {
    const url = new URL(redisUrl);
    return `${url.hostname}:${url.port || "6379"}${url.pathname === "/" ? "" : url.pathname}`;
  } catch {
    return "(unparsable URL)";
  }
}
