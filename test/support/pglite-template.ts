// A fresh PGlite cluster costs seconds of initdb in WASM: tests copy one initialised, empty cluster instead.
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A fresh PGlite cluster costs ~7 s of initdb in WASM. Tests copy one empty, initialised cluster into each new
 * data dir instead (the server still runs every migration on it).
 */
export async function pgliteTemplate(): Promise<string> {
  const { PGlite } = await import("@electric-sql/pglite");
  const manifest = join(
    import.meta.dirname,
    "..",
    "..",
    "node_modules",
    "@electric-sql",
    "pglite",
    "package.json",
  );
  const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
  const template = join(tmpdir(), `hearth-pglite-template-${version}`);
  if (existsSync(template)) return template;
  const building = mkdtempSync(join(tmpdir(), "hearth-pglite-build-"));
  const db = await PGlite.create(join(building, "pg"));
  await db.close();
  try {
    renameSync(join(building, "pg"), template);
  } catch {
    // another test process won the race; its template is as good
  }
  rmSync(building, { recursive: true, force: true });
  return template;
}

/** A new data dir whose `pg` folder holds an empty cluster (the store still runs every migration on it). */
export async function dataDirWithPglite(): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), "hearth-test-"));
  cpSync(await pgliteTemplate(), join(dataDir, "pg"), { recursive: true });
  return dataDir;
}
