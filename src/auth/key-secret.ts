// The server secret that API keys are HMAC'd with: HEARTH_KEY_SECRET, or <dataDir>/key-secret created on first start.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { HearthConfig } from "../config/schema.js";
import { readOrCreateSecretFile } from "./secret-file.js";

export const KEY_SECRET_FILE = "key-secret";
const KEY_SECRET_PATTERN = /^[0-9a-fA-F]{64}$/;

export class KeySecretError extends Error {
  override name = "KeySecretError";
}

/**
 * 32 bytes of HMAC key. Replicas sharing one PostgreSQL must share this value (set HEARTH_KEY_SECRET to the
 * content of one replica's key-secret file), or keys created on one are unknown on the others.
 */
export function loadOrCreateKeySecret(config: Pick<HearthConfig, "dataDir" | "keySecret">): Buffer {
  if (config.keySecret !== undefined) return parseKeySecret(config.keySecret, "HEARTH_KEY_SECRET");
  const path = join(config.dataDir, KEY_SECRET_FILE);
  const hex = readOrCreateSecretFile(path, () => randomBytes(32).toString("hex"));
  return parseKeySecret(hex, path);
}

export function parseKeySecret(hex: string, where: string): Buffer {
  if (!KEY_SECRET_PATTERN.test(hex)) {
    throw new KeySecretError(`${where} must hold 64 hex characters (32 bytes).`);
  }
  return Buffer.from(hex, "hex");
}
