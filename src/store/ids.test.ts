// Identifiers: base62 widths, prefixes, and the pooled random bytes of request and completion ids.
import { describe, expect, it } from "vitest";
import { base62, idBytes, newId } from "./ids.js";

describe("ids", () => {
  it("base62 gives every value of one byte length the same width", () => {
    expect(base62(new Uint8Array(16))).toBe("0".repeat(22));
    expect(base62(new Uint8Array(16).fill(255))).toHaveLength(22);
    expect(newId("org")).toMatch(/^org_[0-9A-Za-z]{22}$/);
  });

  it("idBytes hands out fresh bytes of the length asked, across pool refills, never the same slice twice", () => {
    const seen = new Set<string>();
    // 3,000 × 12 bytes spans several 4 KiB pools; a repeat of 96 random bits would mean a slice was reused.
    for (let i = 0; i < 3_000; i++) {
      const bytes = idBytes(12);
      expect(bytes).toHaveLength(12);
      seen.add(bytes.toString("hex"));
    }
    expect(seen.size).toBe(3_000);
    expect(idBytes(5000)).toHaveLength(5000);
  });
});
