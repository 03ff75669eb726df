// Reads a server secret from a 0600 file in the data dir, creating it on first start.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
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
