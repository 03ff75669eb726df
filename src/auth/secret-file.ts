// Reads a server secret from a 0600 file in the data dir, creating it on first start; writes one; and tells which
// secret paths other users of the machine could read.
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/**
 * The trimmed content of `path`; when the file does not exist, writes `create()` with mode 0600 first.
 * The exclusive create (`wx`) means two processes starting together on one data dir agree on one value.
 */
export function readOrCreateSecretFile(path: string, create: () => string): string {
  const existing = tryRead(path);
  if (existing !== undefined) return existing;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(path, `${create()}\n`, { flag: "wx", mode: 0o600 });
    // The umask may have narrowed nothing but could not widen; chmod makes 0600 explicit on every platform.
    chmodSync(path, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  const created = tryRead(path);
  if (created === undefined) throw new Error(`${path} is empty`);
  return created;
}

/** The trimmed content of `path`, or undefined when it does not exist or is empty. */
export function readSecretFile(path: string): string | undefined {
  return tryRead(path);
}

function tryRead(path: string): string | undefined {
  try {
    const text = readFileSync(path, "utf8").trim();
    return text === "" ? undefined : text;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * Writes `text` to `path` with mode 0600, replacing any earlier file: written beside it first and renamed, so the
 * secret never sits in a file with wider permissions, not even one left by an earlier run.
 */
export function writeSecretFile(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const partial = `${path}.${process.pid}.partial`;
  try {
    writeFileSync(partial, text, { flag: "wx", mode: 0o600 });
    chmodSync(partial, 0o600);
    renameSync(partial, path);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

/**
 * The permission bits of `path` when its group or other users have any access to it (a secret file or the data
 * dir holding them should be the owner's alone); undefined when they have none or the path does not exist.
 */
export function accessByOthers(path: string): number | undefined {
  let mode: number;
  try {
    mode = statSync(path).mode & 0o777;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  return (mode & 0o077) === 0 ? undefined : mode;
}
