import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { base62 } from "../store/ids.js";
import {
  displayKey,
  generateApiKey,
  hashApiKey,
  hashesEqual,
  isWellFormedApiKey,
  maskPresentedKey,
} from "./api-key.js";

const secret = Buffer.alloc(32, 7);

describe("API key format", () => {
  it("is sk- and 43 base62 characters (256 random bits), different every time", () => {
    const keys = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const { key } = generateApiKey(secret);
      expect(key).toMatch(/^sk-[0-9A-Za-z]{43}$/);
      expect(isWellFormedApiKey(key)).toBe(true);
      keys.add(key);
    }
    expect(keys.size).toBe(200);
  });

  it("encodes every 32-byte value, including all-zero and all-ones, in 43 characters", () => {
    expect(base62(new Uint8Array(32))).toBe("0".repeat(43));
    expect(base62(new Uint8Array(32).fill(255))).toHaveLength(43);
    expect(base62(Uint8Array.of(1, 0))).toBe("048"); // 256 = 4*62 + 8, padded to the 3 digits any 2 bytes need
    for (let i = 0; i < 50; i++) expect(base62(randomBytes(32))).toHaveLength(43);
  });

  it("refuses anything that is not exactly that shape", () => {
    const { key } = generateApiKey(secret);
    for (const bad of [
      "",
      "sk-",
      key.slice(0, -1),
      `${key}a`,
      key.replace("sk-", "pk-"),
      `${key.slice(0, -1)}-`,
      ` ${key}`,
    ]) {
      expect(isWellFormedApiKey(bad), bad).toBe(false);
    }
  });

  it("keeps only a display prefix and the last four characters besides the hash", () => {
    const generated = generateApiKey(secret);
    expect(generated.prefix).toBe(generated.key.slice(0, 7));
    expect(generated.last4).toBe(generated.key.slice(-4));
    expect(displayKey(generated.prefix, generated.last4)).toBe(
      `${generated.key.slice(0, 7)}...${generated.key.slice(-4)}`,
    );
  });
});

describe("key hashing", () => {
  it("is HMAC-SHA-256 under the server secret, as lowercase hex", () => {
    // Fixed vector: a change of algorithm or encoding would orphan every stored key.
    expect(hashApiKey(secret, `sk-${"a".repeat(43)}`)).toBe(
      "15559a82f18c9e6372d5ebeb6ebc62d383d7a73087d9829f2019b374639797cb",
    );
  });

  it("depends on the server secret, so a leaked table is useless without it", () => {
    const { key, hash } = generateApiKey(secret);
    expect(hashApiKey(secret, key)).toBe(hash);
    expect(hashApiKey(Buffer.alloc(32, 8), key)).not.toBe(hash);
    expect(hash).not.toContain(key.slice(3));
  });

  it("compares hashes by value only", () => {
    const { hash } = generateApiKey(secret);
    expect(hashesEqual(hash, hash)).toBe(true);
    expect(hashesEqual(hash, `${hash.slice(0, -1)}${hash.endsWith("0") ? "1" : "0"}`)).toBe(false);
    expect(hashesEqual(hash, hash.slice(0, 62))).toBe(false);
    expect(hashesEqual("", "")).toBe(false);
  });
});

describe("maskPresentedKey", () => {
  it("shows a few leading and the last four characters only", () => {
    const key = `sk-ab${"q".repeat(38)}wxyz`;
    const masked = maskPresentedKey(key);
    expect(masked.startsWith("sk-ab")).toBe(true);
    expect(masked.endsWith("wxyz")).toBe(true);
    expect(masked).not.toContain("q");
  });

  it("masks short values entirely and caps long ones", () => {
    expect(maskPresentedKey("hunter2")).toBe("*******");
    expect(maskPresentedKey("a")).toBe("***");
    expect(maskPresentedKey("q".repeat(5000)).length).toBeLessThan(60);
  });
});
