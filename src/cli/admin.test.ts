import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminApp } from "../admin/admin-app.js";
import { loadOrCreateAdminToken } from "../admin/admin-token.js";
import type { AppEnv } from "../app/env.js";
import type { HearthConfig } from "../config/schema.js";
import { toApiError } from "../errors/api-error.js";
import { openStore, type Store } from "../store/open-store.js";
import { TenancyService } from "../tenancy/tenancy-service.js";
import { type AdminCommandsOptions, registerAdminCommands } from "./admin.js";

const SERVER_URL = "http://hearth.test:8000";

let dir: string;
let store: Store;
let tenancy: TenancyService;
let adminToken: string;
let app: Hono<AppEnv>;

function configFor(overrides: Partial<HearthConfig> = {}): HearthConfig {
  return {
    server: { host: "127.0.0.1", port: 8000, maxBodyBytes: 1 << 20, maxN: 8, keepAliveMs: 5000 },
    models: [],
    dataDir: dir,
    databaseUrl: undefined,
    redisUrl: undefined,
    modelsDir: dir,
    adminToken: undefined,
    serverUrl: SERVER_URL,
    logLevel: "silent",
    ...overrides,
  };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hearth-cli-"));
  store = await openStore({ dataDir: dir });
  tenancy = new TenancyService(store.db, { keySecret: Buffer.alloc(32, 5), modelIds: ["tiny", "small"] });
  // The CLI finds the token the server created in the data dir.
  adminToken = loadOrCreateAdminToken({ dataDir: dir, adminToken: undefined });
  app = new Hono<AppEnv>();
  app.route("/admin/v1", createAdminApp(tenancy, adminToken));
  app.onError((err, c) => {
    const apiError = toApiError(err);
    return c.json(apiError.toBody(), apiError.status as ContentfulStatusCode);
  });
});

afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  requests: string[];
}

async function hearth(
  args: string[],
  config: HearthConfig = configFor(),
  fetchImpl?: AdminCommandsOptions["fetch"],
): Promise<RunResult> {
  const result: RunResult = { stdout: "", stderr: "", exitCode: 0, requests: [] };
  const inMemoryFetch: typeof fetch = async (input, init) => {
    const url = String(input);
    result.requests.push(`${init?.method ?? "GET"} ${url}`);
    expect(url.startsWith(`${SERVER_URL}/admin/v1/`)).toBe(true);
    return app.request(url, init);
  };
  const program = new Command("hearth").exitOverride();
  registerAdminCommands(program, () => config, {
    fetch: fetchImpl ?? inMemoryFetch,
    stdout: (text) => {
      result.stdout += text;
    },
    stderr: (text) => {
      result.stderr += text;
    },
    setExitCode: (code) => {
      result.exitCode = code;
    },
  });
  await program.parseAsync(args, { from: "user" });
  return result;
}

function lastLine(text: string): string {
  return text.trimEnd().split("\n").at(-1) ?? "";
}

describe("hearth orgs", () => {
  it("creates, lists, grants and revokes", async () => {
    const created = await hearth(["orgs", "create", "acme", "--models", "tiny, small"]);
    expect(created).toMatchObject({ stderr: "", exitCode: 0 });
    expect(created.stdout).toContain('Created organization "acme"');
    expect((await tenancy.getOrgByName("acme"))?.models).toEqual(["small", "tiny"]);

    const listed = await hearth(["orgs", "list", "--json"]);
    const orgs = JSON.parse(listed.stdout) as { name: string; models: string[] }[];
    expect(orgs).toEqual([expect.objectContaining({ name: "acme", models: ["small", "tiny"] })]);
    expect((await hearth(["orgs", "list"])).stdout).toMatch(/^NAME\s+ID\s+MODELS\s+CREATED\nacme\s+org_/);

    expect((await hearth(["orgs", "revoke", "acme", "tiny"])).exitCode).toBe(0);
    expect((await tenancy.getOrgByName("acme"))?.models).toEqual(["small"]);
    expect((await hearth(["orgs", "grant", "acme", "tiny"])).stdout).toContain("small, tiny");
  });

  it("prints the server's error message on one stderr line and exits 1", async () => {
    const duplicate = await hearth(["orgs", "create", "acme"]);
    expect(duplicate).toMatchObject({ stdout: "", exitCode: 1 });
    expect(duplicate.stderr).toBe('hearth: Organization "acme" already exists.\n');
    const unknown = await hearth(["orgs", "grant", "acme", "huge"]);
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stderr).toMatch(/^hearth: Unknown model "huge"[^\n]*\n$/);
    expect((await hearth(["orgs", "grant", "nobody", "tiny"])).stderr).toBe(
      'hearth: Organization "nobody" does not exist.\n',
    );
  });
});

describe("hearth keys", () => {
  it("prints the new secret alone as the last stdout line", async () => {
    const result = await hearth(["keys", "create", "--org", "acme", "--name", "ci"]);
    expect(result).toMatchObject({ stderr: "", exitCode: 0 });
    const key = lastLine(result.stdout);
    expect(key).toMatch(/^sk-[0-9A-Za-z]{43}$/);
    expect((await tenancy.verifyKey(key))?.orgName).toBe("acme");
  });

  it("prints one JSON object with --json", async () => {
    const result = await hearth(["keys", "create", "--org", "acme", "--json", "--expires-in", "60"]);
    const created = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(created).toMatchObject({ org: "acme", name: null });
    expect(created.id).toMatch(/^key_/);
    expect(created.key).toMatch(/^sk-/);
    expect(created.expires_at).not.toBeNull();
  });

  it("lists keys without secrets and revokes them", async () => {
    const created = await tenancy.createKey("acme", { name: "to-revoke" });
    const listed = await hearth(["keys", "list", "--org", "acme", "--json"]);
    const keys = JSON.parse(listed.stdout) as { id: string; name: string | null }[];
    expect(keys.map((k) => k.name)).toContain("to-revoke");
    expect(listed.stdout).not.toContain(created.key);
    const table = await hearth(["keys", "list", "--org", "acme"]);
    expect(table.stdout).toMatch(/^ID\s+NAME\s+KEY\s+CREATED\s+LAST USED\s+STATUS\n/);
    expect(table.stdout).toContain(`${created.key.slice(0, 7)}...${created.key.slice(-4)}`);
    expect(table.stdout).not.toContain(created.key);

    const revoked = await hearth(["keys", "revoke", created.id]);
    expect(revoked).toMatchObject({ stderr: "", exitCode: 0 });
    expect(await tenancy.verifyKey(created.key)).toBeNull();
    expect((await hearth(["keys", "list", "--org", "acme"])).stdout).toMatch(/to-revoke.*revoked/);

    const missing = await hearth(["keys", "revoke", "key_missing"]);
    expect(missing).toMatchObject({ exitCode: 1, stderr: 'hearth: API key "key_missing" does not exist.\n' });
  });
});

describe("reaching the server", () => {
  it("says so when the server cannot be reached", async () => {
    const refused = await hearth(
      ["orgs", "list"],
      configFor({ serverUrl: "http://127.0.0.1:9/" }),
      globalThis.fetch,
    );
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toBe(
      "hearth: cannot reach the Hearth server at http://127.0.0.1:9 (is it running? set HEARTH_URL)\n",
    );
  });

  it("refuses to run without an admin token, and the server refuses a wrong one", async () => {
    const emptyDir = mkdtempSync(join(tmpdir(), "hearth-cli-empty-"));
    try {
      const noToken = await hearth(["orgs", "list"], configFor({ dataDir: emptyDir }));
      expect(noToken.exitCode).toBe(1);
      expect(noToken.stderr).toMatch(/^hearth: no admin token: set HEARTH_ADMIN_TOKEN/);
      expect(noToken.requests).toEqual([]);
    } finally {
      rmSync(emptyDir, { recursive: true, force: true });
    }
    const wrong = await hearth(["orgs", "list"], configFor({ adminToken: "wrong" }));
    expect(wrong).toMatchObject({ exitCode: 1, stderr: "hearth: Missing or invalid admin token.\n" });
  });
});
