// Store backends for suites that must pass on both drivers: embedded PGlite and a real PostgreSQL.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { dataDirWithPglite } from "./pglite-template.js";

// Tests may point elsewhere; the default is the local server these machines run.
export const POSTGRES_BASE =
  process.env.HEARTH_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface Backend {
  /** Options for openStore; the same ones open the same database again. */
  options: { dataDir: string; databaseUrl?: string };
  cleanup(): Promise<void>;
}

/** A data dir holding a copy of an empty, initialised PGlite cluster (no 7 s initdb per suite). */
export async function pgliteBackend(): Promise<Backend> {
  const dir = await dataDirWithPglite();
  return { options: { dataDir: dir }, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** A fresh, uniquely named database created from the `test` database, dropped afterwards. */
export async function postgresBackend(): Promise<Backend> {
  const base = new URL(POSTGRES_BASE);
  const candidates = base.username === "postgres" ? ["postgres", "root"] : [base.username];
  let lastError: unknown;
  for (const user of candidates) {
    const adminUrl = new URL(base);
    adminUrl.username = user;
    const admin = new pg.Client({ connectionString: adminUrl.toString() });
    try {
      await admin.connect();
    } catch (err) {
      lastError = err;
      await admin.end().catch(() => {});
      continue;
    }
    const name = `hearth_test_${process.pid}_${randomBytes(4).toString("hex")}`;
    try {
      await admin.query(`create database "${name}"`);
    } finally {
      await admin.end();
    }
    const dbUrl = new URL(adminUrl);
    dbUrl.pathname = `/${name}`;
    const dir = mkdtempSync(join(tmpdir(), "hearth-store-pg-"));
    return {
      options: { dataDir: dir, databaseUrl: dbUrl.toString() },
      async cleanup() {
        const dropper = new pg.Client({ connectionString: adminUrl.toString() });
        await dropper.connect();
        try {
          await dropper.query(`drop database if exists "${name}" with (force)`);
        } finally {
          await dropper.end();
        }
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  throw new Error(
    `cannot connect to PostgreSQL at ${POSTGRES_BASE} as postgres or root: ${String(lastError)}`,
  );
}

export const STORE_BACKENDS: [string, () => Promise<Backend>][] = [
  ["PGlite", pgliteBackend],
  ["PostgreSQL", postgresBackend],
];
