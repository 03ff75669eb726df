// Opens the tenancy store: embedded PGlite in the data dir, or PostgreSQL when a URL is given; migrates at open.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle as drizzleNodePg } from "drizzle-orm/node-postgres";
import { migrate as migrateNodePg } from "drizzle-orm/node-postgres/migrator";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import pg from "pg";
import * as schema from "./schema.js";

/** The database handle tenancy code is written against: the common base of both drivers. */
export type StoreDb = PgDatabase<PgQueryResultHKT, typeof schema>;

export type StoreDriver = "pglite" | "postgres";

export interface Store {
  readonly db: StoreDb;
  readonly driver: StoreDriver;
  /** Resolves when the database answers a trivial query; rejects otherwise (used by /health). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  /** The embedded database lives in `<dataDir>/pg` when no databaseUrl is given. */
  dataDir: string;
  databaseUrl?: string | undefined;
  /** Size of the PostgreSQL connection pool. */
  maxConnections?: number;
  /** PostgreSQL only: without them a stopped or hung server holds every request that touches it. */
  timeouts?: PoolTimeouts;
}

export interface PoolTimeouts {
  /** Opening a connection, or waiting for a free pooled one. */
  connectTimeoutMs: number;
  /** statement_timeout on the server; the client gives up a little later (a hung server never answers). */
  statementTimeoutMs: number;
  /** Idle connections are closed after this. */
  idleTimeoutMs: number;
}

export const DEFAULT_POOL_TIMEOUTS: PoolTimeouts = Object.freeze({
  connectTimeoutMs: 5000,
  statementTimeoutMs: 10_000,
  idleTimeoutMs: 30_000,
});

/** How much longer than statement_timeout the client waits before it gives a query up itself. */
const CLIENT_TIMEOUT_MARGIN_MS = 1000;

/** The pg.Pool settings for these timeouts (exported for its test). */
export function poolConfig(url: string, max: number, timeouts: PoolTimeouts): pg.PoolConfig {
  return {
    connectionString: url,
    max,
    connectionTimeoutMillis: timeouts.connectTimeoutMs,
    idleTimeoutMillis: timeouts.idleTimeoutMs,
    // Sent at connect: the server cancels a runaway statement and an abandoned transaction.
    statement_timeout: timeouts.statementTimeoutMs,
    idle_in_transaction_session_timeout: timeouts.statementTimeoutMs * 2,
    // A server that is stopped (SIGSTOP) or cut off never answers, so statement_timeout cannot fire: the client
    // gives up itself, and the pool drops the connection.
    query_timeout: timeouts.statementTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS,
    // Dead peers are noticed by the kernel instead of never.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
}

// The same SQL migrations serve both drivers. src/store and dist/store are both two levels below the package root.
export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../drizzle", import.meta.url));

// Any fixed number: replicas starting together on one PostgreSQL must not run the migrations at the same time.
const MIGRATION_LOCK_ID = 7_424_011_853;

export async function openStore(options: OpenStoreOptions): Promise<Store> {
  return options.databaseUrl === undefined
    ? openPglite(options.dataDir)
    : openPostgres(
        options.databaseUrl,
        options.maxConnections ?? 10,
        options.timeouts ?? DEFAULT_POOL_TIMEOUTS,
      );
}

async function openPglite(dataDir: string): Promise<Store> {
  const dir = join(dataDir, "pg");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const client = new PGlite(dir);
  try {
    await client.waitReady;
    const db = drizzlePglite({ client, schema });
    await migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER });
    return makeStore(db, "pglite", () => client.close());
  } catch (err) {
    await client.close().catch(() => {});
    throw err;
  }
}

async function openPostgres(url: string, max: number, timeouts: PoolTimeouts): Promise<Store> {
  await migratePostgres(url, timeouts.connectTimeoutMs);
  const pool = new pg.Pool(poolConfig(url, max, timeouts));
  // An idle client that loses its connection emits "error"; without a listener that would crash the process.
  pool.on("error", () => {});
  return makeStore(drizzleNodePg({ client: pool, schema }), "postgres", () => pool.end());
}

/**
 * Migrates on a connection of its own without the serving pool's statement timeouts: waiting for another
 * replica's migration, or building an index on a large table, may rightly take longer than any request should.
 */
async function migratePostgres(url: string, connectTimeoutMs: number): Promise<void> {
  // Two connections: one holds the lock, the migrator uses the other.
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: connectTimeoutMs });
  pool.on("error", () => {});
  try {
    const db = drizzleNodePg({ client: pool, schema });
    const lock = await pool.connect();
    try {
      await lock.query("select pg_advisory_lock($1)", [MIGRATION_LOCK_ID]);
      await migrateNodePg(db, { migrationsFolder: MIGRATIONS_FOLDER });
    } finally {
      await lock.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK_ID]).catch(() => {});
      lock.release();
    }
  } finally {
    await pool.end().catch(() => {});
  }
}

function makeStore(db: StoreDb, driver: StoreDriver, closeClient: () => Promise<void>): Store {
  let closed: Promise<void> | undefined;
  return {
    db,
    driver,
    async ping() {
      await db.execute(sql`select 1`);
    },
    close() {
      closed ??= closeClient();
      return closed;
    },
  };
}
