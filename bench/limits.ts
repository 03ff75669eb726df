// Microbenchmark of the rate limiter: what one admit + settle costs a request, in memory and on Redis (when
// reachable). `node --import tsx bench/limits.ts` prints the table; bench/run.ts embeds it (phase `limits`).
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import { Redis } from "ioredis";
import { createRateLimiter } from "../src/limits/create-limiter.js";
import type { LimitSubject, RateLimiter } from "../src/limits/types.js";
import { createLogger } from "../src/observability/logger.js";
import { percentile } from "./stats.js";

export interface LimitsBenchOptions {
  /** Timed admit + settle pairs per case (after a warm-up of a tenth as many). */
  iterations?: number;
  /** Default HEARTH_BENCH_REDIS_URL, HEARTH_REDIS_URL or the local server. */
  redisUrl?: string;
}

interface CaseResult {
  backend: string;
  case: string;
  iterations: number;
  meanUs: number;
  p50Us: number;
  p99Us: number;
  perSecond: number;
}

/** Requests carry a pre-charge of this many tokens and settle at half of it, as a typical completion does. */
const PRE_CHARGE = 512;
const CONCURRENCY = 16;

/** Measures the limiter and returns a Markdown table (µs per admit + settle). */
export async function benchLimits(options: LimitsBenchOptions = {}): Promise<string> {
  const iterations = options.iterations ?? 5000;
  const redisUrl =
    options.redisUrl ??
    process.env.HEARTH_BENCH_REDIS_URL ??
    process.env.HEARTH_REDIS_URL ??
    "redis://127.0.0.1:6379";
  const logger = createLogger("silent");
  const rows: CaseResult[] = [];
  const notes: string[] = [];

  const memory = createRateLimiter({ redisUrl: undefined, logger });
  try {
    rows.push(...(await measure("memory", memory, iterations)));
  } finally {
    await memory.dispose();
  }

  const keyPrefix = `hearth-bench:${process.pid}-${randomBytes(4).toString("hex")}`;
  const probe = new Redis(redisUrl, { lazyConnect: true, connectTimeout: 1000, retryStrategy: () => null });
  const reachable = await probe.connect().then(
    () => true,
    (err: unknown) => {
      notes.push(`Redis not measured: ${redisUrl.replace(/\/\/[^@]*@/, "//")} unreachable (${String(err)}).`);
      return false;
    },
  );
  if (reachable) {
    const redis = createRateLimiter({ redisUrl, logger, keyPrefix });
    try {
      await untilShared(redis, probe, keyPrefix);
      rows.push(...(await measure("Redis", redis, iterations)));
    } finally {
      await redis.dispose();
      const keys = await probe.keys(`${keyPrefix}:*`);
      if (keys.length > 0) await probe.del(...keys);
    }
  }
  probe.disconnect();
  return render(rows, notes);
}

async function measure(backend: string, limiter: RateLimiter, iterations: number): Promise<CaseResult[]> {
  const subject = (): LimitSubject => ({
    orgId: `org_bench_${randomBytes(6).toString("hex")}`,
    orgName: "bench",
    rpm: 1_000_000_000,
    tpm: 1_000_000_000_000,
  });
  const admitAndSettle = (org: LimitSubject) => async () => {
    const admission = await limiter.admit(org, PRE_CHARGE);
    await admission.settle(PRE_CHARGE / 2);
  };
  const sequential = await time(iterations, 1, admitAndSettle(subject()));
  const concurrent = await time(iterations, CONCURRENCY, admitAndSettle(subject()));
  const unlimited = await time(iterations, 1, async () => {
    const admission = await limiter.admit(
      { orgId: "org_unlimited", orgName: "bench", rpm: null, tpm: null },
      1,
    );
    await admission.settle(1);
  });
  const snapshot = subject();
  const snapshots = await time(iterations, 1, async () => {
    await limiter.snapshot(snapshot);
  });
  return [
    { backend, case: "admit + settle, one at a time", iterations, ...sequential },
    { backend, case: `admit + settle, ${CONCURRENCY} in flight (one org)`, iterations, ...concurrent },
    { backend, case: "admit + settle, unlimited org", iterations, ...unlimited },
    { backend, case: "snapshot (headers on /v1/models)", iterations, ...snapshots },
  ];
}

/** Latency of each call (µs) with `concurrency` callers in a loop, after a warm-up; and calls per second. */
async function time(
  iterations: number,
  concurrency: number,
  call: () => Promise<void>,
): Promise<Omit<CaseResult, "backend" | "case" | "iterations">> {
  const warmUp = Math.max(10, Math.floor(iterations / 10));
  for (let i = 0; i < warmUp; i++) await call();
  const samples: number[] = [];
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < iterations) {
        next++;
        const start = process.hrtime.bigint();
        await call();
        samples.push(Number(process.hrtime.bigint() - start) / 1000);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return {
    meanUs: samples.reduce((sum, v) => sum + v, 0) / samples.length,
    p50Us: percentile(samples, 50),
    p99Us: percentile(samples, 99),
    perSecond: samples.length / seconds,
  };
}

/** Waits until the limiter's own Redis connection is up (before that, calls are answered from memory). */
async function untilShared(limiter: RateLimiter, redis: Redis, keyPrefix: string): Promise<void> {
  const probe: LimitSubject = { orgId: "org_probe", orgName: "bench", rpm: 1, tpm: null };
  await redis.set(`${keyPrefix}:rpm:${probe.orgId}`, "1", "EX", 60);
  for (let i = 0; i < 100; i++) {
    if ((await limiter.snapshot(probe)).requests?.remaining === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the limiter did not connect to Redis");
}

function render(rows: CaseResult[], notes: string[]): string {
  const fmt = (us: number) => (us >= 100 ? us.toFixed(0) : us.toFixed(1));
  const lines = [
    `Pre-charge ${PRE_CHARGE} tokens, settled at ${PRE_CHARGE / 2}; both windows limited unless noted.`,
    "",
    "| backend | case | iterations | mean µs | p50 µs | p99 µs | per second |",
    "|---|---|---:|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.backend} | ${r.case} | ${r.iterations} | ${fmt(r.meanUs)} | ${fmt(r.p50Us)} | ${fmt(r.p99Us)} | ` +
        `${Math.round(r.perSecond)} |`,
    ),
  ];
  for (const note of notes) lines.push("", note);
  return lines.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchLimits().then(
    (table) => process.stdout.write(`${table}\n`),
    (err: unknown) => {
      process.stderr.write(`limits benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
