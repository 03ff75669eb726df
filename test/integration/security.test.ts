// The shared security suite: every /v1 route against missing, malformed, foreign, unknown, revoked and expired
// credentials, model access across organizations, the admin API's token, and secrets in logs, store and data dir.
// Runs the real app (the test harness: buildServices → createApp) in memory on PGlite and on PostgreSQL; the engine
// never becomes ready (models loading), so a request that passes auth and access ends in 503 "starting up", which
// is exactly what proves it got past both checks.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOrCreateKeySecret } from "../../src/auth/key-secret.js";
import { createOperatorThrottle } from "../../src/http/dashboard/operator/operator-session.js";
import { MISSING_API_KEY_MESSAGE } from "../../src/http/middleware/require-api-key.js";
import { createLogger } from "../../src/observability/logger.js";
import type { Store } from "../../src/store/open-store.js";
import { createTenancy, type Tenancy } from "../../src/tenancy/tenancy.js";
import type { FakeEngine } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

const ADMIN_TOKEN = "hearth-admin-security-suite-token-0123456789";
// org A may use alpha and shared, org B beta and shared, org C nothing.
const MODEL_IDS = ["alpha", "beta", "shared"];
const NONEXISTENT = "no-such-model";

interface Route {
  name: string;
  /** A request for `model` (routes that take no model ignore it). */
  request(model: string): { path: string; init: RequestInit };
  /** Whether the route names one model (and so answers 404 for a model the org may not use). */
  perModel: boolean;
}

const ROUTES: Route[] = [
  {
    name: "POST /v1/chat/completions",
    perModel: true,
    request: (model) => ({
      path: "/v1/chat/completions",
      init: {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }),
      },
    }),
  },
  {
    name: "GET /v1/models",
    perModel: false,
    request: () => ({ path: "/v1/models", init: { method: "GET" } }),
  },
  {
    name: "GET /v1/models/:id",
    perModel: true,
    request: (model) => ({ path: `/v1/models/${encodeURIComponent(model)}`, init: { method: "GET" } }),
  },
];

// Every admin route, for the admin-token checks.
const ADMIN_ROUTES: [string, string, unknown?][] = [
  ["GET", "/orgs"],
  ["POST", "/orgs", { name: "intruder" }],
  ["GET", "/orgs/a"],
  ["PATCH", "/orgs/a/limits", { rpm: 1 }],
  ["POST", "/orgs/a/grants", { model: "beta" }],
  ["DELETE", "/orgs/a/grants/alpha"],
  ["GET", "/orgs/a/keys"],
  ["POST", "/orgs/a/keys", {}],
  ["DELETE", "/keys/key_whatever"],
  ["GET", "/orgs/a/users"],
  ["POST", "/orgs/a/users", { email: "intruder@example.com" }],
  ["GET", "/audit"],
];

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** A pino destination that keeps every line, to search for secrets. */
function captureStream(): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return { stream, text: () => chunks.join("") };
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

const STORES = [
  ["PGlite", "pglite"],
  ["PostgreSQL", "postgres"],
] as const;

describe.each(STORES)("security of every /v1 route on %s", (backendName, storeKind) => {
  let harness: TestApp<FakeEngine>;
  let store: Store;
  let tenancy: Tenancy;
  let app: TestApp<FakeEngine>["app"];
  const logs = captureStream();
  /** Milliseconds added to the service's clock: expiry is tested by moving time, not by waiting. */
  let clockOffset = 0;
  /** Every secret this suite ever saw: none may show up in logs, the store or the data dir. */
  const secrets: string[] = [ADMIN_TOKEN];
  const keys: Record<"a" | "b" | "c", string> = { a: "", b: "", c: "" };

  beforeAll(async () => {
    harness = await startTestApp({
      store: storeKind,
      models: MODEL_IDS.map((id) => ({ id })),
      server: { maxBodyBytes: 1 << 20 },
      fake: { ready: false },
      adminToken: ADMIN_TOKEN,
      logger: createLogger("debug", logs.stream),
      tenancy: { now: () => Date.now() + clockOffset },
      bootstrap: false,
      // This suite presents hundreds of wrong admin tokens on purpose, all from one (in-memory) address; the
      // throttle that would answer them 429 has its own tests (src/http/admin/throttle.test.ts).
      app: {
        dashboard: {
          operatorThrottle: createOperatorThrottle([
            { per: "address", failures: 1_000_000, windowSeconds: 900 },
          ]),
        },
      },
    });
    ({ store, app } = harness);
    tenancy = harness.services.tenancy;

    // Set up through the admin API, as an operator would.
    await adminCall("POST", "/orgs", { name: "a", models: ["alpha", "shared"] });
    await adminCall("POST", "/orgs", { name: "b", models: ["beta", "shared"] });
    await adminCall("POST", "/orgs", { name: "c" });
    for (const org of ["a", "b", "c"] as const) keys[org] = await newKey(org);
  });

  afterAll(async () => {
    await harness?.close();
  });

  async function adminCall(method: string, path: string, body?: unknown, token: string | null = ADMIN_TOKEN) {
    const headers: Record<string, string> = {};
    if (token !== null) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await app.request(`/admin/v1${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
    return { status: res.status, json: (await res.json()) as any };
  }

  async function newKey(org: string, body: Record<string, unknown> = {}): Promise<string> {
    const created = await adminCall("POST", `/orgs/${org}/keys`, body);
    expect(created.status).toBe(201);
    secrets.push(created.json.key);
    return created.json.key as string;
  }

  async function call(route: Route, model: string, authorization?: string) {
    const { path, init } = route.request(model);
    const headers = new Headers(init.headers);
    if (authorization !== undefined) headers.set("authorization", authorization);
    const res = await app.request(path, { ...init, headers });
    return { status: res.status, body: (await res.json()) as ErrorBody & Record<string, unknown> };
  }

  /** The spec's error body: exactly {error:{message,type,param,code}}. */
  function expectOpenAiError(
    result: { status: number; body: ErrorBody },
    status: number,
    code: string,
    param: string | null = null,
  ) {
    expect(result.status).toBe(status);
    expect(Object.keys(result.body)).toEqual(["error"]);
    expect(Object.keys(result.body.error).sort()).toEqual(["code", "message", "param", "type"]);
    expect(result.body.error).toMatchObject({ type: "invalid_request_error", code, param });
    expect(result.body.error.message.length).toBeGreaterThan(10);
  }

  const expect401 = (result: { status: number; body: ErrorBody }) =>
    expectOpenAiError(result, 401, "invalid_api_key");

  /** Passed auth and the access check: the not-started engine answers 503 (200 for the models routes). */
  function expectAllowed(route: Route, result: { status: number; body: ErrorBody }) {
    if (route.name === "POST /v1/chat/completions") {
      expect(result.status).toBe(503);
      expect(result.body.error.code).toBe("engine_overloaded");
    } else {
      expect(result.status).toBe(200);
    }
  }

  describe.each(ROUTES)("$name", (route) => {
    it("passes a valid key of an org that may use the model (control)", async () => {
      expectAllowed(route, await call(route, "alpha", `Bearer ${keys.a}`));
    });

    it("answers 401 without an Authorization header", async () => {
      const result = await call(route, "alpha");
      expect401(result);
      expect(result.body.error.message).toBe(MISSING_API_KEY_MESSAGE);
    });

    it("answers 401 for malformed headers", async () => {
      for (const header of [
        "",
        "Bearer",
        "Bearer    ",
        "Bearer sk-short",
        `Bearer ${keys.a}x`,
        `Bearer ${keys.a} ${keys.a}`,
        `Bearer ${keys.a.slice(0, -1)}`,
        `Token ${keys.a}`,
        keys.a,
        `Bearer ${keys.a.replace("sk-", "pk-")}`,
      ]) {
        const result = await call(route, "alpha", header);
        expect401(result);
        // A presented key is never echoed: at most a masked hint.
        expect(result.body.error.message).not.toContain(keys.a.slice(5, -4));
      }
    });

    it("answers 401 for Basic auth, even carrying a valid key", async () => {
      for (const credentials of [`:${keys.a}`, `${keys.a}:`, `user:${keys.a}`]) {
        expect401(await call(route, "alpha", `Basic ${Buffer.from(credentials).toString("base64")}`));
      }
    });

    it("answers 401 for a well-formed key nobody issued", async () => {
      const unknown = `sk-${"A1b2C3d4".repeat(5)}xyz`;
      expect(unknown).toHaveLength(keys.a.length);
      expect401(await call(route, "alpha", `Bearer ${unknown}`));
    });

    it("answers 401 for a key revoked through the admin API, within a second", async () => {
      const key = await newKey("a");
      expectAllowed(route, await call(route, "alpha", `Bearer ${key}`)); // now cached
      const id = (await adminCall("GET", "/orgs/a/keys")).json.data.find(
        (k: { display: string }) => k.display === `${key.slice(0, 7)}...${key.slice(-4)}`,
      ).id;
      const revokedAt = performance.now();
      expect((await adminCall("DELETE", `/keys/${id}`)).status).toBe(200);
      expect401(await call(route, "alpha", `Bearer ${key}`));
      expect(performance.now() - revokedAt).toBeLessThan(1000);
    });

    it("answers 401 for an expired key", async () => {
      const key = await newKey("a", { expires_in: 60 });
      expectAllowed(route, await call(route, "alpha", `Bearer ${key}`));
      clockOffset += 60_000;
      try {
        expect401(await call(route, "alpha", `Bearer ${key}`));
      } finally {
        clockOffset -= 60_000;
      }
    });

    it("answers 401 for a key that expires while it is cached", async () => {
      // Expiry inside the cache TTL: only the expiry check on the cached entry can refuse it.
      const created = await tenancy.keys.create("a", { expiresAt: new Date(Date.now() + clockOffset + 300) });
      secrets.push(created.key);
      expectAllowed(route, await call(route, "alpha", `Bearer ${created.key}`));
      clockOffset += 300;
      try {
        expect401(await call(route, "alpha", `Bearer ${created.key}`));
      } finally {
        clockOffset -= 300;
      }
    });

    it("never accepts the admin token as an API key", async () => {
      expect401(await call(route, "alpha", `Bearer ${ADMIN_TOKEN}`));
    });

    if (route.perModel) {
      it("answers another org's model with the same 404 as a model that does not exist", async () => {
        const foreign = await call(route, "alpha", `Bearer ${keys.b}`);
        const missing = await call(route, NONEXISTENT, `Bearer ${keys.b}`);
        expectOpenAiError(foreign, 404, "model_not_found", "model");
        expectOpenAiError(missing, 404, "model_not_found", "model");
        expect(foreign.body.error.message.replace("alpha", "X")).toBe(
          missing.body.error.message.replace(NONEXISTENT, "X"),
        );
        // B's own and shared models pass.
        expectAllowed(route, await call(route, "beta", `Bearer ${keys.b}`));
        expectAllowed(route, await call(route, "shared", `Bearer ${keys.b}`));
      });

      it("answers 404 model_not_found for every model when the key's org has none", async () => {
        for (const model of [...MODEL_IDS, NONEXISTENT]) {
          expectOpenAiError(await call(route, model, `Bearer ${keys.c}`), 404, "model_not_found", "model");
        }
      });
    } else {
      it("lists only the key's org's models", async () => {
        const ids = async (key: string) =>
          ((await call(route, "", `Bearer ${key}`)).body.data as { id: string }[]).map((m) => m.id);
        expect(await ids(keys.a)).toEqual(["alpha", "shared"]);
        expect(await ids(keys.b)).toEqual(["beta", "shared"]);
        expect(await ids(keys.c)).toEqual([]);
      });
    }
  });

  describe("model access", () => {
    it("agrees exactly between listing, retrieving and calling, for every org and model", async () => {
      const [chat, list, retrieve] = ROUTES as [Route, Route, Route];
      for (const org of ["a", "b", "c"] as const) {
        const auth = `Bearer ${keys[org]}`;
        const listed = new Set(((await call(list, "", auth)).body.data as { id: string }[]).map((m) => m.id));
        for (const model of [...MODEL_IDS, NONEXISTENT]) {
          const got = await call(retrieve, model, auth);
          const called = await call(chat, model, auth);
          expect(got.status, `${org} retrieve ${model}`).toBe(listed.has(model) ? 200 : 404);
          expect(called.status, `${org} call ${model}`).toBe(listed.has(model) ? 503 : 404);
        }
      }
    });

    it("applies grants and revocations made through the admin API at once", async () => {
      const [chat] = ROUTES as [Route];
      const auth = `Bearer ${keys.c}`;
      expect((await call(chat, "beta", auth)).status).toBe(404); // org c's empty grant set is now cached
      expect((await adminCall("POST", "/orgs/c/grants", { model: "beta" })).status).toBe(200);
      expect((await call(chat, "beta", auth)).status).toBe(503);
      expect((await adminCall("DELETE", "/orgs/c/grants/beta")).status).toBe(200);
      expectOpenAiError(await call(chat, "beta", auth), 404, "model_not_found", "model");
    });

    it("refuses to grant a model that is not configured", async () => {
      const result = await adminCall("POST", "/orgs/c/grants", { model: NONEXISTENT });
      expect(result.status).toBe(400);
      expect(result.json.error.code).toBe("unknown_model");
    });

    // Only a shared store has other replicas: one process owns an embedded (PGlite) store, drops what it changes
    // from its caches at once (the admin API test above) and keeps entries 5 minutes (src/tenancy/tenancy.ts,
    // cacheTtlMsFor; src/tenancy/key-cache.test.ts checks both TTLs).
    if (storeKind === "postgres") {
      it("sees a revocation made on another replica within the cache TTL of one second", async () => {
        const [, list] = ROUTES as [Route, Route];
        const key = await newKey("b");
        const otherReplica = createTenancy(store.db, {
          keySecret: loadOrCreateKeySecret(harness.config),
          modelIds: MODEL_IDS,
        });
        const info = (await otherReplica.keys.list("b")).find((k) => k.display.endsWith(key.slice(-4)));
        expect((await call(list, "", `Bearer ${key}`)).status).toBe(200); // cached on this replica
        const revokedAt = performance.now();
        await otherReplica.keys.revoke(info?.id ?? "");
        await otherReplica.dispose();
        let status = 200;
        while (status === 200 && performance.now() - revokedAt < 3000) {
          status = (await call(list, "", `Bearer ${key}`)).status;
          if (status === 200) await new Promise((r) => setTimeout(r, 20));
        }
        expect(status).toBe(401);
        // The TTL is 1 s from when the entry was cached (before the revocation); the margin is for scheduling.
        expect(performance.now() - revokedAt).toBeLessThan(1250);
      });
    }
  });

  describe("admin API", () => {
    it.each(ADMIN_ROUTES)("%s %s refuses requests without the admin token", async (method, path, body) => {
      for (const token of [null, "", "wrong", `${ADMIN_TOKEN}x`, ADMIN_TOKEN.slice(0, -1)]) {
        const result = await adminCall(method, path, body, token);
        expect(result.status).toBe(401);
        expect(Object.keys(result.json.error).sort()).toEqual(["code", "message", "param", "type"]);
        expect(result.json.error.code).toBe("invalid_admin_token");
      }
      const basic = await app.request(`/admin/v1${path}`, {
        method,
        headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString("base64")}` },
      });
      expect(basic.status).toBe(401);
    });

    it.each(ADMIN_ROUTES)(
      "%s %s never accepts an API key in place of the admin token",
      async (method, path, body) => {
        for (const key of [keys.a, keys.b]) {
          const result = await adminCall(method, path, body, key);
          expect(result.status).toBe(401);
          expect(result.json.error.code).toBe("invalid_admin_token");
        }
      },
    );

    it("changed nothing for refused requests", async () => {
      const orgs = (await adminCall("GET", "/orgs")).json.data.map((o: { name: string }) => o.name);
      expect(orgs).toEqual(["a", "b", "c"]);
      expect((await adminCall("GET", "/orgs/a/users")).json.data).toEqual([]);
      const audit = (await adminCall("GET", "/audit?limit=1000")).json.data as { actor: string }[];
      expect(new Set(audit.map((e) => e.actor))).toEqual(new Set(["admin"]));
    });
  });

  describe("secrets", () => {
    it("never appear in the logs", async () => {
      // A secret in a request body and an error path, to give the logger every chance to leak one.
      await adminCall("POST", "/orgs/a/users", { email: "owner@a.test", password: "hunter2-but-longer" });
      secrets.push("hunter2-but-longer");
      const text = logs.text();
      expect(text.split("\n").length).toBeGreaterThan(100);
      expect(text).toContain('"path":"/v1/chat/completions"');
      for (const secret of secrets)
        expect(text.includes(secret), `${secret.slice(0, 6)}… in logs`).toBe(false);
    });

    it("are stored nowhere in the database", async () => {
      const tables = (await store.db.execute(
        sql`select table_name from information_schema.tables where table_schema = 'public'`,
      )) as unknown as { rows: { table_name: string }[] };
      expect(tables.rows.length).toBeGreaterThanOrEqual(6);
      let dump = "";
      for (const { table_name } of tables.rows) {
        const rows = (await store.db.execute(
          sql`select row_to_json(t)::text as row from ${sql.identifier(table_name)} t`,
        )) as unknown as { rows: { row: string }[] };
        dump += rows.rows.map((r) => r.row).join("\n");
      }
      expect(dump).toContain("owner@a.test");
      for (const secret of secrets)
        expect(dump.includes(secret), `${secret.slice(0, 6)}… in the store`).toBe(false);
    });

    it("are nowhere in the data dir", async () => {
      await harness.dispose(); // everything the store holds is on disk now
      const files = filesUnder(harness.config.dataDir);
      if (backendName === "PGlite") expect(files.length).toBeGreaterThan(100);
      expect(files.some((f) => f.endsWith("key-secret"))).toBe(true);
      for (const file of files) {
        const content = readFileSync(file).toString("latin1");
        for (const secret of secrets) {
          expect(content.includes(secret), `${secret.slice(0, 6)}… in ${file}`).toBe(false);
        }
      }
    });
  });
});
