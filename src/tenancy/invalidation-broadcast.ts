// Cache invalidations between replicas over Redis pub/sub: a key revoked or an org's limits or grants changed on
// one replica are dropped from every other replica's caches within milliseconds instead of the cache TTL.
// Best effort by design: a message lost while Redis is down leaves the TTL (1 s) as the bound, as without Redis.
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { z } from "zod";
import { faultCause } from "../observability/fault-cause.js";
import type { Logger } from "../observability/logger.js";

/** Logged when the subscriber is back after a lost connection (and the caches were dropped). */
export const RESUMED_MESSAGE =
  "cache invalidations resumed after a lost Redis connection: cached keys and grants dropped";

import type { CacheInvalidation, CacheInvalidations } from "./invalidation.js";
import type { Tenancy } from "./tenancy.js";

export const INVALIDATION_CHANNEL = "hearth:tenancy:invalidate";

interface Message {
  /** The replica that made the change (it has applied it already). */
  origin: string;
  event: CacheInvalidation;
}

export interface InvalidationBroadcastOptions {
  /** The replica's shared connection: publishes go through it. A duplicate is made for the subscription. */
  redis: Redis;
  logger: Logger;
  /** Tests isolate themselves with their own channel. */
  channel?: string;
}

export class InvalidationBroadcast {
  private readonly origin = randomUUID();
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private readonly logger: Logger;
  private readonly channel: string;
  private readonly invalidation: Pick<CacheInvalidations, "invalidate" | "onInvalidation">;
  private connectedBefore = false;

  /** Publishes this replica's changes and applies the other replicas' to `tenancy`. */
  constructor(tenancy: Pick<Tenancy, "invalidation">, options: InvalidationBroadcastOptions) {
    this.invalidation = tenancy.invalidation;
    this.redis = options.redis;
    this.logger = options.logger;
    this.channel = options.channel ?? INVALIDATION_CHANNEL;
    this.subscriber = this.redis.duplicate();
    this.subscriber.on("error", (err: unknown) => this.logger.debug({ err }, "Redis subscriber error"));
    // Commands fail while disconnected (no offline queue), so (re)subscribe whenever the connection is ready.
    this.subscriber.on("ready", () => {
      // Back after a lost connection: revocations sent meanwhile never arrived. Entries kept for stale-if-error
      // could otherwise serve a key revoked elsewhere for minutes, so everything cached is read again.
      if (this.connectedBefore) {
        this.invalidation.invalidate({ kind: "all" });
        this.logger.info(RESUMED_MESSAGE);
      }
      this.connectedBefore = true;
      this.subscriber.subscribe(this.channel).catch((err: unknown) => {
        this.logger.warn(
          faultCause(err),
          "subscribing to cache invalidations failed; changes elsewhere apply within the TTL",
        );
      });
    });
    this.subscriber.on("message", (channel: string, text: string) => {
      if (channel === this.channel) this.receive(text);
    });
    this.invalidation.onInvalidation((event) => this.publish(event));
  }

  async close(): Promise<void> {
    if (this.subscriber.status === "ready")
      await this.subscriber.quit().catch(() => this.subscriber.disconnect());
    else this.subscriber.disconnect();
  }

  private publish(event: CacheInvalidation): void {
    const message: Message = { origin: this.origin, event };
    this.redis.publish(this.channel, JSON.stringify(message)).catch((err: unknown) => {
      this.logger.warn(
        { ...faultCause(err), event },
        "broadcasting a cache invalidation failed; other replicas apply it within the TTL",
      );
    });
  }

  private receive(text: string): void {
    const message = parseMessage(text);
    if (message === undefined) {
      this.logger.warn("ignored a malformed cache invalidation message");
      return;
    }
    if (message.origin !== this.origin) this.invalidation.invalidate(message.event);
  }
}

const messageSchema: z.ZodType<Message> = z.object({
  origin: z.string(),
  event: z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("key"), keyId: z.string() }),
    z.object({ kind: z.literal("org"), orgId: z.string() }),
    z.object({
      kind: z.literal("model"),
      modelId: z.string(),
      action: z.enum(["changed", "load", "unload"]),
    }),
  ]),
});

function parseMessage(text: string): Message | undefined {
  try {
    const parsed = messageSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
