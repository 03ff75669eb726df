// The prompt store: what it saves (not what it holds already), what it serves (the longest prefix of the scope),
// what it evicts (least recently used, never a pinned entry) and how a failed save or load ends.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createPromptStore, MAX_ENTRIES, PromptStore, type StatefulSequence } from "./prompt-store.js";

/** A sequence whose state file is its tokens, padded to `bytes`. */
class FakeSequence implements StatefulSequence {
  constructor(
    public contextTokens: number[],
    private readonly bytes = 100,
  ) {}
  async saveStateToFile(path: string): Promise<void> {
    const text = JSON.stringify(this.contextTokens);
    writeFileSync(path, text.padEnd(this.bytes, " "));
  }
  async loadStateFromFile(path: string): Promise<void> {
    this.contextTokens = JSON.parse(await readFile(path, "utf8")) as number[];
  }
}

const dirs: string[] = [];
function store(capacity: number): { store: PromptStore; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "prompt-store-test-"));
  dirs.push(dir);
  return { store: new PromptStore(dir, capacity), dir };
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("PromptStore", () => {
  it("serves the entry of the scope sharing the longest prefix, never the whole prompt, never another scope's", async () => {
    const { store: s } = store(10_000);
    await s.save(new FakeSequence([1, 2, 3, 4, 5]), "a");
    await s.save(new FakeSequence([1, 2, 9]), "a");
    await s.save(new FakeSequence([1, 2, 3, 4, 5, 6, 7]), "b");
    expect(s.match([1, 2, 3, 4, 8], "a")).toMatchObject({ shared: 4 });
    expect(s.match([1, 2, 3, 4, 5], "a")).toMatchObject({ shared: 4 });
    expect(s.match([1, 2, 9, 9], "a")).toMatchObject({ shared: 3 });
    expect(s.match([7, 7], "a")).toBeUndefined();
    expect(s.match([1, 2, 3, 4, 5, 6, 7, 8], "b")).toMatchObject({ shared: 7 });
    expect(s.match([1, 2, 3], "c")).toBeUndefined();
  });

  it("does not save what an entry holds already, and drops the entries a new one extends", async () => {
    const { store: s, dir } = store(10_000);
    expect(await s.save(new FakeSequence([1, 2, 3]), "a")).toBe(true);
    expect(await s.save(new FakeSequence([1, 2]), "a")).toBe(false);
    expect(await s.save(new FakeSequence([1, 2, 3, 4]), "a")).toBe(true);
    expect(s.size).toBe(1);
    expect(s.bytes).toBe(100);
    // The same tokens in another scope are another entry.
    expect(await s.save(new FakeSequence([1, 2, 3]), "b")).toBe(true);
    expect(s.size).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(readdirSync(dir)).toHaveLength(2);
  });

  it("loads an entry into a sequence, and evicts the least recently used entries past its capacity", async () => {
    const { store: s, dir } = store(450);
    for (const t of [1, 2, 3, 4]) await s.save(new FakeSequence([t, t]), "a");
    const first = s.match([1, 1, 5], "a");
    const target = new FakeSequence([9, 9, 9]);
    expect(await s.load(first?.id ?? -1, target)).toBe(true);
    expect(target.contextTokens).toEqual([1, 1]);
    // [1, 1] was used last: the fifth entry pushes out [2, 2], the least recently used.
    await s.save(new FakeSequence([5, 5]), "a");
    expect(s.size).toBe(4);
    expect(s.bytes).toBe(400);
    expect(s.match([2, 2, 5], "a")).toBeUndefined();
    expect(s.match([1, 1, 5], "a")).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(readdirSync(dir)).toHaveLength(4);
  });

  it("never evicts an entry a lease has pinned until it is loaded or unpinned", async () => {
    const { store: s } = store(450);
    await s.save(new FakeSequence([1, 1]), "a");
    const pinned = s.match([1, 1, 5], "a");
    s.pin(pinned?.id ?? -1);
    for (const t of [2, 3, 4, 5]) await s.save(new FakeSequence([t, t]), "a");
    // Over capacity with the oldest entry pinned: the next least recently used one went instead.
    expect(s.match([1, 1, 5], "a")).toBeDefined();
    expect(s.match([2, 2, 5], "a")).toBeUndefined();
    s.unpin(pinned?.id ?? -1);
    await s.save(new FakeSequence([6, 6]), "a");
    expect(s.match([1, 1, 5], "a")).toBeUndefined();
    expect(s.bytes).toBeLessThanOrEqual(450);
  });

  it("does not write a state larger than a quarter of the store, and keeps at most MAX_ENTRIES", async () => {
    const { store: s } = store(1000);
    expect(await s.save(new FakeSequence([1, 2], 200), "a")).toBe(true);
    // 100 bytes per token so far: 3 tokens would take 300 of 1,000 bytes.
    expect(await s.save(new FakeSequence([7, 8, 9], 300), "a")).toBe(false);
    expect(s.size).toBe(1);
    const many = store(Number.MAX_SAFE_INTEGER).store;
    for (let t = 0; t < MAX_ENTRIES + 5; t++) await many.save(new FakeSequence([t], 10), "a");
    expect(many.size).toBe(MAX_ENTRIES);
    expect(many.match([0, 1], "a")).toBeUndefined();
    expect(many.match([MAX_ENTRIES + 4, 1], "a")).toBeDefined();
  });

  it("a failed save leaves no entry and no file; a failed load drops the entry", async () => {
    const { store: s, dir } = store(10_000);
    const failing: StatefulSequence = {
      contextTokens: [1, 2, 3],
      saveStateToFile: async (path) => {
        writeFileSync(path, "partial");
        throw new Error("ENOSPC");
      },
      loadStateFromFile: async () => undefined,
    };
    expect(await s.save(failing, "a")).toBe(false);
    expect(s.size).toBe(0);
    expect(readdirSync(dir)).toHaveLength(0);
    await s.save(new FakeSequence([4, 5, 6]), "a");
    const match = s.match([4, 5, 6, 7], "a");
    const broken: StatefulSequence = {
      contextTokens: [],
      saveStateToFile: async () => undefined,
      loadStateFromFile: async () => {
        throw new Error("bad file");
      },
    };
    expect(await s.load(match?.id ?? -1, broken)).toBe(false);
    expect(s.size).toBe(0);
    expect(await s.load(12345, new FakeSequence([]))).toBe(false);
  });

  it("is made in a private folder, capped by half the free space, and removed with its files", async () => {
    expect(await createPromptStore(0, tmpdir())).toBeUndefined();
    expect(await createPromptStore(1024, join(tmpdir(), "no-such-folder-for-hearth"))).toBeUndefined();
    const s = await createPromptStore(Number.MAX_SAFE_INTEGER, tmpdir());
    if (s === undefined) throw new Error("no store");
    expect(s.capacityBytes).toBeLessThan(Number.MAX_SAFE_INTEGER);
    expect(s.capacityBytes).toBeGreaterThan(0);
    await s.save(new FakeSequence([1, 2]), "a");
    expect(s.dir.startsWith(join(tmpdir(), `hearth-prompt-cache-${process.pid}-`))).toBe(true);
    expect((statSync(s.dir).mode & 0o777).toString(8)).toBe("700");
    expect(readdirSync(s.dir)).toHaveLength(1);
    await s.dispose();
    expect(s.size).toBe(0);
    expect(existsSync(s.dir)).toBe(false);
  });

  it("removes the folders a killed process left behind, and keeps those of live processes", async () => {
    const parent = mkdtempSync(join(tmpdir(), "prompt-store-parent-"));
    dirs.push(parent);
    const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], {
      encoding: "utf8",
    });
    const dead = join(parent, `hearth-prompt-cache-${child.stdout}-abc123`);
    const alive = join(parent, `hearth-prompt-cache-${process.pid}-def456`);
    const other = join(parent, "hearth-prompt-cache-notapid");
    for (const dir of [dead, alive, other]) {
      mkdirSync(dir);
      writeFileSync(join(dir, "1.state"), "x");
    }
    const s = await createPromptStore(1024 * 1024, parent);
    expect(s).toBeDefined();
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(alive)).toBe(true);
    expect(existsSync(other)).toBe(true);
    await s?.dispose();
  });
});
