// The admin API on the whole app in memory (app.request, PGlite): the operator's orgs, grants, limits, keys, users,
// usage and audit trail, the admin token, and the errors of each route.
import { statSync } from "node:fs";
import { join } from "node:path";
import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeEngine } from "../../../test/support/fake-engine.js";
import { startTestApp, type TestApp } from "../../../test/support/test-app.js";
import { loadOrCreateAdminToken, readAdminToken } from "../../auth/admin-token.js";
import type { Store } from "../../store/open-store.js";
import { AUDIT_ACTIONS } from "../../tenancy/audit.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import { PgUsageMeter } from "../../usage/pg-meter.js";
import type { UsageRecord } from "../../usage/types.js";
import type { AppEnv } from "../env.js";

const ADMIN_TOKEN = "hearth-admin-test-token-0123456789";
const MODELS = ["tiny", "small", "vendor/big"];

let harness: TestApp<FakeEngine>;
let dir: string;
let store: Store;
let tenancy: Tenancy;
let app: Hono<AppEnv>;

beforeAll(async () => {
  harness = await startTestApp({
    models: MODELS.map((id) => ({ id })),
    adminToken: ADMIN_TOKEN,
    bootstrap: false,
  });
  ({ store, app } = harness);
  dir = harness.config.dataDir;
  tenancy = harness.services.tenancy;
});

afterAll(async () => {
  await harness?.close();
});

interface ErrorJson {
  error: { message: string; type: string; param: string | null; code: string | null };
}

// Response bodies are checked field by field in the tests.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Json = any;

async function admin(
  method: string,
  path: string,
  body?: unknown,
  token: string | null = ADMIN_TOKEN,
): Promise<{ status: number; json: Json }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let payload: string | undefined;
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  const res = await app.request(`/admin/v1${path}`, {
    method,
    headers,
    ...(payload === undefined ? {} : { body: payload }),
  });
  return { status: res.status, json: await res.json() };
}

function expectError(
  result: { status: number; json: ErrorJson },
  status: number,
  code: string,
  param: string | null = null,
) {
  expect(result.status).toBe(status);
  expect(result.json.error.code).toBe(code);
  expect(result.json.error.param).toBe(param);
  expect(typeof result.json.error.message).toBe("string");
}

describe("admin authentication", () => {
  it("refuses requests without the admin token", async () => {
    expectError(await admin("GET", "/orgs", undefined, null), 401, "invalid_admin_token");
    expectError(await admin("GET", "/orgs", undefined, "wrong"), 401, "invalid_admin_token");
    expectError(await admin("GET", "/orgs", undefined, `${ADMIN_TOKEN}x`), 401, "invalid_admin_token");
    const res = await app.request("/admin/v1/orgs", { headers: { authorization: `Basic ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(401);
    // Also for writes: nothing may be created without the token.
    expectError(await admin("POST", "/orgs", { name: "sneaky" }, "wrong"), 401, "invalid_admin_token");
    expect(await tenancy.orgs.getByName("sneaky")).toBeNull();
  });

  it("never accepts an API key in place of the admin token", async () => {
    await tenancy.orgs.create("keyholder", ["tiny"]);
    const key = await tenancy.keys.create("keyholder");
    expect(await tenancy.keys.verify(key.key)).not.toBeNull();
    expectError(await admin("GET", "/orgs", undefined, key.key), 401, "invalid_admin_token");
  });

  it("accepts the admin token", async () => {
    expect((await admin("GET", "/orgs")).status).toBe(200);
  });
});

describe("organizations and grants", () => {
  it("creates and lists organizations", async () => {
    const created = await admin("POST", "/orgs", { name: "acme", models: ["tiny", "small"] });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      object: "organization",
      name: "acme",
      models: ["small", "tiny"],
      rpm: null,
    });
    expect(created.json.id).toMatch(/^org_/);
    expect(Date.parse(created.json.created_at)).not.toBeNaN();

    const list = await admin("GET", "/orgs");
    expect(list.json.object).toBe("list");
    expect(list.json.data.map((o: { name: string }) => o.name)).toEqual(["acme", "keyholder"]);
    expect((await admin("GET", "/orgs/acme")).json.models).toEqual(["small", "tiny"]);
    expectError(await admin("GET", "/orgs/nope"), 404, "org_not_found");
  });

  it("answers 409 for a duplicate name", async () => {
    expectError(await admin("POST", "/orgs", { name: "acme" }), 409, "conflict");
  });

  it("validates bodies with the offending param", async () => {
    expectError(await admin("POST", "/orgs", {}), 400, "invalid_request_error", "name");
    expect((await admin("POST", "/orgs", {})).json.error.message).toBe("Missing required parameter: 'name'.");
    expectError(await admin("POST", "/orgs", { name: 5 }), 400, "invalid_request_error", "name");
    expectError(
      await admin("POST", "/orgs", { name: "x", models: [1] }),
      400,
      "invalid_request_error",
      "models[0]",
    );
    expectError(
      await admin("POST", "/orgs", { name: "x", extra: true }),
      400,
      "invalid_request_error",
      "extra",
    );
    expectError(await admin("POST", "/orgs", "{not json"), 400, "invalid_request_error", null);
    expectError(await admin("POST", "/orgs", { name: "bad name" }), 400, "invalid_request_error", "name");
    expectError(
      await admin("POST", "/orgs", { name: "x", models: ["huge"] }),
      400,
      "unknown_model",
      "models",
    );
    expect(await tenancy.orgs.getByName("x")).toBeNull();
  });

  it("grants and revokes models", async () => {
    const granted = await admin("POST", "/orgs/acme/grants", { model: "vendor/big" });
    expect(granted.status).toBe(200);
    expect(granted.json.models).toEqual(["small", "tiny", "vendor/big"]);

    const revoked = await admin("DELETE", `/orgs/acme/grants/${encodeURIComponent("vendor/big")}`);
    expect(revoked.status).toBe(200);
    expect(revoked.json.models).toEqual(["small", "tiny"]);
    await admin("POST", "/orgs/acme/grants", { model: "vendor/big" });
    expect((await admin("DELETE", "/orgs/acme/grants/vendor/big")).json.models).toEqual(["small", "tiny"]);
    expect((await admin("DELETE", "/orgs/acme/grants/tiny")).json.models).toEqual(["small"]);
    const acme = await tenancy.orgs.getByName("acme");
    expect(await tenancy.orgs.allowedModels(acme?.id ?? "")).toEqual(new Set(["small"]));
  });

  it("maps grant failures to 400 and 404", async () => {
    expectError(await admin("POST", "/orgs/acme/grants", { model: "huge" }), 400, "unknown_model", "model");
    expectError(await admin("POST", "/orgs/acme/grants", {}), 400, "invalid_request_error", "model");
    expectError(await admin("POST", "/orgs/nope/grants", { model: "tiny" }), 404, "org_not_found");
    expectError(await admin("DELETE", "/orgs/acme/grants/tiny"), 404, "grant_not_found");
    expectError(await admin("DELETE", "/orgs/nope/grants/tiny"), 404, "org_not_found");
  });
});

describe("keys", () => {
  it("creates a key once, lists it without the secret, and revokes it", async () => {
    const created = await admin("POST", "/orgs/acme/keys", { name: "ci", expires_in: 3600 });
    expect(created.status).toBe(201);
    const key: string = created.json.key;
    expect(key).toMatch(/^sk-[0-9A-Za-z]{43}$/);
    expect(created.json).toMatchObject({
      object: "api_key",
      name: "ci",
      org: "acme",
      revoked_at: null,
      created_by: "admin",
    });
    expect(created.json.id).toMatch(/^key_/);
    const expiresIn = Date.parse(created.json.expires_at) - Date.parse(created.json.created_at);
    expect(expiresIn).toBeGreaterThan(3590_000);
    expect(expiresIn).toBeLessThan(3610_000);
    expect((await tenancy.keys.verify(key))?.orgName).toBe("acme");

    const noBody = await app.request("/admin/v1/orgs/acme/keys", {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(noBody.status).toBe(201);

    const list = await admin("GET", "/orgs/acme/keys");
    expect(list.status).toBe(200);
    expect(list.json.data).toHaveLength(2);
    const text = JSON.stringify(list.json);
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(7, -4));
    expect(list.json.data[0]).not.toHaveProperty("key");
    expect(list.json.data[0]).not.toHaveProperty("hash");
    expect(list.json.data[0].display).toBe(`${key.slice(0, 7)}...${key.slice(-4)}`);

    const revoked = await admin("DELETE", `/keys/${created.json.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.json.revoked_at).not.toBeNull();
    expect(await tenancy.keys.verify(key)).toBeNull();
  });

  it("maps key failures to 400 and 404", async () => {
    expectError(await admin("POST", "/orgs/nope/keys", {}), 404, "org_not_found");
    expectError(await admin("GET", "/orgs/nope/keys"), 404, "org_not_found");
    expectError(await admin("DELETE", "/keys/key_missing"), 404, "key_not_found");
    expectError(
      await admin("POST", "/orgs/acme/keys", { expires_in: -5 }),
      400,
      "invalid_request_error",
      "expires_in",
    );
    expectError(
      await admin("POST", "/orgs/acme/keys", { expires_in: 1.5 }),
      400,
      "invalid_request_error",
      "expires_in",
    );
    expectError(
      await admin("POST", "/orgs/acme/keys", { name: "x".repeat(200) }),
      400,
      "invalid_request_error",
      "name",
    );
  });
});

describe("limits", () => {
  it("stores rpm and tpm at creation (0 = unlimited) and sets them later", async () => {
    const created = await admin("POST", "/orgs", { name: "metered", rpm: 100, tpm: 0 });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ rpm: 100, tpm: null });
    const set = await admin("PATCH", "/orgs/metered/limits", { tpm: 20_000 });
    expect(set.status).toBe(200);
    expect(set.json).toMatchObject({ name: "metered", rpm: 100, tpm: 20_000 });
    expect((await admin("PATCH", "/orgs/metered/limits", { rpm: 0, tpm: null })).json).toMatchObject({
      rpm: null,
      tpm: null,
    });
  });

  it("refuses bad limits and unknown orgs", async () => {
    expectError(await admin("PATCH", "/orgs/metered/limits", {}), 400, "invalid_request_error", "rpm");
    expectError(
      await admin("PATCH", "/orgs/metered/limits", { rpm: -1 }),
      400,
      "invalid_request_error",
      "rpm",
    );
    expectError(
      await admin("PATCH", "/orgs/metered/limits", { tpm: 1.5 }),
      400,
      "invalid_request_error",
      "tpm",
    );
    expectError(await admin("POST", "/orgs", { name: "m2", rpm: "10" }), 400, "invalid_request_error", "rpm");
    expectError(await admin("PATCH", "/orgs/nope/limits", { rpm: 5 }), 404, "org_not_found");
  });
});

describe("users", () => {
  it("creates a user with a generated password returned once, never a hash", async () => {
    const created = await admin("POST", "/orgs/acme/users", { email: "Owner@Acme.test", role: "owner" });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      object: "user",
      email: "owner@acme.test",
      role: "owner",
      org: "acme",
    });
    expect(created.json.id).toMatch(/^user_/);
    expect(created.json.password).toMatch(/^[0-9A-Za-z]{22}$/);
    expect(JSON.stringify(created.json)).not.toContain("scrypt");

    const given = await admin("POST", "/orgs/acme/users", { email: "m@acme.test", password: "long enough" });
    expect(given.status).toBe(201);
    expect(given.json.role).toBe("member");
    expect(given.json).not.toHaveProperty("password");

    const list = await admin("GET", "/orgs/acme/users");
    expect(list.json.data.map((u: { email: string; role: string }) => [u.email, u.role])).toEqual([
      ["m@acme.test", "member"],
      ["owner@acme.test", "owner"],
    ]);
    expect(JSON.stringify(list.json)).not.toContain(created.json.password);
    expect(JSON.stringify(list.json)).not.toContain("scrypt");
  });

  it("maps user failures to 400, 404 and 409", async () => {
    expectError(await admin("POST", "/orgs/acme/users", { email: "OWNER@acme.test" }), 409, "conflict");
    expectError(await admin("POST", "/orgs/nope/users", { email: "x@acme.test" }), 404, "org_not_found");
    expectError(await admin("GET", "/orgs/nope/users"), 404, "org_not_found");
    expectError(
      await admin("POST", "/orgs/acme/users", { email: "bad" }),
      400,
      "invalid_request_error",
      "email",
    );
    expectError(await admin("POST", "/orgs/acme/users", {}), 400, "invalid_request_error", "email");
    expectError(
      await admin("POST", "/orgs/acme/users", { email: "y@acme.test", password: "short" }),
      400,
      "invalid_request_error",
      "password",
    );
    expectError(
      await admin("POST", "/orgs/acme/users", { email: "y@acme.test", role: "admin" }),
      400,
      "invalid_request_error",
      "role",
    );
    expect((await admin("GET", "/orgs/acme/users")).json.data).toHaveLength(2);
  });
});

describe("audit", () => {
  it("records every change as the admin, newest first, and never a secret", async () => {
    const key = await admin("POST", "/orgs/acme/keys", { name: "audited" });
    await admin("DELETE", `/keys/${key.json.id}`);
    const list = await admin("GET", "/audit?limit=1000");
    expect(list.status).toBe(200);
    const entries: { id: number; action: string; actor: string; target: string; at: string }[] =
      list.json.data;
    expect(entries[0]).toMatchObject({ action: "key.revoke", actor: "admin", target: key.json.id });
    expect(entries[1]).toMatchObject({ action: "key.create", actor: "admin", target: key.json.id });
    const actions = new Set(entries.map((e) => e.action));
    for (const action of AUDIT_ACTIONS) {
      expect(actions, action).toContain(action);
    }
    expect(entries.map((e) => e.id)).toEqual([...entries.map((e) => e.id)].sort((a, b) => b - a));
    expect(JSON.stringify(list.json)).not.toContain(key.json.key);

    const page = await admin("GET", `/audit?limit=2&before=${entries[0]?.id}`);
    expect(page.json.data.map((e: { id: number }) => e.id)).toEqual([entries[1]?.id, entries[2]?.id]);
    const metered = await admin("GET", "/audit?org=metered");
    expect(metered.json.data.map((e: { action: string }) => e.action)).toEqual([
      "limits.set",
      "limits.set",
      "org.create",
    ]);
  });

  it("validates the query and refuses requests without the admin token", async () => {
    expectError(await admin("GET", "/audit?limit=0"), 400, "invalid_request_error", "limit");
    expectError(await admin("GET", "/audit?limit=abc"), 400, "invalid_request_error", "limit");
    expectError(await admin("GET", "/audit?colour=red"), 400, "invalid_request_error", "colour");
    expectError(await admin("GET", "/audit?org=nope"), 404, "org_not_found");
    expectError(await admin("GET", "/audit", undefined, null), 401, "invalid_admin_token");
  });
});

describe("usage", () => {
  // Every request has its own id: the store keeps one record per request.
  let requests = 0;
  const record = (orgId: string, at: string, overrides: Partial<UsageRecord> = {}): UsageRecord => ({
    at: new Date(at),
    orgId,
    keyId: "key_one",
    model: "tiny",
    requestId: `req_${++requests}`,
    promptTokens: 10,
    completionTokens: 4,
    reasoningTokens: 1,
    cachedTokens: 2,
    status: "completed",
    latencyMs: 3,
    ...overrides,
  });
  const totals = (requests: number, prompt: number, completion: number, aborted = 0, errors = 0) => ({
    requests,
    prompt_tokens: prompt,
    completion_tokens: completion,
    reasoning_tokens: requests,
    cached_tokens: 2 * requests,
    total_tokens: prompt + completion,
    aborted,
    errors,
  });

  beforeAll(async () => {
    const org = await tenancy.orgs.create("usage-org", ["tiny"]);
    const meter = new PgUsageMeter(store.db, { onError: (err) => expect.fail(String(err)) });
    meter.record(record(org.id, "2030-05-01T10:00:00Z", { user: "end user 1" }));
    meter.record(record(org.id, "2030-05-01T23:00:00Z", { model: "small", status: "aborted" }));
    meter.record(
      record(org.id, "2030-05-02T01:00:00Z", { keyId: "key_two", status: "error", user: "end user 1" }),
    );
    meter.record(record("org_elsewhere", "2030-05-01T10:00:00Z", { promptTokens: 999, user: "end user 1" }));
    await meter.dispose();
  });

  it("answers an org's totals, and groups by day, model or key", async () => {
    const all = await admin("GET", "/orgs/usage-org/usage");
    expect(all.status).toBe(200);
    expect(all.json).toMatchObject({ object: "usage", org: "usage-org", since: null, until: null, by: null });
    expect(all.json).toMatchObject(totals(3, 30, 12, 1, 1));
    expect(all.json.groups).toEqual([]);
    expect(all.json.org_id).toMatch(/^org_/);

    const byDay = await admin("GET", "/orgs/usage-org/usage?by=day");
    expect(byDay.json.groups).toEqual([
      { key: "2030-05-01", ...totals(2, 20, 8, 1, 0) },
      { key: "2030-05-02", ...totals(1, 10, 4, 0, 1) },
    ]);
    const byModel = await admin("GET", "/orgs/usage-org/usage?by=model");
    expect(byModel.json.groups.map((g: { key: string }) => g.key)).toEqual(["small", "tiny"]);
    const byKey = await admin("GET", "/orgs/usage-org/usage?by=key");
    expect(byKey.json.groups.map((g: { key: string; requests: number }) => [g.key, g.requests])).toEqual([
      ["key_one", 2],
      ["key_two", 1],
    ]);
  });

  it("filters by user, alone and with the range and grouping, and says which", async () => {
    const user = await admin("GET", "/orgs/usage-org/usage?user=end%20user%201&by=key");
    expect(user.status).toBe(200);
    expect(user.json).toMatchObject({ user: "end user 1", ...totals(2, 20, 8, 0, 1) });
    expect(user.json.groups.map((g: { key: string; requests: number }) => [g.key, g.requests])).toEqual([
      ["key_one", 1],
      ["key_two", 1],
    ]);
    const ranged = await admin("GET", "/orgs/usage-org/usage?user=end+user+1&until=2030-05-02");
    expect(ranged.json).toMatchObject({ user: "end user 1", requests: 1, prompt_tokens: 10 });
    expect((await admin("GET", "/orgs/usage-org/usage?user=end")).json.requests).toBe(0);
    expect((await admin("GET", "/orgs/usage-org/usage")).json.user).toBeNull();
  });

  it("limits the range: since inclusive, until exclusive, dates or date-times with a zone", async () => {
    const day = await admin("GET", "/orgs/usage-org/usage?since=2030-05-01&until=2030-05-02");
    expect(day.json).toMatchObject({
      since: "2030-05-01T00:00:00.000Z",
      until: "2030-05-02T00:00:00.000Z",
      requests: 2,
    });
    // 2030-05-02T01:00Z is 03:00 at +02:00; an unencoded "+" arrives as a space and is understood.
    const late = await admin("GET", "/orgs/usage-org/usage?since=2030-05-02T03:00:00+02:00");
    expect(late.json).toMatchObject({ since: "2030-05-02T01:00:00.000Z", requests: 1, errors: 1 });
    const encoded = await admin("GET", "/orgs/usage-org/usage?since=2030-05-02T03:00:01%2B02:00");
    expect(encoded.json.requests).toBe(0);
  });

  it("refuses bad dates, ranges and groupings with the offending param, and unknown orgs with 404", async () => {
    for (const bad of [
      "yesterday",
      "2030-02-31",
      "2030-02-30T10:00:00Z",
      "2030-05-01T10:00:00",
      "1714000000",
      "",
    ]) {
      const result = await admin("GET", `/orgs/usage-org/usage?since=${encodeURIComponent(bad)}`);
      expectError(result, 400, "invalid_request_error", "since");
      expect(result.json.error.message).toMatch(/ISO 8601/);
    }
    expectError(
      await admin("GET", "/orgs/usage-org/usage?since=2030-05-02&until=2030-05-01"),
      400,
      "invalid_request_error",
      "until",
    );
    expectError(await admin("GET", "/orgs/usage-org/usage?by=week"), 400, "invalid_request_error", "by");
    for (const bad of ["", "u".repeat(65)]) {
      expectError(
        await admin("GET", `/orgs/usage-org/usage?user=${bad}`),
        400,
        "invalid_request_error",
        "user",
      );
    }
    expectError(
      await admin("GET", "/orgs/usage-org/usage?colour=red"),
      400,
      "invalid_request_error",
      "colour",
    );
    expectError(await admin("GET", "/orgs/nope/usage"), 404, "org_not_found");
    expectError(await admin("GET", "/orgs/usage-org/usage", undefined, null), 401, "invalid_admin_token");
  });
});

describe("admin token file", () => {
  it("is created once with mode 0600 unless HEARTH_ADMIN_TOKEN is set", () => {
    const dataDir = join(dir, "token-test");
    expect(readAdminToken({ dataDir, adminToken: undefined })).toBeUndefined();
    const token = loadOrCreateAdminToken({ dataDir, adminToken: undefined });
    expect(token.length).toBeGreaterThanOrEqual(40);
    expect(statSync(join(dataDir, "admin-token")).mode & 0o777).toBe(0o600);
    expect(loadOrCreateAdminToken({ dataDir, adminToken: undefined })).toBe(token);
    expect(readAdminToken({ dataDir, adminToken: undefined })).toBe(token);
    const fromEnv = "from-env-0123456789abcdefghijklmnopqrstuvwxyz";
    expect(loadOrCreateAdminToken({ dataDir, adminToken: fromEnv })).toBe(fromEnv);
  });
});
