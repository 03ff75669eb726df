// Sign-in throttles in memory and in the real Redis (shared by replicas), and while Redis is unreachable.
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import type { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import {
  createSignInThrottle,
  type SignInAttempt,
  type SignInThrottle,
  type ThrottleRule,
} from "../../src/http/dashboard/sign-in-throttle.js";
import { createLogger } from "../../src/observability/logger.js";
import { closeRedis, connectRedis } from "../../src/store/redis.js";

const REDIS_URL = process.env.HEARTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const RULES: ThrottleRule[] = [{ per: "account-and-address", failures: 5, windowSeconds: 60 }];
const logger = createLogger("silent");
const connections: Redis[] = [];

afterAll(async () => {
  for (const redis of connections) await closeRedis(redis);
});

async function connected(url = REDIS_URL): Promise<Redis> {
  const redis = connectRedis(url, logger);
  connections.push(redis);
  if (url === REDIS_URL && redis.status !== "ready") {
    await new Promise((resolve) => redis.once("ready", resolve));
  }
  return redis;
}

/** A fresh account per test, so runs never share counters in the real Redis. */
const attempt = (): SignInAttempt => ({
  email: `${randomBytes(6).toString("hex")}@example.com`,
  address: "203.0.113.7",
});

/** A wrong credential: its attempt is taken and stays counted. */
async function failTimes(throttle: SignInThrottle, a: SignInAttempt, times: number): Promise<void> {
  for (let i = 0; i < times; i++) expect(await throttle.take(a)).toBe(0);
}

describe("sign-in throttle", () => {
  it("in memory: each process counts alone", async () => {
    const a = attempt();
    const one = createSignInThrottle(RULES);
    const other = createSignInThrottle(RULES);
    await failTimes(one, a, 5);
    expect(await one.waitMs(a)).toBeGreaterThan(0);
    expect(await other.waitMs(a)).toBe(0);
  });

  it("in Redis: two replicas share one budget, and a success forgives it on both", async () => {
    const a = attempt();
    const one = createSignInThrottle(RULES, await connected());
    const other = createSignInThrottle(RULES, await connected());
    await failTimes(one, a, 3);
    await failTimes(other, a, 1);
    expect(await one.waitMs(a)).toBe(0);
    expect(await other.take(a)).toBe(0);
    await other.succeeded(a);
    await failTimes(one, a, 4);
    expect(await one.waitMs(a)).toBe(0);
    await failTimes(other, a, 1);
    expect(await one.waitMs(a)).toBeGreaterThan(0);
    expect(await other.waitMs(a)).toBeGreaterThan(0);
    expect(await one.take(a)).toBeGreaterThan(0);
  });

  it("with Redis unreachable: still throttles, in memory, without waiting on Redis", async () => {
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, "127.0.0.1", () => {
        const address = server.address();
        server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
      });
    });
    const throttle = createSignInThrottle(RULES, await connected(`redis://127.0.0.1:${port}`));
    const a = attempt();
    await failTimes(throttle, a, 4);
    expect(await throttle.waitMs(a)).toBe(0);
    await failTimes(throttle, a, 1);
    expect(await throttle.waitMs(a)).toBeGreaterThan(0);
  });

  it.each([
    ["in memory", () => undefined],
    ["in Redis", connected],
  ])("%s: of a burst of attempts at once, only the budget's worth are taken", async (_where, redis) => {
    const throttle = createSignInThrottle(RULES, await redis());
    const a = attempt();
    const waits = await Promise.all(Array.from({ length: 20 }, () => throttle.take(a)));
    expect(waits.filter((w) => w === 0)).toHaveLength(5);
    expect(waits.filter((w) => w > 0)).toHaveLength(15);
    // The refused ones gave their attempts back: the budget holds exactly the five taken.
    expect(await throttle.waitMs(a)).toBeGreaterThan(0);
  });

  it("gives back an attempt that was never checked and one that was right, so neither counts as a failure", async () => {
    const rules: ThrottleRule[] = [
      { per: "account-and-address", failures: 2, windowSeconds: 60 },
      { per: "account", failures: 3, windowSeconds: 60 },
    ];
    const throttle = createSignInThrottle(rules);
    const a = attempt();
    for (let i = 0; i < 10; i++) {
      expect(await throttle.take(a)).toBe(0);
      await throttle.giveBack(a);
    }
    expect(await throttle.take(a)).toBe(0);
    await throttle.succeeded(a);
    // A success forgives this address its failures, and gives the account budget its attempt back.
    const elsewhere = { ...a, address: "198.51.100.1" };
    await failTimes(throttle, elsewhere, 2);
    expect(await throttle.take(elsewhere)).toBeGreaterThan(0);
    // Refusals cost nothing: the account still has one attempt for another address.
    expect(await throttle.take({ ...a, address: "198.51.100.2" })).toBe(0);
    expect(await throttle.take({ ...a, address: "198.51.100.3" })).toBeGreaterThan(0);
  });

  it("keeps throttles of different doors apart in Redis", async () => {
    const a = attempt();
    const rules: ThrottleRule[] = [{ per: "account", failures: 1, windowSeconds: 60 }];
    const members = createSignInThrottle(rules, await connected(), "members");
    const admin = createSignInThrottle(rules, await connected(), "admin-token");
    await failTimes(members, a, 1);
    expect(await members.take(a)).toBeGreaterThan(0);
    expect(await admin.take(a)).toBe(0);
  });
});
