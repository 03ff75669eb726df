// Chaos under load, for real: a `hearth serve` on a private PostgreSQL and Redis serves a steady stream of
// requests while PostgreSQL is stopped (pg_ctl -m immediate) for ~10 s, then hung (SIGSTOP) for a few seconds,
// and Redis is killed -9 and restarted. No admitted request is lost, every 200 is a whole answer, usage rows equal
// the successful responses, keys never seen before get a clear 503 while the store is down, already-verified keys
// keep working, /health follows the store, and everything recovers without a restart. Then a SIGTERM while the
// store hangs: the bounded shutdown exits anyway, with its log line.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RESUMED_MESSAGE } from "../../src/tenancy/invalidation-broadcast.js";
import {
  type PrivatePostgres,
  type PrivateRedis,
  startPrivatePostgres,
  startPrivateRedis,
} from "../support/private-stores.js";
import { createKeyWithCli, type ServerProcess, startServerProcess } from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
/** A request that hangs longer than this is a hang (the store's bounds are seconds). */
const HANG_MS = 20_000;
/**
 * The store's shortest bound in this test's config (a ping's and a new connection's): a request that waited on the
 * store took at least this long, so a refusal that comes sooner did not wait.
 */
const STORE_BOUND_MS = 1000;
const SHUTDOWN_TIMEOUT_MS = 3000;

interface Outcome {
  status: number;
  ms: number;
  body: string;
  retryAfter: string | null;
  /** A 200 whose body is a whole answer (non-streamed: a finish_reason; streamed: usage and [DONE]). */
  whole: boolean;
  error?: string;
  requestId?: string | null;
}

async function chat(url: string, key: string, stream: boolean): Promise<Outcome> {
  const started = performance.now();
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "Say hi." }],
        max_tokens: 3,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
      signal: AbortSignal.timeout(HANG_MS),
    });
    const body = await response.text();
    const whole = stream
      ? body.includes('"usage":{') && body.trimEnd().endsWith("data: [DONE]")
      : /"finish_reason":"(stop|length)"/.test(body);
    return {
      status: response.status,
      ms: performance.now() - started,
      body,
      retryAfter: response.headers.get("retry-after"),
      requestId: response.headers.get("x-request-id"),
      whole: response.status === 200 && whole,
    };
  } catch (err) {
    return {
      status: 0,
      ms: performance.now() - started,
      body: "",
      retryAfter: null,
      whole: false,
      error: String(err),
    };
  }
}

async function health(url: string): Promise<{ status: number; store?: string }> {
  try {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(HANG_MS) });
    const body = (await response.json()) as { store?: string };
    return { status: response.status, ...(body.store === undefined ? {} : { store: body.store }) };
  } catch {
    return { status: 0 };
  }
}

async function until<T>(what: string, probe: () => Promise<T>, ok: (value: T) => boolean, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (ok(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`${what}: not reached in ${ms} ms (last: ${JSON.stringify(value)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0);
}

/** The 503 a caller gets for a key that cannot be checked: OpenAI-shaped, retryable. */
function expectStoreUnavailable(outcome: Outcome): void {
  expect(outcome.status, outcome.body || outcome.error).toBe(503);
  expect(outcome.retryAfter).toMatch(/^[1-9][0-9]*$/);
  expect(JSON.parse(outcome.body)).toEqual({
    error: {
      message: expect.stringMatching(/database is unavailable/),
      type: "server_error",
      param: null,
      code: "store_unavailable",
    },
  });
}

/**
 * While the store is down: /health says 503 naming it, and a key the server never verified gets the clear 503
 * each time it is tried, until `end` (performance.now()).
 */
async function refusedUntil(url: string, unseenKey: string, end: number): Promise<Outcome[]> {
  await until(
    "/health 503 naming the store",
    () => health(url),
    (h) => h.status === 503 && h.store === "unavailable",
  );
  const refused: Outcome[] = [];
  while (performance.now() < end) {
    const outcome = await chat(url, unseenKey, false);
    expectStoreUnavailable(outcome);
    // At once: the server knows the store is down (its /health says so) and does not wait on it per request.
    expect(outcome.ms, "a refusal that waited on the store").toBeLessThan(STORE_BOUND_MS);
    refused.push(outcome);
    await sleep(250);
  }
  return refused;
}

let postgres: PrivatePostgres | undefined;
let redis: PrivateRedis | undefined;
let server: ServerProcess | undefined;
const dir = mkdtempSync(join(tmpdir(), "hearth-chaos-"));

afterAll(async () => {
  server?.child.kill("SIGKILL");
  await postgres?.destroy();
  await redis?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe("store chaos under load", () => {
  it("loses no admitted request or usage record while PostgreSQL stops and hangs and Redis is killed", async () => {
    [postgres, redis] = await Promise.all([startPrivatePostgres(), startPrivateRedis()]);
    const pgs = postgres;
    const config = join(dir, "hearth.yaml");
    // Short store bounds keep the test fast; the defaults are seconds longer, the behaviour is the same.
    writeFileSync(
      config,
      [
        "server:",
        `  shutdownTimeoutMs: ${SHUTDOWN_TIMEOUT_MS}`,
        "store:",
        `  connectTimeoutMs: ${STORE_BOUND_MS}`,
        "  statementTimeoutMs: 2000",
        "  healthCacheMs: 500",
        `  healthTimeoutMs: ${STORE_BOUND_MS}`,
        "",
      ].join("\n"),
    );
    server = await startServerProcess({
      env: { HEARTH_DATABASE_URL: pgs.url, HEARTH_REDIS_URL: redis.url },
      args: ["--config", config, "--parallel", "4"],
    });
    const { url, apiKey } = server;
    // Keys this server has never verified: they can only be checked in the store.
    const [unseenDuringStop, unseenDuringHang] = [
      await createKeyWithCli(server, "default"),
      await createKeyWithCli(server, "default"),
    ];

    // Steady load with the bootstrap key: two non-streamed workers and one streamed.
    const outcomes: Outcome[] = [];
    let loading = true;
    const worker = async (stream: boolean) => {
      while (loading) outcomes.push(await chat(url, apiKey, stream));
    };
    const workers = [worker(false), worker(false), worker(true)];
    await until(
      "warm-up",
      async () => outcomes.filter((o) => o.whole).length,
      (n) => n >= 6,
    );

    // (a) PostgreSQL stopped for ~10 s.
    const stoppedAt = performance.now();
    await pgs.stopImmediately();
    const refused = await refusedUntil(url, unseenDuringStop, stoppedAt + 10_000);
    const okDuringStop = outcomes.filter((o) => o.whole).length;
    await pgs.start();
    const restartedAt = performance.now();
    await until(
      "/health 200 after the restart",
      () => health(url),
      (h) => h.status === 200 && h.store === "ok",
    );
    const recovered = await until(
      "a never-seen key works after the restart",
      () => chat(url, unseenDuringStop, false),
      (o) => o.status === 200,
    );
    expect(recovered.whole).toBe(true);
    const recoveryMs = performance.now() - restartedAt;

    // (b) Redis killed -9 mid-load, restarted a moment later: limits fall back to memory, nothing is refused.
    const beforeRedisKill = outcomes.length;
    await redis.kill();
    await until(
      "requests served without Redis",
      async () => outcomes.length,
      (n) => n >= beforeRedisKill + 6,
    );
    await redis.start();
    // The subscriber reconnects on its own schedule and then drops the caches (revocations sent meanwhile were
    // lost): the known key is verified again only after that, so wait for it before the store hangs.
    await until(
      "the invalidation subscriber back",
      async () => server?.output().includes(RESUMED_MESSAGE) ?? false,
      (back) => back,
    );
    const afterRedis = outcomes.length;
    await until(
      "requests served after Redis is back",
      async () => outcomes.length,
      (n) => n >= afterRedis + 6,
    );

    // (c) PostgreSQL hung (SIGSTOP of every process) for ~5 s: answers stay bounded, never a hang.
    const hungAt = performance.now();
    await pgs.freeze();
    let refusedWhileHung: Outcome[] = [];
    try {
      refusedWhileHung = await refusedUntil(url, unseenDuringHang, hungAt + 5000);
    } finally {
      await pgs.thaw();
    }
    await until(
      "/health 200 after the thaw",
      () => health(url),
      (h) => h.status === 200,
    );
    await until(
      "the other never-seen key works after the thaw",
      () => chat(url, unseenDuringHang, false),
      (o) => o.status === 200,
    );

    loading = false;
    await Promise.all(workers);

    // Every answer to the known key was a whole 200: nothing admitted was lost, nothing failed.
    const failures = outcomes.filter((o) => !o.whole);
    expect(failures.map((o) => `${o.status} ${o.error ?? o.body.slice(0, 200)}`)).toEqual([]);
    expect(okDuringStop).toBeGreaterThan(6);

    // Usage rows equal the successful responses, once the meter has written what it held through the outages.
    const successes = outcomes.length + 2; // the load, and one success per never-seen key after recovery
    const countRows = async () =>
      Number((await pgs.query<{ n: string }>("select count(*) as n from usage_records"))[0]?.n);
    // The meter retries with a backoff of up to 4 s and caught up 0.1–0.3 s after the load ended in every run
    // measured; the poll returns as soon as the rows match, so the 90 s only bound a real loss.
    const rows = await until("every usage record written", countRows, (n) => n >= successes, 90_000).catch(
      () => countRows(),
    );
    await sleep(1000);
    // On a mismatch: which answered requests have no record, and what the server said about usage.
    const recorded = new Set(
      (await pgs.query<{ request_id: string }>("select request_id from usage_records")).map(
        (r) => r.request_id,
      ),
    );
    const unrecorded = outcomes.filter((o) => !recorded.has(o.requestId ?? "")).map((o) => o.requestId);
    const usageLog = (server?.output() ?? "").split("\n").filter((line) => /usage/i.test(line));
    const context = `unrecorded: ${JSON.stringify(unrecorded)}\n${usageLog.slice(-20).join("\n")}`;
    expect(await countRows(), context).toBe(successes);
    expect(rows, context).toBe(successes);

    const refusals = [...refused, ...refusedWhileHung].map((o) => o.ms);
    console.info(
      [
        "store chaos figures:",
        `  requests under load: ${outcomes.length} (all 200, whole), usage rows: ${successes}`,
        `  503 store_unavailable for never-seen keys: ${refused.length} while stopped (latency p50 ${percentile(
          refused.map((o) => o.ms),
          50,
        )} ms, max ${percentile(
          refused.map((o) => o.ms),
          100,
        )} ms), ${refusedWhileHung.length} while hung (p50 ${percentile(
          refusedWhileHung.map((o) => o.ms),
          50,
        )} ms, max ${percentile(
          refusedWhileHung.map((o) => o.ms),
          100,
        )} ms)`,
        `  all 503s: p50 ${percentile(refusals, 50)} ms, p99 ${percentile(refusals, 99)} ms`,
        `  recovery after pg_ctl start: ${Math.round(recoveryMs)} ms to /health 200 and a never-seen key served`,
        `  known-key latency: p50 ${percentile(
          outcomes.map((o) => o.ms),
          50,
        )} ms, max ${percentile(
          outcomes.map((o) => o.ms),
          100,
        )} ms`,
      ].join("\n"),
    );
  }, 300_000);

  it("exits within the shutdown bound when SIGTERM comes while the store hangs", async () => {
    const running = server;
    const pgs = postgres;
    if (running === undefined || pgs === undefined)
      throw new Error("the chaos test did not start the server");
    // A request whose usage record cannot be written (the store hangs) keeps the meter's dispose retrying.
    await pgs.freeze();
    try {
      const served = await chat(running.url, running.apiKey, false);
      expect(served.status).toBe(200);
      const signalled = performance.now();
      const exit = await running.stop("SIGTERM");
      const stopMs = performance.now() - signalled;
      expect(running.output()).toMatch(
        /shutdown did not finish within 3000 ms \(server\.shutdownTimeoutMs\); exiting anyway/,
      );
      expect(exit).toBe(1);
      // Exited at the bound, not when the stuck work gave up on its own (the pool's timeouts and the meter's
      // retries end it too, later): 2 s is the margin for the process to exit once the bound has passed.
      expect(stopMs, "SIGTERM to exit, in ms").toBeLessThan(SHUTDOWN_TIMEOUT_MS + 2000);
    } finally {
      await pgs.thaw();
    }
  });
});
