// Prefixed random identifiers (`org_…`, `key_…`): the prefix registry and the one generator.
import { randomBytes } from "node:crypto";

export const ID_PREFIXES = Object.freeze({
  org: "org",
  key: "key",
  user: "user",
  invitation: "inv",
  flash: "flash",
  // The Responses API's objects, as OpenAI spells them: a response and its items (messages, function calls and their
  // outputs, reasoning).
  response: "resp",
  message: "msg",
  functionCall: "fc",
  functionCallOutput: "fco",
  reasoning: "rs",
} as const);
export type IdKind = keyof typeof ID_PREFIXES;

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/**
 * Base62 text of `bytes`, left-padded to the length any value of that many bytes needs, so every output of one
 * size has the same length (a fixed-length format is easy to validate). Base62 avoids `-`/`_`, so a double
 * click selects the whole string.
 */
export function base62(bytes: Uint8Array): string {
  const width = Math.ceil((bytes.length * 8) / Math.log2(62));
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  let out = "";
  while (value > 0n) {
    out = BASE62[Number(value % 62n)] + out;
    value /= 62n;
  }
  return out.padStart(width, "0");
}

/** Random bytes drawn per system call for `idBytes`: one call serves hundreds of request and completion ids. */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let pooled = 0;

/**
 * `length` random bytes for an identifier that is not a secret (a request id, a completion id), from a pool the
 * kernel's CSPRNG refills: one `getrandom` per few hundred ids instead of one per id, which costs tens of
 * microseconds on a virtual machine, on every request. Secrets (keys, tokens, salts) take `randomBytes` directly.
 */
export function idBytes(length: number): Buffer {
  if (length > POOL_BYTES) return randomBytes(length);
  if (pooled + length > pool.length) {
    pool = randomBytes(POOL_BYTES);
    pooled = 0;
  }
  const bytes = pool.subarray(pooled, pooled + length);
  pooled += length;
  return bytes;
}

/**
 * A new id for an object that is not a secret (a response, its items), from the pooled bytes of `idBytes`: a
 * response and its items take several ids per request. Same form as `newId`.
 */
export function newObjectId(kind: IdKind): string {
  return `${ID_PREFIXES[kind]}_${base62(idBytes(16))}`;
}

/** A new id such as `org_3kTmd9x2QbZrW7vYp1Lc` (16 random bytes: collisions are not a concern). */
export function newId(kind: IdKind): string {
  return `${ID_PREFIXES[kind]}_${base62(randomBytes(16))}`;
}
