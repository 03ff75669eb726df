// A replica whose invalidation subscriber lost Redis has missed whatever was revoked elsewhere meanwhile: once the
// subscriber is back, the replica must not serve what it cached before. Real services: a Redis of the test's own
// (killed -9 while a key is revoked on the other replica, so that message is lost, then restarted) and the shared
// PostgreSQL, which each replica reaches through its own pool.
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/observability/logger.js";
import { openStore, type Store } from "../../src/store/open-store.js";
import { closeRedis, connectRedis } from "../../src/store/redis.js";
import { StoreStatus, StoreUnavailableError } from "../../src/store/store-status.js";
import { InvalidationBroadcast } from "../../src/tenancy/invalidation-broadcast.js";
import { createTenancy, type Tenancy, type TenancyOptions } from "../../src/tenancy/tenancy.js";
import { type PrivateRedis, startPrivateRedis } from "../support/private-stores.js";
import { type Backend, postgresBackend } from "../support/store-backends.js";

const logger = createLogger("silent");
const keySecret = randomBytes(32);
const MODELS = ["tiny"];

let redis: PrivateRedis;
let backend: Backend;
const stores: Store[] = [];
const connections: Redis[] = [];
const broadcasts: InvalidationBroadcast[] = [];
const services: Tenancy[] = [];

beforeAll(async () => {
  [redis, backend] = await Promise.all([startPrivateRedis(), postgresBackend()]);
});

afterAll(async () => {
  for (const b of broadcasts) await b.close();
  for (const r of connections) await closeRedis(r);
  for (const t of services) await t.dispose().catch(() => {});
  for (const s of stores) await s.close().catch(() => {});
  await backend?.cleanup();
  await redis?.destroy();
});

/** A replica: its own pool on the shared database, its tenancy, and its broadcast on `channel`. */
async function replica(
  channel: string,
  options: Omit<TenancyOptions, "keySecret" | "modelIds"> = {},
): Promise<{ store: Store; tenancy: Tenancy }> {
  const store = await openStore(backend.options);
  stores.push(store);
  const tenancy = createTenancy(store.db, { keySecret, modelIds: MODELS, ...options });
  services.push(tenancy);
  const connection = connectRedis(redis.url, logger);
  connections.push(connection);
  broadcasts.push(new InvalidationBroadcast(tenancy, { redis: connection, logger, channel }));
  return { store, tenancy };
}

/** Until every replica on `channel` is subscribed on the Redis running now (after a restart: resubscribed). */
async function subscribed(channel: string, replicas: number): Promise<void> {
  const probe = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await probe.connect();
    for (let i = 0; i < 500; i++) {
      const [, count] = (await probe.pubsub("NUMSUB", channel)) as [string, number];
      if (Number(count) >= replicas) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`${replicas} subscribers on ${channel} not reached within 10 s`);
  } finally {
    probe.disconnect();
  }
}

/** Kills Redis, runs `meanwhile` (its broadcasts are lost), restarts Redis and waits for the subscribers. */
async function whileRedisIsDown(channel: string, replicas: number, meanwhile: () => Promise<void>) {
  await redis.kill();
  await meanwhile();
  await redis.start();
  await subscribed(channel, replicas);
}

describe("the invalidation subscriber back after a lost Redis connection", () => {
  it("stops serving a cached key that was revoked elsewhere while it was away", async () => {
    const channel = `hearth:test:invalidate:${randomBytes(6).toString("hex")}`;
    const a = await replica(channel);
    // B's clock stands still: its cached entries never expire, so only an invalidation can drop them.
    const frozen = Date.parse("2031-05-01T00:00:00Z");
    const b = await replica(channel, { now: () => frozen });
    await subscribed(channel, 2);
    await a.tenancy.orgs.create("acme", MODELS);
    const created = await a.tenancy.keys.create("acme");
    expect(await b.tenancy.keys.verify(created.key)).not.toBeNull();

    await whileRedisIsDown(channel, 2, async () => {
      await a.tenancy.keys.revoke(created.id);
      // The message is lost: B still has the key cached, as the revocation never reached it.
      expect(await b.tenancy.keys.verify(created.key)).not.toBeNull();
    });

    expect(await b.tenancy.keys.verify(created.key)).toBeNull();
  });

  it("keeps no stale entry of such a key for a store outage that follows", async () => {
    const channel = `hearth:test:invalidate:${randomBytes(6).toString("hex")}`;
    const a = await replica(channel);
    let clock = Date.parse("2031-05-01T00:00:00Z");
    // B's store status asks B's own pool, which the test closes to cut B off from the store.
    let bStore: Store | undefined;
    const status = new StoreStatus(async () => bStore?.ping(), { cacheMs: 60_000, timeoutMs: 1000 });
    const b = await replica(channel, { now: () => clock, storeStatus: status, staleIfErrorMs: 300_000 });
    bStore = b.store;
    await subscribed(channel, 2);
    await a.tenancy.orgs.create("beta", MODELS);
    const revoked = await a.tenancy.keys.create("beta");
    const kept = await a.tenancy.keys.create("beta");
    expect(await b.tenancy.keys.verify(revoked.key)).not.toBeNull();

    await whileRedisIsDown(channel, 2, async () => {
      await a.tenancy.keys.revoke(revoked.id);
    });
    // Verified once the subscriber is back: this entry may serve through an outage.
    expect(await b.tenancy.keys.verify(kept.key)).not.toBeNull();

    // Past the TTL, B cannot reach the store: the key verified since is served from its stale entry, the revoked
    // one is not (its entry, from before the lost message, would otherwise be kept for the whole stale window).
    clock += 10_000;
    await b.store.close();
    await expect(b.tenancy.keys.verify(revoked.key)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(status.available).toBe(false);
    expect((await b.tenancy.keys.verify(kept.key))?.keyId).toBe(kept.id);
  });
});
