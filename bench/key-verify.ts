// Microbenchmark of API-key verification (tenancy.keys.verify): cached (hot key) and uncached, on PGlite and
// on PostgreSQL when reachable. `node --import tsx bench/key-verify.ts` prints the table; bench/run.ts embeds it.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { openStore, type Store } from "../src/store/open-store.js";
import { createTenancy, type Tenancy } from "../src/tenancy/tenancy.js";

export interface KeyVerifyOptions {
  /** Timed verifications per case (after a warm-up of a tenth as many). */
  iterations?: number;
  /** PostgreSQL to create a scratch database in; default HEARTH_BENCH_DATABASE_URL or the local test server. */
  postgresUrl?: string;
}

interface CaseResult {
  store: string;
  case: string;
  iterations: number;
  meanUs: number;
  p50Us: number;
  p99Us: number;
}

const MODELS = ["bench-model"];

/** Measures key verification and returns a Markdown table (µs per verify). */
export async function benchKeyVerify(options: KeyVerifyOptions = {}): Promise<string> {
  const iterations = options.iterations ?? 2000;
  const postgresUrl =
    options.postgresUrl ?? process.env.HEARTH_BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const rows: CaseResult[] = [];
  const notes: string[] = [];

  const dataDir = mkdtempSync(join(tmpdir(), "hearth-bench-keys-"));
  try {
    const store = await openStore({ dataDir });
    try {
      rows.push(...(await measureStore("PGlite", store, iterations)));
    } finally {
      await store.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }

  const scratch = await createScratchDatabase(postgresUrl).catch((err: unknown) => {
    notes.push(
      `PostgreSQL not measured: ${postgresUrl.replace(/\/\/[^@]*@/, "//")} unreachable (${String(err)}).`,
    );
    return undefined;
  });
  if (scratch !== undefined) {
    try {
      const store = await openStore({ dataDir: tmpdir(), databaseUrl: scratch.url });
      try {
        rows.push(...(await measureStore("PostgreSQL", store, iterations)));
      } finally {
        await store.close();
      }
    } finally {
      await scratch.drop();
    }
  }
  return render(rows, notes);
}

async function measureStore(storeName: string, store: Store, iterations: number): Promise<CaseResult[]> {
  const keySecret = randomBytes(32);
  const cached = createTenancy(store.db, { keySecret, modelIds: MODELS });
  // TTL 0: every verification misses the cache and looks the key up in the store.
  const uncached = createTenancy(store.db, { keySecret, modelIds: MODELS, cacheTtlMs: 0 });
  try {
    await cached.orgs.create("bench", MODELS);
    const { key } = await cached.keys.create("bench", { name: "bench" });
    const unknown = `sk-${"x".repeat(key.length - 3)}`;
    const results: CaseResult[] = [];
    const run = async (name: string, service: Tenancy, presented: string, expectValid: boolean) => {
      const samples = await time(iterations, async () => {
        const principal = await service.keys.verify(presented);
        if ((principal !== null) !== expectValid)
          throw new Error(`unexpected verification result in ${name}`);
      });
      results.push({ store: storeName, case: name, iterations, ...summarise(samples) });
    };
    await run("cached (hot key)", cached, key, true);
    await run("uncached (store lookup)", uncached, key, true);
    await run("unknown key (store lookup)", cached, unknown, false);
    return results;
  } finally {
    await cached.dispose();
    await uncached.dispose();
  }
}

/** Per-call durations in µs, after a warm-up (JIT, connection pool, prepared plans). */
async function time(iterations: number, call: () => Promise<void>): Promise<number[]> {
  for (let i = 0; i < Math.max(10, Math.floor(iterations / 10)); i++) await call();
  const samples = new Array<number>(iterations);
  for (let i = 0; i < iterations; i++) {
    const start = process.hrtime.bigint();
    await call();
    samples[i] = Number(process.hrtime.bigint() - start) / 1000;
  }
  return samples;
}

function summarise(samples: number[]): { meanUs: number; p50Us: number; p99Us: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
  const mean = sorted.reduce((sum, v) => sum + v, 0) / sorted.length;
  return { meanUs: mean, p50Us: at(50), p99Us: at(99) };
}

function render(rows: CaseResult[], notes: string[]): string {
  const fmt = (us: number) => (us >= 100 ? us.toFixed(0) : us.toFixed(1));
  const lines = [
    "| store | verification | iterations | mean µs | p50 µs | p99 µs |",
    "|---|---|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.store} | ${r.case} | ${r.iterations} | ${fmt(r.meanUs)} | ${fmt(r.p50Us)} | ${fmt(r.p99Us)} |`,
    ),
  ];
  for (const note of notes) lines.push("", note);
  return lines.join("\n");
}

/** A throw-away database next to the one `url` names, dropped afterwards. */
async function createScratchDatabase(url: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `hearth_bench_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  await admin.connect();
  try {
    await admin.query(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  const scratch = new URL(url);
  scratch.pathname = `/${name}`;
  return {
    url: scratch.toString(),
    async drop() {
      const dropper = new pg.Client({ connectionString: url });
      await dropper.connect();
      try {
        await dropper.query(`drop database if exists "${name}" with (force)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchKeyVerify().then(
    (table) => process.stdout.write(`${table}\n`),
    (err: unknown) => {
      process.stderr.write(`key-verify benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
