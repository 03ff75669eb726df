import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { KeySecretError, loadOrCreateKeySecret } from "./key-secret.js";
import { readOrCreateSecretFile } from "./secret-file.js";

let dataDir: string;
beforeEach(() => {
  dataDir = join(mkdtempSync(join(tmpdir(), "hearth-secret-")), "data");
});
afterEach(() => rmSync(join(dataDir, ".."), { recursive: true, force: true }));

describe("loadOrCreateKeySecret", () => {
  it("creates 32 random bytes in <dataDir>/key-secret with mode 0600 on first start, then reuses them", () => {
    const first = loadOrCreateKeySecret({ dataDir });
    expect(first).toHaveLength(32);
    const path = join(dataDir, "key-secret");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, "utf8").trim()).toBe(first.toString("hex"));
    expect(loadOrCreateKeySecret({ dataDir }).equals(first)).toBe(true);
  });

  it("uses HEARTH_KEY_SECRET when configured and writes no file", () => {
    const hex = "ab".repeat(32);
    expect(loadOrCreateKeySecret({ dataDir, keySecret: hex }).toString("hex")).toBe(hex);
    expect(() => statSync(join(dataDir, "key-secret"))).toThrow();
  });

  it("refuses a secret that is not 64 hex characters", () => {
    expect(() => loadOrCreateKeySecret({ dataDir, keySecret: "short" })).toThrow(KeySecretError);
  });
});

describe("readOrCreateSecretFile", () => {
  it("keeps a value another process wrote first", () => {
    const path = join(dataDir, "token");
    expect(readOrCreateSecretFile(path, () => "first")).toBe("first");
    expect(readOrCreateSecretFile(path, () => "second")).toBe("first");
    writeFileSync(path, "  edited\n");
    expect(readOrCreateSecretFile(path, () => "third")).toBe("edited");
  });
});
