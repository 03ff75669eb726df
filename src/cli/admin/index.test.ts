import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command, CommanderError } from "commander";
import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeEngine } from "../../../test/support/fake-engine.js";
import { startTestApp, type TestApp } from "../../../test/support/test-app.js";
import { type HearthConfig, serverConfigSchema } from "../../config/schema.js";
import type { AppEnv } from "../../http/env.js";
import type { Store } from "../../store/open-store.js";
import { users as usersTable } from "../../store/schema.js";
import { AUDIT_ACTIONS } from "../../tenancy/audit.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import { PgUsageMeter } from "../../usage/pg-meter.js";
import { parseDuration } from "./arguments.js";
import { type AdminCommandsOptions, registerAdminCommands } from "./index.js";

const SERVER_URL = "http://hearth.test:8000";

let harness: TestApp<FakeEngine>;
let dir: string;
let store: Store;
let tenancy: Tenancy;
let app: Hono<AppEnv>;

function configFor(overrides: Partial<HearthConfig> = {}): HearthConfig {
  return {
    server: serverConfigSchema.parse({ maxBodyBytes: 1 << 20 }),
    models: [],
    upstreamModels: [],
    modelIds: [],
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
  // The whole app; no admin token configured, so the server creates one in the data dir, where the CLI finds it.
  harness = await startTestApp({
    models: [{ id: "tiny" }, { id: "small" }],
    adminToken: null,
    bootstrap: false,
  });
  ({ store, app } = harness);
  dir = harness.config.dataDir;
  tenancy = harness.services.tenancy;
});

afterAll(async () => {
  await harness?.close();
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
  const program = new Command("hearth").exitOverride().configureOutput({
    writeOut: (text) => {
      result.stdout += text;
    },
    writeErr: (text) => {
      result.stderr += text;
    },
  });
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
  try {
    await program.parseAsync(args, { from: "user" });
  } catch (err) {
    // Commander refused the arguments (it already wrote why to writeErr).
    if (!(err instanceof CommanderError)) throw err;
    result.exitCode = err.exitCode;
  }
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
    expect((await tenancy.orgs.getByName("acme"))?.models).toEqual(["small", "tiny"]);

    const listed = await hearth(["orgs", "list", "--json"]);
    const orgs = JSON.parse(listed.stdout) as { name: string; models: string[] }[];
    expect(orgs).toEqual([expect.objectContaining({ name: "acme", models: ["small", "tiny"] })]);
    expect((await hearth(["orgs", "list"])).stdout).toMatch(
      /^NAME\s+ID\s+MODELS\s+RPM\s+TPM\s+CREATED\nacme\s+org_\S+\s+small, tiny\s+unlimited\s+unlimited\s/,
    );

    expect((await hearth(["orgs", "revoke", "acme", "tiny"])).exitCode).toBe(0);
    expect((await tenancy.orgs.getByName("acme"))?.models).toEqual(["small"]);
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
    expect((await tenancy.keys.verify(key))?.orgName).toBe("acme");
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
    const created = await tenancy.keys.create("acme", { name: "to-revoke" });
    const listed = await hearth(["keys", "list", "--org", "acme", "--json"]);
    const keys = JSON.parse(listed.stdout) as { id: string; name: string | null }[];
    expect(keys.map((k) => k.name)).toContain("to-revoke");
    expect(listed.stdout).not.toContain(created.key);
    const table = await hearth(["keys", "list", "--org", "acme"]);
    expect(table.stdout).toMatch(/^ID\s+NAME\s+KEY\s+CREATED\s+LAST USED\s+EXPIRES\s+REVOKED\s+STATUS\n/);
    expect(table.stdout).toContain(`${created.key.slice(0, 7)}...${created.key.slice(-4)}`);
    expect(table.stdout).not.toContain(created.key);

    const revoked = await hearth(["keys", "revoke", created.id]);
    expect(revoked).toMatchObject({ stderr: "", exitCode: 0 });
    expect(await tenancy.keys.verify(created.key)).toBeNull();
    const after = (await hearth(["keys", "list", "--org", "acme"])).stdout;
    expect(after).toMatch(/to-revoke\s+sk-\S+\s+[\d-]+ [\d:]+\s+never\s+never\s+[\d-]+ [\d:]+\s+revoked\n/);

    const missing = await hearth(["keys", "revoke", "key_missing"]);
    expect(missing).toMatchObject({ exitCode: 1, stderr: 'hearth: API key "key_missing" does not exist.\n' });
  });
});

describe("hearth orgs limits", () => {
  it("stores rpm and tpm at creation and shows them in orgs list", async () => {
    const created = await hearth(["orgs", "create", "limited", "--rpm", "60", "--tpm", "0", "--json"]);
    expect(created.exitCode).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: "limited", rpm: 60, tpm: null });
    expect((await tenancy.orgs.getByName("limited"))?.rpm).toBe(60);
    const table = (await hearth(["orgs", "list"])).stdout;
    expect(table).toMatch(/\nlimited\s+org_\S+\s+\(none\)\s+60\s+unlimited\s/);
  });

  it("sets limits, keeping a limit that is not given; 0 means unlimited", async () => {
    const set = await hearth(["orgs", "set-limits", "limited", "--tpm", "5000"]);
    expect(set).toMatchObject({ stderr: "", exitCode: 0 });
    expect(set.stdout).toBe('Limits of organization "limited": rpm 60, tpm 5000.\n');
    await hearth(["orgs", "set-limits", "limited", "--rpm", "0"]);
    const org = await tenancy.orgs.getByName("limited");
    expect(org).toMatchObject({ rpm: null, tpm: 5000 });
  });

  it("refuses bad limits and unknown orgs with exit code 1", async () => {
    const none = await hearth(["orgs", "set-limits", "limited"]);
    expect(none).toMatchObject({
      exitCode: 1,
      stderr: "hearth: give --rpm, --tpm or both (0 = unlimited)\n",
    });
    const negative = await hearth(["orgs", "set-limits", "limited", "--rpm", "-5"]);
    expect(negative.exitCode).toBe(1);
    const word = await hearth(["orgs", "create", "x1", "--rpm", "lots"]);
    expect(word.exitCode).toBe(1);
    expect(word.stderr).toContain("expected a whole number");
    expect(await tenancy.orgs.getByName("x1")).toBeNull();
    const unknown = await hearth(["orgs", "set-limits", "nobody", "--rpm", "5"]);
    expect(unknown).toMatchObject({ exitCode: 1, stderr: 'hearth: Organization "nobody" does not exist.\n' });
    expect((await tenancy.orgs.getByName("limited"))?.tpm).toBe(5000);
  });
});

describe("hearth keys create --expires-in", () => {
  it.each([
    ["3600s", 3600],
    ["90m", 5400],
    ["12h", 43_200],
    ["30d", 2_592_000],
    ["60", 60],
    // The wider grammar shared with keepAlive (docs/decisions.md, "One duration grammar").
    ["1.5h", 5400],
    ["1d12h", 129_600],
  ])("accepts %s", async (text, seconds) => {
    const result = await hearth(["keys", "create", "--org", "acme", "--expires-in", text, "--json"]);
    expect(result.exitCode).toBe(0);
    const created = JSON.parse(result.stdout) as { created_at: string; expires_at: string };
    const delta = Date.parse(created.expires_at) - Date.parse(created.created_at);
    expect(Math.abs(delta - seconds * 1000)).toBeLessThan(2000);
  });

  it.each(["0d", "-1h", "30x", "1500ms", "1.5", "d", ""])("refuses %j", async (text) => {
    const before = (await tenancy.keys.list("acme")).length;
    const result = await hearth(["keys", "create", "--org", "acme", "--expires-in", text]);
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain("expected a positive duration");
    expect(result.requests).toEqual([]);
    expect(await tenancy.keys.list("acme")).toHaveLength(before);
  });

  it("parses durations", () => {
    expect(parseDuration("30d")).toBe(2_592_000);
    expect(parseDuration(" 2h ")).toBe(7200);
    expect(() => parseDuration("1w")).toThrow();
    expect(parseDuration("1h30m")).toBe(5400);
    expect(parseDuration("2000ms")).toBe(2);
    expect(() => parseDuration("500ms")).toThrow("whole seconds");
  });
});

describe("hearth users", () => {
  it("creates a user with a generated password printed once as the last line", async () => {
    const result = await hearth([
      "users",
      "create",
      ...["--org", "acme", "--email", "Ann@Example.com"],
      "--role",
      "owner",
    ]);
    expect(result).toMatchObject({ stderr: "", exitCode: 0 });
    expect(result.stdout).toMatch(
      /^Created user ann@example.com \(user_\w+\) as owner of organization "acme"\./,
    );
    const password = lastLine(result.stdout);
    expect(password).toMatch(/^[0-9A-Za-z]{22}$/);
    const users = await tenancy.users.list("acme");
    expect(users).toEqual([expect.objectContaining({ email: "ann@example.com", role: "owner" })]);
    // The password is stored nowhere in clear.
    const rows = await store.db.select().from(usersTable);
    expect(JSON.stringify(rows)).not.toContain(password);
  });

  it("takes a given password and defaults to member; prints no password then", async () => {
    const args = ["--org", "acme", "--email", "bob@example.com", "--password", "s3cret-enough", "--json"];
    const result = await hearth(["users", "create", ...args]);
    expect(result.exitCode).toBe(0);
    const user = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(user).toMatchObject({ email: "bob@example.com", role: "member", org: "acme" });
    expect(user).not.toHaveProperty("password");
    expect(result.stdout).not.toContain("s3cret-enough");
  });

  it("refuses duplicates, unknown orgs, bad roles, emails and passwords with exit code 1", async () => {
    const cases: [string[], RegExp][] = [
      [
        ["--org", "acme", "--email", "ANN@example.com"],
        /^hearth: A user with email "ann@example.com" already exists\.\n$/,
      ],
      [["--org", "nobody", "--email", "c@example.com"], /^hearth: Organization "nobody" does not exist\.\n$/],
      [["--org", "acme", "--email", "not-an-email"], /^hearth: Invalid email address "not-an-email"\.\n$/],
      [["--org", "acme", "--email", "d@example.com", "--password", "short"], /password/],
      [["--org", "acme", "--email", "e@example.com", "--role", "admin"], /expected "owner" or "member"/],
    ];
    for (const [args, stderr] of cases) {
      const result = await hearth(["users", "create", ...args]);
      expect(result.exitCode, args.join(" ")).toBe(1);
      expect(result.stderr).toMatch(stderr);
    }
    expect((await tenancy.users.list("acme")).map((u) => u.email)).toEqual([
      "ann@example.com",
      "bob@example.com",
    ]);
  });
});

describe("hearth audit", () => {
  it("lists the changes made through the CLI, newest first, as the admin", async () => {
    const result = await hearth(["audit", "--json", "--limit", "1000"]);
    expect(result.exitCode).toBe(0);
    const entries = JSON.parse(result.stdout) as { action: string; actor: string; target: string }[];
    const actions = new Set(entries.map((e) => e.action));
    for (const action of AUDIT_ACTIONS) {
      expect(actions, action).toContain(action);
    }
    expect(new Set(entries.map((e) => e.actor))).toEqual(new Set(["admin"]));
    expect(entries[0]?.action).toBe("user.create");
    const table = await hearth(["audit", "--org", "limited", "--limit", "2"]);
    expect(table.stdout).toMatch(
      /^TIME\s+ACTOR\s+ACTION\s+TARGET\s+ORG\n.*admin\s+limits\.set\s+limited\s+org_/,
    );
    expect(table.stdout.trimEnd().split("\n")).toHaveLength(3);
    expect((await hearth(["audit", "--org", "nobody"])).exitCode).toBe(1);
  });
});

describe("hearth usage", () => {
  beforeAll(async () => {
    const acme = await tenancy.orgs.getByName("acme");
    const meter = new PgUsageMeter(store.db, { onError: (err) => expect.fail(String(err)) });
    const base = { orgId: acme?.id ?? "", reasoningTokens: 0, latencyMs: 9 };
    // Every request has its own id: the store keeps one record per request.
    let n = 0;
    meter.record({
      ...base,
      requestId: `req_cli_${++n}`,
      at: new Date("2030-06-01T08:00:00Z"),
      keyId: "key_a",
      model: "tiny",
      promptTokens: 12,
      completionTokens: 30,
      cachedTokens: 4,
      status: "completed",
      user: "u-41",
    });
    meter.record({
      ...base,
      requestId: `req_cli_${++n}`,
      at: new Date("2030-06-02T08:00:00Z"),
      keyId: "key_b",
      model: "small",
      promptTokens: 8,
      completionTokens: 3,
      cachedTokens: 0,
      status: "aborted",
    });
    await meter.dispose();
  });

  it("prints the totals at the top level of one JSON object with --json, and groups with --by", async () => {
    const result = await hearth(["usage", "--org", "acme", "--json"]);
    expect(result).toMatchObject({ stderr: "", exitCode: 0 });
    expect(JSON.parse(result.stdout)).toMatchObject({
      org: "acme",
      requests: 2,
      prompt_tokens: 20,
      completion_tokens: 33,
      reasoning_tokens: 0,
      cached_tokens: 4,
      total_tokens: 53,
      aborted: 1,
      errors: 0,
      groups: [],
    });
    const byModel = JSON.parse((await hearth(["usage", "--org", "acme", "--by", "model", "--json"])).stdout);
    expect(byModel.groups.map((g: { key: string; total_tokens: number }) => [g.key, g.total_tokens])).toEqual(
      [
        ["small", 11],
        ["tiny", 42],
      ],
    );
  });

  it("passes the range and grouping to the server and prints a table", async () => {
    const result = await hearth(["usage", "--org", "acme", "--since", "2030-06-01", "--by", "day"]);
    expect(result).toMatchObject({ stderr: "", exitCode: 0 });
    expect(result.requests).toEqual([`GET ${SERVER_URL}/admin/v1/orgs/acme/usage?since=2030-06-01&by=day`]);
    expect(result.stdout.split("\n")).toEqual([
      'Usage of organization "acme" from 2030-06-01 00:00:00:',
      "DAY         REQUESTS  PROMPT  COMPLETION  REASONING  CACHED  TOTAL  ABORTED  ERRORS",
      "2030-06-01  1         12      30          0          4       42     0        0",
      "2030-06-02  1         8       3           0          0       11     1        0",
      "total       2         20      33          0          4       53     1        0",
      "",
    ]);
    const window = await hearth([
      "usage",
      "--org",
      "acme",
      "--since",
      "2030-06-02T00:00:00+02:00",
      "--until",
      "2030-06-02T12:00:00Z",
    ]);
    expect(window.stdout).toMatch(
      /^Usage of organization "acme" from 2030-06-01 22:00:00 until 2030-06-02 12:00:00:\n/,
    );
    expect(window.stdout).toMatch(/\ntotal\s+1\s+8\s+3\s/);
    expect((await hearth(["usage", "--org", "acme"])).stdout).toMatch(
      /^Usage of organization "acme" \(all time\):\n/,
    );
  });

  it("--user passes the user to the server and names it in the title", async () => {
    const result = await hearth(["usage", "--org", "acme", "--user", "u-41", "--by", "model"]);
    expect(result).toMatchObject({ stderr: "", exitCode: 0 });
    expect(result.requests).toEqual([`GET ${SERVER_URL}/admin/v1/orgs/acme/usage?by=model&user=u-41`]);
    expect(result.stdout.split("\n")).toEqual([
      'Usage of organization "acme" by user "u-41" (all time):',
      "MODEL  REQUESTS  PROMPT  COMPLETION  REASONING  CACHED  TOTAL  ABORTED  ERRORS",
      "tiny   1         12      30          0          4       42     0        0",
      "total  1         12      30          0          4       42     0        0",
      "",
    ]);
    const json = JSON.parse((await hearth(["usage", "--org", "acme", "--user", "u-4", "--json"])).stdout);
    expect(json).toMatchObject({ user: "u-4", requests: 0, total_tokens: 0 });
  });

  it("refuses bad groupings, dates and unknown orgs on one line with exit code 1", async () => {
    const week = await hearth(["usage", "--org", "acme", "--by", "week"]);
    expect(week.exitCode).toBe(1);
    expect(week.stderr).toContain("expected day, model, key");
    expect(week.requests).toEqual([]);
    const date = await hearth(["usage", "--org", "acme", "--since", "last tuesday"]);
    expect(date.exitCode).toBe(1);
    expect(date.stderr).toMatch(/^hearth: Invalid value for 'since': expected an ISO 8601 date[^\n]*\n$/);
    expect(await hearth(["usage", "--org", "nobody"])).toMatchObject({
      exitCode: 1,
      stderr: 'hearth: Organization "nobody" does not exist.\n',
    });
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
