// Sign-in throttles in memory and in the real Redis (shared by replicas), and while Redis is unreachable.
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import type { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../observability/logger.js";
import { closeRedis, connectRedis } from "../store/redis.js";
import {
  createSignInThrottle,
  type SignInAttempt,
  type SignInThrottle,
  type ThrottleRule,
} from "./sign-in-throttle.js";

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

async function failTimes(throttle: SignInThrottle, a: SignInAttempt, times: number): Promise<void> {
  for (let i = 0; i < times; i++) await throttle.recordFailure(a);
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
    await failTimes(other, a, 1);
    expect(await one.waitMs(a)).toBeGreaterThan(0);
    expect(await other.waitMs(a)).toBeGreaterThan(0);
    await other.recordSuccess(a);
    expect(await one.waitMs(a)).toBe(0);
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
});
