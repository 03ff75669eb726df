// Two replicas' tenancy services on one store and the real Redis: a change made on one reaches the other's caches
// through the broadcast. The second replica's clock is frozen, so its cache entries never expire by TTL: only the
// broadcast can make it see a change (the control case shows it does not otherwise).
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/observability/logger.js";
import { openStore, type Store } from "../../src/store/open-store.js";
import { closeRedis, connectRedis } from "../../src/store/redis.js";
import { InvalidationBroadcast } from "../../src/tenancy/invalidation-broadcast.js";
import { createTenancy, type Tenancy } from "../../src/tenancy/tenancy.js";
import { type Backend, pgliteBackend } from "../support/store-backends.js";

const REDIS_URL = process.env.HEARTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const logger = createLogger("silent");
const keySecret = randomBytes(32);
const FROZEN = Date.parse("2031-05-01T00:00:00Z");

let backend: Backend;
let store: Store;
const connections: Redis[] = [];
const broadcasts: InvalidationBroadcast[] = [];
const services: Tenancy[] = [];

beforeAll(async () => {
  backend = await pgliteBackend();
  store = await openStore(backend.options);
});

afterAll(async () => {
  for (const b of broadcasts) await b.close();
  for (const r of connections) await closeRedis(r);
  for (const t of services) await t.dispose();
  await store?.close();
  await backend?.cleanup();
});

async function replica(channel: string | undefined): Promise<Tenancy> {
  const tenancy = createTenancy(store.db, { keySecret, modelIds: ["tiny", "small"], now: () => FROZEN });
  services.push(tenancy);
  if (channel === undefined) return tenancy;
  const redis = connectRedis(REDIS_URL, logger);
  connections.push(redis);
  broadcasts.push(new InvalidationBroadcast(tenancy, { redis, logger, channel }));
  // Subscribed once its duplicate connection is ready: wait until the channel has every replica made so far.
  const replicas = broadcasts.length;
  await until(async () => {
    const [, count] = (await redis.pubsub("NUMSUB", channel).catch(() => [channel, 0])) as [string, number];
    return Number(count) >= replicas;
  });
  return tenancy;
}

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 250; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("the condition did not hold within 5 s");
}

describe("cache invalidation broadcast", () => {
  it("drops a revoked key, changed limits and changed grants from the other replica's caches", async () => {
    const channel = `hearth:test:invalidate:${randomBytes(6).toString("hex")}`;
    const a = await replica(channel);
    const b = await replica(channel);
    await a.orgs.create("acme", ["tiny"]);
    const created = await a.keys.create("acme");
    const orgId = created.orgId;

    expect(await b.keys.verify(created.key)).toMatchObject({ orgId, rpm: null });
    expect([...(await b.orgs.allowedModels(orgId))]).toEqual(["tiny"]);

    await a.orgs.setLimits("acme", { rpm: 5 });
    await until(async () => (await b.keys.verify(created.key))?.rpm === 5);

    await a.orgs.grantModel("acme", "small");
    await until(async () => (await b.orgs.allowedModels(orgId)).has("small"));
    await a.orgs.revokeModel("acme", "tiny");
    await until(async () => !(await b.orgs.allowedModels(orgId)).has("tiny"));

    await a.keys.revoke(created.id);
    await until(async () => (await b.keys.verify(created.key)) === null);
  });

  it("control: without the broadcast the other replica keeps its cached key (the clock is frozen)", async () => {
    const a = await replica(undefined);
    const b = await replica(undefined);
    await a.orgs.create("solo", ["tiny"]);
    const created = await a.keys.create("solo");
    expect(await b.keys.verify(created.key)).not.toBeNull();
    await a.keys.revoke(created.id);
    expect(await a.keys.verify(created.key)).toBeNull();
    expect(await b.keys.verify(created.key)).not.toBeNull();
  });
});
