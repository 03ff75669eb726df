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
}

// The same SQL migrations serve both drivers. src/store and dist/store are both two levels below the package root.
export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../drizzle", import.meta.url));

// Any fixed number: replicas starting together on one PostgreSQL must not run the migrations at the same time.
const MIGRATION_LOCK_ID = 7_424_011_853;

export async function openStore(options: OpenStoreOptions): Promise<Store> {
  return options.databaseUrl === undefined
    ? openPglite(options.dataDir)
    : openPostgres(options.databaseUrl, options.maxConnections ?? 10);
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

async function openPostgres(url: string, max: number): Promise<Store> {
  const pool = new pg.Pool({ connectionString: url, max });
  // An idle client that loses its connection emits "error"; without a listener that would crash the process.
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
    return makeStore(db, "postgres", () => pool.end());
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
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
