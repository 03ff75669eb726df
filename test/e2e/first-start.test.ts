// The real `hearth serve` process at start (issue 12, items 3 and 9): an admin token shorter than 32 characters is
// refused before anything starts; the first-start credentials are also written 0600 in the data dir; the bootstrap
// key expires; a data dir or secret file other users can read is warned about. No model is loaded: the one
// configured model is served by an upstream endpoint that does not exist.
import type { ChildProcess } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { FIRST_START_CREDENTIALS_FILE } from "../../src/app/first-start.js";
import { pgliteTemplate } from "../support/pglite-template.js";
import { type SpawnedServe, spawnServe } from "../support/server-process.js";

const DAY_MS = 24 * 60 * 60 * 1000;
const dirs: string[] = [];
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A data dir with an empty PGlite cluster, and a config whose only model is upstream (nothing to load). */
async function setUp(): Promise<{ dataDir: string; configPath: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), "hearth-first-start-"));
  dirs.push(dataDir);
  cpSync(await pgliteTemplate(), join(dataDir, "pg"), { recursive: true });
  const configPath = join(mkdtempSync(join(tmpdir(), "hearth-first-start-cfg-")), "hearth.yaml");
  dirs.push(join(configPath, ".."));
  writeFileSync(
    configPath,
    "models:\n  - id: remote\n    upstream:\n      endpoints:\n        - url: http://127.0.0.1:9/v1\n      contextSize: 2048\n",
  );
  return { dataDir, configPath };
}

type Served = SpawnedServe;

function serve(dataDir: string, configPath: string, env: Record<string, string> = {}): Served {
  // The inherited environment must not choose the admin token.
  const served = spawnServe({
    HEARTH_ADMIN_TOKEN: undefined,
    HEARTH_DATA_DIR: dataDir,
    HEARTH_CONFIG: configPath,
    ...env,
  });
  children.push(served.child);
  return served;
}

/** Waits until the output matches `pattern` (or the process exits: then the test fails with its output). */
async function waitFor(served: Served, pattern: RegExp): Promise<RegExpExecArray> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const match = pattern.exec(served.output());
    if (match !== null) return match;
    if (served.child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no ${pattern} in the output of hearth serve:\n${served.output()}`);
}

/** Whether the process exited (with its code) or started listening, whichever came first. */
async function exitOrListen(served: Served): Promise<{ exitCode: number | null } | "listening"> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (served.child.exitCode !== null) return { exitCode: served.child.exitCode };
    if (served.output().includes('"msg":"listening"')) {
      served.child.kill("SIGKILL");
      return "listening";
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`hearth serve neither exited nor listened:\n${served.output()}`);
}

describe("an admin token shorter than 32 characters", () => {
  it("from HEARTH_ADMIN_TOKEN: the server refuses to start, saying why", async () => {
    const { dataDir, configPath } = await setUp();
    const served = serve(dataDir, configPath, { HEARTH_ADMIN_TOKEN: "hunter2-but-short" });
    expect(await exitOrListen(served)).toEqual({ exitCode: 1 });
    expect(served.output()).toContain(
      "hearth: HEARTH_ADMIN_TOKEN is 17 characters long; an admin token must have at least 32",
    );
    expect(served.output()).not.toContain("hunter2-but-short");
  });

  it("from the data dir's admin-token file: refused the same way", async () => {
    const { dataDir, configPath } = await setUp();
    writeFileSync(join(dataDir, "admin-token"), "short\n", { mode: 0o600 });
    const served = serve(dataDir, configPath);
    expect(await exitOrListen(served)).toEqual({ exitCode: 1 });
    expect(served.output()).toContain(
      `hearth: The admin token in ${join(dataDir, "admin-token")} is 5 characters long`,
    );
  });
});

describe("the first start", () => {
  it("writes the credentials 0600 in the data dir, gives the key an expiry, and warns about open permissions", async () => {
    const { dataDir, configPath } = await setUp();
    // As `mkdir` with a common umask leaves them: readable by everyone.
    chmodSync(dataDir, 0o755);
    const token = `hearth-admin-${"x".repeat(40)}`;
    writeFileSync(join(dataDir, "admin-token"), `${token}\n`);
    chmodSync(join(dataDir, "admin-token"), 0o644);
    const started = Date.now();
    const served = serve(dataDir, configPath);
    const saved = await waitFor(served, /also written to (\S+) \(mode 0600\)/);
    const path = join(dataDir, FIRST_START_CREDENTIALS_FILE);
    expect(saved[1]).toBe(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const key = /^\s+(sk-[A-Za-z0-9_-]+)\s*$/m.exec(served.output())?.[1] ?? "";
    const password = /^\s+Password:\s+(\S+)$/m.exec(served.output())?.[1] ?? "";
    expect(key).not.toBe("");
    expect(password).not.toBe("");
    const credentials = readFileSync(path, "utf8");
    expect(credentials).toContain(`API key:      ${key}`);
    expect(credentials).toContain(`Password:     ${password}`);

    // The expiry is the default 7 days, said on the console and recorded on the key.
    const printed = /It expires at (\S+): create lasting keys/.exec(served.output())?.[1];
    const expiresAt = Date.parse(printed ?? "");
    expect(expiresAt).toBeGreaterThanOrEqual(started + 7 * DAY_MS - 1000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 7 * DAY_MS);
    const url = (await waitFor(served, /"url":"(http:\/\/[^"]+)"/))[1];
    const keys = await fetch(`${url}/admin/v1/orgs/default/keys`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const listed = (await keys.json()) as { data: { name: string; expires_at: number | string | null }[] };
    expect(listed.data).toHaveLength(1);
    expect(listed.data[0]?.name).toBe("bootstrap");
    expect(listed.data[0]?.expires_at).not.toBeNull();

    // Other users could read the data dir and the admin token: both are named in a warning.
    for (const [file, mode] of [
      [dataDir, "755"],
      [join(dataDir, "admin-token"), "644"],
    ] as const) {
      const warning = served
        .output()
        .split("\n")
        .find((line) => line.includes('"level":40') && line.includes(`"path":"${file}"`));
      expect(warning, `a warning about ${file}`).toBeDefined();
      expect(warning).toContain(`"mode":"${mode}"`);
    }
    expect(served.output()).not.toContain(`"path":"${join(dataDir, "key-secret")}"`);
    served.child.kill("SIGTERM");
    expect(await served.exited).toBe(0);
    expect(existsSync(path)).toBe(true);
  });
});
