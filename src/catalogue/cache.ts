// The model cache on disk: where files live, GGUF and SHA-256 checks, and the sidecar that remembers a verified hash.
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, type Stats } from "node:fs";
import { open, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";

const GGUF_MAGIC = Buffer.from("GGUF", "latin1");

/** The cache folder of one model: its id with characters that are unsafe in file names replaced. */
export function modelCacheDir(modelsDir: string, modelId: string): string {
  return join(modelsDir, modelId.replace(/[^A-Za-z0-9._-]/g, "_"));
}

/** Fetches work in `<cache dir>/.fetch-XXXXXX/` and end with a rename out of it. */
export const FETCH_DIR_PREFIX = ".fetch-";

// Far longer than any real download, so a folder this old belongs to a process that was killed mid-fetch.
const ABANDONED_AFTER_MS = 24 * 60 * 60 * 1000;

/** Removes temporary fetch folders that killed processes left behind; live fetches are never this old. */
export async function removeAbandonedFetches(cacheDir: string, now = Date.now()): Promise<void> {
  let names: string[];
  try {
    names = await readdir(cacheDir);
  } catch {
    return;
  }
  const abandoned = names.filter((name) => name.startsWith(FETCH_DIR_PREFIX));
  await Promise.all(
    abandoned.map(async (name) => {
      const path = join(cacheDir, name);
      try {
        if (now - (await stat(path)).mtimeMs > ABANDONED_AFTER_MS)
          await rm(path, { recursive: true, force: true });
      } catch {
        // Another process removed it first.
      }
    }),
  );
}

export async function statFile(path: string): Promise<Stats | undefined> {
  try {
    const st = await stat(path);
    return st.isFile() ? st : undefined;
  } catch {
    return undefined;
  }
}

/** True when the file starts with the GGUF magic; a cheap check that catches HTML error pages and truncation. */
export async function isGgufFile(path: string): Promise<boolean> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(path, "r");
    const head = Buffer.alloc(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    return bytesRead === 4 && head.equals(GGUF_MAGIC);
  } catch {
    return false;
  } finally {
    await handle?.close();
  }
}

/** Lowercase hex SHA-256 of a file, reporting bytes hashed so far. */
export async function sha256File(
  path: string,
  onBytes: (done: number) => void = () => {},
  signal?: AbortSignal,
): Promise<string> {
  const hash = createHash("sha256");
  let done = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    signal?.throwIfAborted();
    const bytes = chunk as Buffer;
    hash.update(bytes);
    done += bytes.length;
    onBytes(done);
  }
  return hash.digest("hex");
}

/**
 * What we know about a cached file. `source` ties the file to the configured source, so editing a model's source
 * re-fetches; size and mtime tie it to the exact bytes that were hashed.
 */
export interface Sidecar {
  sha256: string;
  source: string;
  size: number;
  mtimeMs: number;
}

export function sidecarPathFor(file: string): string {
  return `${file}.sha256`;
}

export async function readSidecar(path: string): Promise<Sidecar | undefined> {
  try {
    const value = JSON.parse(await readFile(path, "utf8")) as Partial<Sidecar>;
    if (
      typeof value.sha256 === "string" &&
      typeof value.source === "string" &&
      typeof value.size === "number" &&
      typeof value.mtimeMs === "number"
    ) {
      return { sha256: value.sha256, source: value.source, size: value.size, mtimeMs: value.mtimeMs };
    }
  } catch {
    // Missing or unreadable: the file is simply hashed again.
  }
  return undefined;
}

/** Writes via a unique temporary name and a rename, so concurrent writers never leave a torn sidecar. */
export async function writeSidecar(path: string, sidecar: Sidecar): Promise<void> {
  const tmp = `${path}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify(sidecar)}\n`);
    await rename(tmp, path);
  } finally {
    await rm(tmp, { force: true });
  }
}

/**
 * - valid: the sidecar vouches for these exact bytes (and the configured hash, when there is one);
 * - unverified: the file is there but must be hashed before use;
 * - stale: the file came from another source or has another hash; fetch it again;
 * - missing: no file.
 */
export type CacheVerdict = "valid" | "unverified" | "stale" | "missing";

export function judgeCachedFile(
  st: Stats | undefined,
  sidecar: Sidecar | undefined,
  source: string,
  expectedSha256: string | undefined,
): CacheVerdict {
  if (st === undefined) return "missing";
  if (sidecar === undefined) return "unverified";
  if (sidecar.source !== source) return "stale";
  if (sidecar.size !== st.size || sidecar.mtimeMs !== st.mtimeMs) return "unverified";
  return expectedSha256 === undefined || sidecar.sha256 === expectedSha256 ? "valid" : "stale";
}
