// The usage meter across real faults of its PostgreSQL (a private server, never the shared one): a crash
// (pg_ctl stop -m immediate) right after a write was acknowledged, an outage while records keep coming, and a hang
// (SIGSTOP) in the middle of a write. Every record ends up stored exactly once. The first test pins down what the
// private server must guarantee for that: a commit it acknowledged survives the crash (store-chaos relies on it).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/open-store.js";
import { PgUsageMeter, UsageRecordsDroppedError } from "../../src/usage/pg-meter.js";
import type { UsageRecord } from "../../src/usage/types.js";
import { type PrivatePostgres, startPrivatePostgres } from "../support/private-stores.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let postgres: PrivatePostgres;
const dir = mkdtempSync(join(tmpdir(), "hearth-usage-crash-"));

beforeAll(async () => {
  postgres = await startPrivatePostgres();
});

afterAll(async () => {
  await postgres?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe("usage records across a crash and a hang of PostgreSQL", () => {
  it("the private PostgreSQL keeps a commit it acknowledged through pg_ctl stop -m immediate", async () => {
    await postgres.query("create table acknowledged (n int primary key)");
    await postgres.query("checkpoint");
    const lost: number[] = [];
    for (let n = 0; n < 3; n++) {
      const client = new pg.Client({ connectionString: postgres.url });
      client.on("error", () => {}); // the crash cuts the connection
      await client.connect();
      await client.query("insert into acknowledged values ($1)", [n]);
      await postgres.stopImmediately();
      await postgres.start();
      await client.end().catch(() => {});
      const rows = await postgres.query<{ n: number }>(`select n from acknowledged where n = ${n}`);
      if (rows.length === 0) lost.push(n);
    }
    expect(lost, "acknowledged inserts missing after the crash").toEqual([]);
  });

  it("stores every record exactly once through a crash right after a write, an outage and a hang", async () => {
    const store: Store = await openStore({
      dataDir: dir,
      databaseUrl: postgres.url,
      // Short bounds, as store-chaos uses: a hung server is given up by the client after 2 s.
      timeouts: { connectTimeoutMs: 1000, statementTimeoutMs: 1000, idleTimeoutMs: 30_000 },
    });
    const errors: unknown[] = [];
    const meter = new PgUsageMeter(store.db, { onError: (err) => errors.push(err), maxRetryDelayMs: 500 });
    let recorded = 0;
    const record = (count: number) => {
      for (let i = 0; i < count; i++) meter.record(usageRecord(recorded++));
    };
    /** flush() rejects while the store fails (the records stay buffered): try again until it is back. */
    const flushed = async () => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          return await meter.flush();
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await sleep(100);
        }
      }
    };
    try {
      record(10);
      await flushed();
      await sleep(1000); // the schema and the first rows are long committed before anything fails

      // A crash right after PostgreSQL acknowledged a write: the meter has let those records go.
      record(20);
      await meter.flush();
      await postgres.stopImmediately();
      record(20); // held while the store is down
      await sleep(1000);
      await postgres.start();
      await flushed();

      // A hang while a write is on the wire: the client gives it up, the meter writes it again, and the first
      // attempt, which the server runs when it resumes, must not make a second row.
      await postgres.freeze();
      try {
        record(20);
        await sleep(3000);
      } finally {
        await postgres.thaw();
      }
      await flushed();
      await meter.dispose();

      const rows = await postgres.query<{ request_id: string }>(
        "select request_id from usage_records where org_id = 'org_crash' order by request_id",
      );
      const expected = Array.from({ length: recorded }, (_, n) => requestId(n)).sort();
      expect(rows.map((r) => r.request_id)).toEqual(expected);
      expect(errors.filter((err) => err instanceof UsageRecordsDroppedError)).toEqual([]);
      // The faults did happen: writes were refused while the server was down and given up while it hung.
      const causes = errors.map((err) => String((err as { cause?: unknown }).cause ?? err));
      expect(causes).toContainEqual(expect.stringMatching(/ECONNREFUSED/));
      expect(causes).toContainEqual(expect.stringMatching(/Query read timeout/));
    } finally {
      await meter.dispose();
      await store.close();
    }
  }, 120_000);
});

function requestId(n: number): string {
  return `req_${String(n).padStart(4, "0")}`;
}

function usageRecord(n: number): UsageRecord {
  return {
    at: new Date(),
    orgId: "org_crash",
    keyId: "key_crash",
    model: "tiny",
    requestId: requestId(n),
    promptTokens: 10,
    completionTokens: n,
    reasoningTokens: 0,
    cachedTokens: 0,
    status: "completed",
    latencyMs: 5,
  };
}
