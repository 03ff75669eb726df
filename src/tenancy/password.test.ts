import { describe, expect, it } from "vitest";
import { generatePassword, hashPassword, verifyPassword } from "./password.js";

// Cheap parameters keep the unit test fast; the default parameters are exercised by the tenancy suites.
const FAST = { N: 1 << 10, r: 8, p: 1 };

describe("password hashing", () => {
  it("verifies the right password and refuses others", async () => {
    const stored = await hashPassword("correct horse battery", FAST);
    expect(stored).toMatch(/^scrypt\$1024\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(stored).not.toContain("correct horse");
    expect(await verifyPassword("correct horse battery", stored)).toBe(true);
    expect(await verifyPassword("correct horse batterY", stored)).toBe(false);
    expect(await verifyPassword("", stored)).toBe(false);
  });

  it("salts every hash", async () => {
    const a = await hashPassword("same password", FAST);
    const b = await hashPassword("same password", FAST);
    expect(a).not.toBe(b);
    expect(await verifyPassword("same password", b)).toBe(true);
  });

  it("refuses malformed stored values instead of throwing", async () => {
    for (const stored of ["", "plain", "bcrypt$1$2$3$a$b", "scrypt$x$8$1$YQ==$YQ==", "scrypt$1024$8$1$$"]) {
      expect(await verifyPassword("x", stored)).toBe(false);
    }
  });

  it("generates long random passwords", () => {
    const a = generatePassword();
    expect(a).toMatch(/^[0-9A-Za-z]{22}$/);
    expect(generatePassword()).not.toBe(a);
  });
});
