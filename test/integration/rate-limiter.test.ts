// The rate limiter on both backends, against the real Redis: exact counts under concurrency, pre-charge and
// settlement, the refusal it throws (and the 429 the edge makes of it), limit changes, and what happens when Redis
// is not there.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import type { RateLimitError } from "../../src/http/errors/api-error.js";
import { mapDomainError } from "../../src/http/errors/domain-errors.js";
import { createRateLimiter, type RateLimiterOptions } from "../../src/limits/create-limiter.js";
import { RateLimitRefusal } from "../../src/limits/rate-limit-refusal.js";
import type { LimitSubject, RateLimiter } from "../../src/limits/types.js";
import { createLogger } from "../../src/observability/logger.js";
import { restartablePort } from "../support/ports.js";

/** The test's own Redis clients fail within seconds instead of waiting forever on a server that does not answer. */
const BOUNDED = { connectTimeout: 2000, commandTimeout: 2000, maxRetriesPerRequest: 1 };

const REDIS_URL = process.env.HEARTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
/** Every key this run writes starts with it; removed afterwards. */
const PREFIX = `hearth-test:${process.pid}-${randomBytes(4).toString("hex")}`;

afterAll(async () => {
  const redis = new Redis(REDIS_URL);
  try {
    const keys = await redis.keys(`${PREFIX}*`);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
});

interface LogLine {
  level: number;
  msg: string;
}

function collectingLogger() {
  const lines: LogLine[] = [];
  const logger = createLogger("debug", {
    write: (line: string) => {
      lines.push(JSON.parse(line) as LogLine);
    },
  });
  return { logger, lines };
}

function subject(limits: { rpm?: number | null; tpm?: number | null } = {}): LimitSubject {
  return {
    orgId: `org_${randomBytes(6).toString("hex")}`,
    orgName: "acme",
    rpm: limits.rpm ?? null,
    tpm: limits.tpm ?? null,
  };
}

/** The limiter's refusal as the client gets it: the 429 the HTTP edge makes of it (status, body, headers). */
async function refusal(promise: Promise<unknown>): Promise<RateLimitError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RateLimitRefusal);
  return mapDomainError(err) as RateLimitError;
}

const limiters: RateLimiter[] = [];
afterAll(async () => {
  await Promise.all(limiters.map((l) => l.dispose()));
});

type Options = Partial<RateLimiterOptions>;
const memoryLimiter = (options: Options = {}) =>
  track(createRateLimiter({ redisUrl: undefined, logger: createLogger("silent"), ...options }));
const redisLimiter = (options: Options = {}) =>
  track(
    createRateLimiter({ redisUrl: REDIS_URL, logger: createLogger("silent"), keyPrefix: PREFIX, ...options }),
  );
const BACKENDS: [string, (options?: Options) => RateLimiter][] = [
  ["memory", memoryLimiter],
  ["Redis", redisLimiter],
];

function track(limiter: RateLimiter): RateLimiter {
  limiters.push(limiter);
  return limiter;
}

/**
 * Waits until a Redis-backed limiter is connected (calls before that are answered by the memory stand-in): a
 * snapshot served by Redis sees a key written straight into it.
 */
async function connected(limiter: RateLimiter, url = REDIS_URL): Promise<RateLimiter> {
  const probe = subject({ rpm: 1 });
  const direct = new Redis(url, BOUNDED);
  try {
    await direct.set(`${PREFIX}:rpm:${probe.orgId}`, "1", "EX", 60);
    for (let i = 0; i < 100; i++) {
      if ((await limiter.snapshot(probe)).requests?.remaining === 0) return limiter;
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    direct.disconnect();
  }
  throw new Error("the limiter never reached Redis");
}

describe.each(BACKENDS)("rate limiter (%s)", (backend, make) => {
  const limiter = async (options?: Options) => {
    const made = make(options);
    return backend === "Redis" ? connected(made) : made;
  };

  it("admits exactly rpm of 50 concurrent requests and refuses the rest", async () => {
    const l = await limiter();
    const org = subject({ rpm: 20 });
    const results = await Promise.allSettled(Array.from({ length: 50 }, () => l.admit(org, 0)));
    const admitted = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r) => r.status === "rejected");
    expect(admitted).toHaveLength(20);
    expect(refused).toHaveLength(30);
    for (const r of refused) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(RateLimitRefusal);
      expect(((r as PromiseRejectedResult).reason as RateLimitRefusal).kind).toBe("requests");
    }
    const snap = await l.snapshot(org);
    expect(snap.requests).toMatchObject({ limit: 20, remaining: 0 });
    expect(snap.tokens).toBeUndefined();
  });

  it("refuses with OpenAI's 429 body and headers, consuming nothing", async () => {
    const l = await limiter();
    const org = subject({ rpm: 3, tpm: 1000 });
    for (let i = 0; i < 3; i++) await l.admit(org, 10);
    const err = await refusal(l.admit(org, 10));
    expect(err.status).toBe(429);
    expect(err.toBody()).toEqual({
      error: { message: err.message, type: "requests", param: null, code: "rate_limit_exceeded" },
    });
    expect(err.message).toMatch(
      /^Rate limit reached for requests per min \(RPM\) in organization acme: Limit 3, Used 3, Requested 1\. Please try again in (\d+ms|\d+(\.\d+)?s|1m0s)\.$/,
    );
    expect(err.message).not.toMatch(/https?:|127\.0\.0\.1|redis/i);
    const seconds = Number(err.headers["retry-after"]);
    const ms = Number(err.headers["retry-after-ms"]);
    expect(Number.isInteger(seconds)).toBe(true);
    expect(seconds).toBeGreaterThanOrEqual(1);
    expect(seconds).toBeLessThanOrEqual(60);
    expect(ms).toBeGreaterThanOrEqual(1);
    expect(ms).toBeLessThanOrEqual(60_000);
    expect(seconds).toBe(Math.ceil(ms / 1000));
    expect(err.headers).toMatchObject({
      "x-ratelimit-limit-requests": "3",
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-limit-tokens": "1000",
      "x-ratelimit-remaining-tokens": "970",
    });
    expect(err.headers["x-should-retry"]).toBeUndefined();
    // The refused request's tokens were not kept.
    expect((await l.snapshot(org)).tokens).toMatchObject({ remaining: 970 });
  });

  it("pre-charges tokens, settles to the real count and refunds", async () => {
    const l = await limiter();
    const org = subject({ rpm: 100, tpm: 1000 });
    const first = await l.admit(org, 600);
    expect(first.snapshot.tokens).toMatchObject({ limit: 1000, remaining: 400 });
    expect(first.snapshot.requests).toMatchObject({ limit: 100, remaining: 99 });

    const err = await refusal(l.admit(org, 500));
    expect(err.kind).toBe("tokens");
    expect(err.message).toMatch(
      /^Rate limit reached for tokens per min \(TPM\) in organization acme: Limit 1000, Used 600, Requested 500\. Please try again in /,
    );
    // The tokens window refused, so the request was given back too.
    expect(await l.snapshot(org)).toMatchObject({
      requests: { remaining: 99 },
      tokens: { remaining: 400 },
    });

    await first.settle(100);
    expect((await l.snapshot(org)).tokens).toMatchObject({ remaining: 900 });
    await first.settle(5); // exactly once: later calls do nothing
    await first.refund();
    expect(await l.snapshot(org)).toMatchObject({ requests: { remaining: 99 }, tokens: { remaining: 900 } });

    const second = await l.admit(org, 500);
    expect(second.snapshot.tokens).toMatchObject({ remaining: 400 });
    await second.refund();
    expect(await l.snapshot(org)).toMatchObject({ requests: { remaining: 99 }, tokens: { remaining: 900 } });
    await second.settle(400);
    expect((await l.snapshot(org)).tokens).toMatchObject({ remaining: 900 });

    // More than the pre-charge (it cannot happen with prompt + max_tokens, but the count must stay true).
    const third = await l.admit(org, 100);
    await third.settle(250);
    expect((await l.snapshot(org)).tokens).toMatchObject({ remaining: 650 });
  });

  it("refuses a request larger than the whole TPM window without retry, or clamps an upper bound", async () => {
    const l = await limiter();
    const org = subject({ rpm: 10, tpm: 100 });
    const err = await refusal(l.admit(org, 500));
    expect(err.kind).toBe("tokens");
    expect(err.message).toBe(
      "Request too large for tokens per min (TPM) in organization acme: Limit 100, Requested 500. " +
        "The input or output tokens must be reduced in order to run successfully.",
    );
    expect(err.headers["x-should-retry"]).toBe("false");
    expect(err.headers["retry-after"]).toBe("60");
    expect(await l.snapshot(org)).toMatchObject({ requests: { remaining: 10 }, tokens: { remaining: 100 } });

    // max_tokens absent: the pre-charge is only a bound, so it is lowered to the limit when the prompt fits.
    const admitted = await l.admit(org, 500, { minTokens: 40 });
    expect(admitted.snapshot.tokens).toMatchObject({ remaining: 0 });
    await admitted.settle(60);
    expect((await l.snapshot(org)).tokens).toMatchObject({ remaining: 40 });
    const tooBig = await refusal(l.admit(org, 500, { minTokens: 101 }));
    expect(tooBig.message).toContain("Limit 100, Requested 101.");
  });

  it("counts a request first, then its tokens; a tokens refusal keeps the request, a refund gives both back", async () => {
    const l = await limiter();
    const org = subject({ rpm: 5, tpm: 100 });
    const first = await l.chargeRequest(org);
    expect(first.snapshot.requests).toMatchObject({ limit: 5, remaining: 4 });
    expect(first.snapshot.tokens).toBeUndefined();
    const err = await refusal(l.admitTokens(first, 150, {}));
    expect(err.message).toContain("Limit 100, Requested 150.");
    expect(await l.snapshot(org)).toMatchObject({ requests: { remaining: 4 }, tokens: { remaining: 100 } });

    const second = await l.chargeRequest(org);
    const admission = await l.admitTokens(second, 60);
    expect(admission.snapshot).toMatchObject({ requests: { remaining: 3 }, tokens: { remaining: 40 } });
    const over = await refusal(l.admitTokens(await l.chargeRequest(org), 50));
    expect(over.kind).toBe("tokens");
    expect(over.headers).toMatchObject({
      "x-ratelimit-remaining-requests": "2",
      "x-ratelimit-remaining-tokens": "40",
    });
    await admission.refund();
    await second.refund(); // once: the admission's refund already gave this request back
    expect(await l.snapshot(org)).toMatchObject({ requests: { remaining: 3 }, tokens: { remaining: 100 } });

    // At the limit the request is refused before any tokens are asked for, counting nothing.
    await l.chargeRequest(org);
    await l.chargeRequest(org);
    await l.chargeRequest(org);
    const full = await refusal(l.chargeRequest(org));
    expect(full.kind).toBe("requests");
    expect(full.headers).toMatchObject({
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-remaining-tokens": "100",
    });
    expect((await l.snapshot(org)).requests).toMatchObject({ remaining: 0 });
  });

  it("applies a changed limit at once to the same count", async () => {
    const l = await limiter();
    const org = subject({ rpm: 3 });
    for (let i = 0; i < 3; i++) await l.admit(org, 0);
    await refusal(l.admit(org, 0));
    const raised = { ...org, rpm: 5 };
    await l.admit(raised, 0);
    const admission = await l.admit(raised, 0);
    expect(admission.snapshot.requests).toMatchObject({ limit: 5, remaining: 0 });
    await refusal(l.admit(raised, 0));
    const lowered = { ...org, rpm: 2 };
    const err = await refusal(l.admit(lowered, 0));
    expect(err.message).toContain("Limit 2, Used 2, Requested 1.");
    expect((await l.snapshot(lowered)).requests).toMatchObject({ limit: 2, remaining: 0 });
    // Unlimited (null or 0): admitted, and no window reported.
    const unlimited = await l.admit({ ...org, rpm: null, tpm: 0 }, 1_000_000);
    expect(unlimited.snapshot).toEqual({});
    expect(await l.snapshot({ ...org, rpm: null, tpm: null })).toEqual({});
  });

  it("reports an untouched window as full and a window's reset within its length", async () => {
    const l = await limiter();
    const org = subject({ rpm: 7, tpm: 70 });
    expect(await l.snapshot(org)).toEqual({
      requests: { limit: 7, remaining: 7, resetMs: 0 },
      tokens: { limit: 70, remaining: 70, resetMs: 0 },
    });
    const admission = await l.admit(org, 7);
    for (const state of [admission.snapshot.requests, admission.snapshot.tokens]) {
      expect(state?.resetMs).toBeGreaterThan(0);
      expect(state?.resetMs).toBeLessThanOrEqual(60_000);
    }
  });

  it("does not give tokens back into a window that started after the charge", async () => {
    const l = await limiter({ windowSeconds: 1 });
    const org = subject({ tpm: 100 });
    const admission = await l.admit(org, 80);
    await new Promise((r) => setTimeout(r, 1100));
    const next = await l.admit(org, 30);
    expect(next.snapshot.tokens).toMatchObject({ remaining: 70 });
    await admission.settle(10); // its window is gone: no credit of 70 in the new one
    expect((await l.snapshot(org)).tokens).toMatchObject({ remaining: 70 });
  });
});

describe("rate limiter (Redis, two instances as two replicas)", () => {
  it("shares one count between the instances", async () => {
    const [a, b] = await Promise.all([connected(redisLimiter()), connected(redisLimiter())]);
    const org = subject({ rpm: 15, tpm: 10_000 });
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).admit(org, 10)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(15);
    expect((await a.snapshot(org)).tokens).toMatchObject({ remaining: 10_000 - 150 });
    expect((await b.snapshot(org)).requests).toMatchObject({ remaining: 0 });
  });
});

/** A port nothing listens on, and that nothing else takes while the test's Redis restarts on it. */
const closedPort = restartablePort;

/** A private redis-server this test starts and stops for real. */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn("redis-server", ["--port", String(port), "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  const probe = new Redis({
    ...BOUNDED,
    port,
    lazyConnect: true,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  probe.on("error", () => {}); // refused connections while the server starts are expected here
  for (let i = 0; i < 100; i++) {
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      return child;
    } catch {
      probe.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  child.kill("SIGKILL");
  throw new Error("redis-server did not start");
}

async function stopRedis(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}

describe("rate limiter when Redis is unreachable", () => {
  it("enforces the limits in memory, warns once and never hangs", async () => {
    const { logger, lines } = collectingLogger();
    const l = track(
      createRateLimiter({ redisUrl: `redis://127.0.0.1:${await closedPort()}`, logger, keyPrefix: PREFIX }),
    );
    const org = subject({ rpm: 2, tpm: 100 });
    const admitted = await l.admit(org, 10);
    await l.admit(org, 10);
    const err = await refusal(l.admit(org, 10));
    expect(err.kind).toBe("requests");
    await admitted.settle(5);
    expect(await l.snapshot(org)).toMatchObject({ requests: { remaining: 0 }, tokens: { remaining: 85 } });
    const warnings = lines.filter((line) => line.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toContain("Redis is unreachable");
    await l.dispose();
  });

  it("falls back when Redis goes down mid-run and shares counts again when it is back", async () => {
    const port = await closedPort();
    let redis = await startRedis(port);
    const { logger, lines } = collectingLogger();
    const l = track(createRateLimiter({ redisUrl: `redis://127.0.0.1:${port}`, logger, keyPrefix: PREFIX }));
    try {
      await connected(l, `redis://127.0.0.1:${port}`);
      const org = subject({ rpm: 100 });
      await l.admit(org, 0);
      expect((await l.snapshot(org)).requests).toMatchObject({ remaining: 99 });

      await stopRedis(redis);
      // Down: admitted from memory (the memory stand-in knows nothing of Redis's count).
      const during = await l.admit(org, 0);
      expect(during.snapshot.requests).toMatchObject({ remaining: 99 });
      expect(lines.filter((line) => line.level === 40)).toHaveLength(1);
      await l.admit(org, 0);
      expect(lines.filter((line) => line.level === 40)).toHaveLength(1);

      redis = await startRedis(port);
      let back = false;
      for (let i = 0; i < 100 && !back; i++) {
        await new Promise((r) => setTimeout(r, 100));
        await l.admit(org, 0);
        back = lines.some((line) => line.msg.includes("Redis is reachable again"));
      }
      expect(back).toBe(true);
      // The restarted Redis is empty: its count holds only what was admitted since it came back.
      const direct = new Redis(`redis://127.0.0.1:${port}`, BOUNDED);
      try {
        const stored = Number(await direct.get(`${PREFIX}:rpm:${org.orgId}`));
        expect(stored).toBeGreaterThanOrEqual(1);
        expect((await l.snapshot(org)).requests).toMatchObject({ remaining: 100 - stored });
      } finally {
        direct.disconnect();
      }
    } finally {
      await l.dispose();
      await stopRedis(redis);
    }
  });
});
