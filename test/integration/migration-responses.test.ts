// Migration 0007 on a store that already has usage: existing usage records become chat completions, the check
// constraint holds, and the responses table appears — on PGlite and on PostgreSQL, through openStore as a server
// upgrading in place would.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle as drizzleNodePg } from "drizzle-orm/node-postgres";
import { migrate as migrateNodePg } from "drizzle-orm/node-postgres/migrator";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { MIGRATIONS_FOLDER, openStore } from "../../src/store/open-store.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";

/** The migrations folder as it was before 0007: the journal cut after 0006. */
function migrationsBefore0007(): string {
  const dir = mkdtempSync(join(tmpdir(), "hearth-migrations-0006-"));
  cpSync(MIGRATIONS_FOLDER, dir, { recursive: true });
  const journalPath = join(dir, "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { tag: string }[] };
  const at = journal.entries.findIndex((e) => e.tag === "0007_responses");
  expect(at).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, at);
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}

const USAGE_ROW = sql`insert into usage_records (at, org_id, key_id, model, request_id, prompt_tokens,
  completion_tokens, reasoning_tokens, cached_tokens, status, latency_ms)
  values (now(), 'org_old', 'key_old', 'tiny', 'req_old', 1, 2, 0, 0, 'completed', 3)`;

describe.each(STORE_BACKENDS)("migration 0007 on %s", (name, makeBackend) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it("upgrades a store with usage in place: old records are chat completions", async () => {
    const backend: Backend = await makeBackend();
    cleanups.push(() => backend.cleanup());
    const old = migrationsBefore0007();
    cleanups.push(async () => rmSync(old, { recursive: true, force: true }));
    if (name === "PGlite") {
      const client = new PGlite(join(backend.options.dataDir, "pg"));
      const db = drizzlePglite({ client });
      await migratePglite(db, { migrationsFolder: old });
      await db.execute(USAGE_ROW);
      await client.close();
    } else {
      const pool = new pg.Pool({ connectionString: backend.options.databaseUrl, max: 1 });
      const db = drizzleNodePg({ client: pool });
      await migrateNodePg(db, { migrationsFolder: old });
      await db.execute(USAGE_ROW);
      await pool.end();
    }
    const store = await openStore(backend.options);
    try {
      const rows = await store.db.execute(sql`select request_id, endpoint from usage_records`);
      expect((rows as { rows: unknown[] }).rows).toEqual([
        { request_id: "req_old", endpoint: "chat.completions" },
      ]);
      await expect(
        store.db.execute(sql`update usage_records set endpoint = 'completions'`),
      ).rejects.toThrow();
      const table = await store.db.execute(sql`select count(*)::int as n from responses`);
      expect((table as { rows: unknown[] }).rows).toEqual([{ n: 0 }]);
    } finally {
      await store.close();
    }
  });
});
