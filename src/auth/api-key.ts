// API key format, generation, keyed hashing and masking; the secret exists in clear only in these functions' callers.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { base62 } from "../store/ids.js";

export const API_KEY_PREFIX = "sk-";
/** 32 random bytes = 256 bits of entropy. */
const KEY_RANDOM_BYTES = 32;
/** Length of base62(32 bytes). */
const KEY_BODY_LENGTH = 43;
const API_KEY_PATTERN = /^sk-[0-9A-Za-z]{43}$/;
/** How many leading characters of a key are kept for display ("sk-" plus 4). */
const DISPLAY_PREFIX_LENGTH = 7;

export interface GeneratedApiKey {
  /** The secret: shown once, never stored or logged. */
  key: string;
  /** HMAC-SHA-256 hex of the key: what the store keeps and looks keys up by. */
  hash: string;
  /** Leading characters, enough to recognise the key in a list. */
  prefix: string;
  last4: string;
}

/** True when `value` has the shape of a Hearth key; anything else is refused without a database lookup. */
export function isWellFormedApiKey(value: string): boolean {
  return value.length === API_KEY_PREFIX.length + KEY_BODY_LENGTH && API_KEY_PATTERN.test(value);
}

/** HMAC-SHA-256 of the key under the server's key secret, as lowercase hex. */
export function hashApiKey(secret: Uint8Array, key: string): string {
  return createHmac("sha256", secret).update(key, "utf8").digest("hex");
}

/** Constant-time equality of two hex hashes (false for different lengths). */
export function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, "hex");
  const right = Buffer.from(b, "hex");
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}

export function generateApiKey(secret: Uint8Array): GeneratedApiKey {
  const key = API_KEY_PREFIX + base62(randomBytes(KEY_RANDOM_BYTES));
  return {
    key,
    hash: hashApiKey(secret, key),
    prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
    last4: key.slice(-4),
  };
}

/** How a stored key is shown in lists: "sk-AbCd...wxyz". */
export function displayKey(prefix: string, last4: string): string {
  return `${prefix}...${last4}`;
}

/**
 * A presented (wrong) key masked for an error message, as OpenAI does: a few leading and the last four
 * characters, stars between. Short values are masked entirely so the message never echoes most of a secret.
 */
export function maskPresentedKey(value: string): string {
  if (value.length < 12) return "*".repeat(Math.max(value.length, 3));
  const stars = Math.min(value.length - 9, 40);
  return `${value.slice(0, 5)}${"*".repeat(stars)}${value.slice(-4)}`;
}
