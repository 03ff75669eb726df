// The operator's admin token: HEARTH_ADMIN_TOKEN, or <dataDir>/admin-token (0600) created on the server's first start.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { ConfigError } from "../config/load.js";
import type { HearthConfig } from "../config/schema.js";
import { base62 } from "../store/ids.js";
import { readOrCreateSecretFile, readSecretFile } from "./secret-file.js";

export const ADMIN_TOKEN_FILE = "admin-token";
// A distinct prefix, so an admin token pasted where an API key belongs (or the reverse) is obvious to a person.
const ADMIN_TOKEN_PREFIX = "hearth-admin-";

export function adminTokenPath(config: Pick<HearthConfig, "dataDir">): string {
  return join(config.dataDir, ADMIN_TOKEN_FILE);
}

/** Shorter admin tokens are refused at start: the token opens every org, and guessing must stay hopeless. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

/**
 * For the server: the configured token, or the data dir's token file, created on first start. A token shorter
 * than MIN_ADMIN_TOKEN_LENGTH (set by hand in HEARTH_ADMIN_TOKEN or the file) is a ConfigError: nothing starts.
 */
export function loadOrCreateAdminToken(config: Pick<HearthConfig, "dataDir" | "adminToken">): string {
  const where =
    config.adminToken === undefined ? `The admin token in ${adminTokenPath(config)}` : "HEARTH_ADMIN_TOKEN";
  const token =
    config.adminToken ??
    readOrCreateSecretFile(adminTokenPath(config), () => ADMIN_TOKEN_PREFIX + base62(randomBytes(32)));
  if (token.length < MIN_ADMIN_TOKEN_LENGTH) {
    throw new ConfigError(
      `${where} is ${token.length} characters long; an admin token must have at least ${MIN_ADMIN_TOKEN_LENGTH} ` +
        "(a random value, e.g. from `openssl rand -hex 32`). The server was not started.",
    );
  }
  return token;
}

/** For the CLI: the configured token or the data dir's token file; never creates one. */
export function readAdminToken(config: Pick<HearthConfig, "dataDir" | "adminToken">): string | undefined {
  return config.adminToken ?? readSecretFile(adminTokenPath(config));
}

/** Constant-time comparison; hashing first gives equal lengths, so not even the token's length leaks. */
export function adminTokenMatches(expected: string, presented: string): boolean {
  const a = createHash("sha256").update(expected, "utf8").digest();
  const b = createHash("sha256").update(presented, "utf8").digest();
  return timingSafeEqual(a, b);
}
