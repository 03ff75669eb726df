// One tenancy suite, run against the embedded PGlite store and a real PostgreSQL: the same code and SQL on both.
import { randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashApiKey } from "../../src/auth/api-key.js";
import { openStore, type Store } from "../../src/store/open-store.js";
import { apiKeys, organizations } from "../../src/store/schema.js";
import {
  DuplicateOrgError,
  GrantNotFoundError,
  KeyNotFoundError,
  OrgNotFoundError,
  TenancyValidationError,
  UnknownModelIdError,
} from "../../src/tenancy/errors.js";
import { createTenancy, type Tenancy } from "../../src/tenancy/tenancy.js";
import { type Backend, pgliteBackend, STORE_BACKENDS } from "../support/store-backends.js";

const MODELS = ["tiny", "small", "vendor/big"];
const KEY_SECRET = randomBytes(32);
describe.each(STORE_BACKENDS)("tenancy store on %s", (_name, makeBackend) => {
  let backend: Backend;
  let store: Store;
  let clock = Date.parse("2030-01-01T00:00:00Z");
  let tenancy: Tenancy;

  beforeAll(async () => {
    backend = await makeBackend();
    store = await openStore(backend.options);
    tenancy = createTenancy(store.db, { keySecret: KEY_SECRET, modelIds: MODELS, now: () => clock });
  });

  afterAll(async () => {
    await tenancy?.dispose();
    await store?.close();
    await backend?.cleanup();
  });

  it("is migrated and answers pings", async () => {
    await store.ping();
    // Both drivers answer raw SQL with { rows }; the common base type cannot say so.
    const tables = (await store.db.execute(
      sql`select table_name from information_schema.tables where table_schema = 'public' order by table_name`,
    )) as unknown as { rows: { table_name: string }[] };
    expect(tables.rows.map((r) => r.table_name)).toEqual([
      "api_keys",
      "audit_log",
      "dashboard_flashes",
      "invitations",
      "memberships",
      "model_catalogue",
      "model_grants",
      "organizations",
      "responses",
      "sessions",
      "usage_records",
      "users",
    ]);
  });

  it("bootstraps an empty store exactly once, even when two starts race", async () => {
    const results = await Promise.all([tenancy.bootstrap(MODELS), tenancy.bootstrap(MODELS)]);
    const winners = results.filter((r) => r !== null);
    expect(winners).toHaveLength(1);
    const first = winners[0];
    expect(first?.orgName).toBe("default");
    const principal = await tenancy.keys.verify(first?.key ?? "");
    expect(principal?.orgName).toBe("default");
    expect(principal?.keyId).toBe(first?.keyId);
    const org = await tenancy.orgs.getByName("default");
    expect(org?.models).toEqual([...MODELS].sort());
    expect(await tenancy.keys.list("default")).toHaveLength(1);
    expect(await tenancy.bootstrap(MODELS)).toBeNull();
  });

  it("opens the same database again without re-running migrations", async () => {
    if (backend.options.databaseUrl === undefined) return; // PGlite allows one process per dir; covered below
    const again = await openStore(backend.options);
    try {
      const orgs = await again.db.select().from(organizations);
      expect(orgs.map((o) => o.name)).toContain("default");
    } finally {
      await again.close();
    }
  });

  it("creates, finds and lists organizations with their grants", async () => {
    const acme = await tenancy.orgs.create("acme", ["small", "tiny", "small"]);
    expect(acme.id).toMatch(/^org_[0-9A-Za-z]+$/);
    expect(acme.models).toEqual(["small", "tiny"]);
    expect(acme.rpm).toBeNull();
    const beta = await tenancy.orgs.create("beta");
    expect(beta.models).toEqual([]);
    expect((await tenancy.orgs.getByName("acme"))?.id).toBe(acme.id);
    expect(await tenancy.orgs.getByName("nope")).toBeNull();
    const list = await tenancy.orgs.list();
    expect(list.map((o) => o.name)).toEqual(["acme", "beta", "default"]);
    expect(list.find((o) => o.name === "acme")?.models).toEqual(["small", "tiny"]);
  });

  it("refuses duplicate names, bad names and unknown models, creating nothing", async () => {
    await expect(tenancy.orgs.create("acme")).rejects.toBeInstanceOf(DuplicateOrgError);
    await expect(tenancy.orgs.create("has space")).rejects.toBeInstanceOf(TenancyValidationError);
    await expect(tenancy.orgs.create("a/b")).rejects.toBeInstanceOf(TenancyValidationError);
    await expect(tenancy.orgs.create("gamma", ["tiny", "huge"])).rejects.toBeInstanceOf(UnknownModelIdError);
    expect(await tenancy.orgs.getByName("gamma")).toBeNull();
  });

  it("grants and revokes models, idempotently for grants", async () => {
    const acme = await tenancy.orgs.getByName("acme");
    if (acme === null) throw new Error("acme missing");
    expect((await tenancy.orgs.grantModel("acme", "vendor/big")).models).toEqual([
      "small",
      "tiny",
      "vendor/big",
    ]);
    expect((await tenancy.orgs.grantModel("acme", "vendor/big")).models).toEqual([
      "small",
      "tiny",
      "vendor/big",
    ]);
    expect(await tenancy.orgs.allowedModels(acme.id)).toEqual(new Set(["small", "tiny", "vendor/big"]));
    expect((await tenancy.orgs.revokeModel("acme", "tiny")).models).toEqual(["small", "vendor/big"]);
    // Changes made through this service show at once, without waiting for the cache.
    expect(await tenancy.orgs.allowedModels(acme.id)).toEqual(new Set(["small", "vendor/big"]));
    await expect(tenancy.orgs.revokeModel("acme", "tiny")).rejects.toBeInstanceOf(GrantNotFoundError);
    await expect(tenancy.orgs.grantModel("acme", "huge")).rejects.toBeInstanceOf(UnknownModelIdError);
    await expect(tenancy.orgs.grantModel("nope", "tiny")).rejects.toBeInstanceOf(OrgNotFoundError);
    await expect(tenancy.orgs.revokeModel("nope", "tiny")).rejects.toBeInstanceOf(OrgNotFoundError);
  });

  it("creates keys whose secret is stored nowhere, only its HMAC", async () => {
    const created = await tenancy.keys.create("acme", { name: "ci" });
    expect(created.key).toMatch(/^sk-[0-9A-Za-z]{43}$/);
    expect(created.id).toMatch(/^key_[0-9A-Za-z]+$/);
    expect(created).toMatchObject({ name: "ci", orgName: "acme", prefix: created.key.slice(0, 7) });
    const rows = await store.db.select().from(apiKeys).where(eq(apiKeys.id, created.id));
    expect(rows).toHaveLength(1);
    const row = rows[0];
    expect(row?.hash).toBe(hashApiKey(KEY_SECRET, created.key));
    const body = created.key.slice(3);
    expect(JSON.stringify(rows)).not.toContain(body.slice(0, 20));
    expect(JSON.stringify(rows)).not.toContain(body.slice(-20));
  });

  it("lists keys without secrets or hashes", async () => {
    const created = await tenancy.keys.create("beta", { name: "one" });
    clock += 1; // lists are ordered by creation time
    await tenancy.keys.create("beta");
    const keys = await tenancy.keys.list("beta");
    expect(keys.map((k) => k.name)).toEqual(["one", null]);
    const text = JSON.stringify(keys);
    expect(text).not.toContain(created.key);
    expect(text).not.toContain(hashApiKey(KEY_SECRET, created.key));
    expect(keys[0]).not.toHaveProperty("hash");
    expect(keys[0]?.display).toBe(`${created.key.slice(0, 7)}...${created.key.slice(-4)}`);
    await expect(tenancy.keys.list("nope")).rejects.toBeInstanceOf(OrgNotFoundError);
    await expect(tenancy.keys.create("nope")).rejects.toBeInstanceOf(OrgNotFoundError);
  });

  it("gives principals the org's limits, and a limit change reaches cached principals at once", async () => {
    const created = await tenancy.keys.create("acme");
    expect(await tenancy.keys.verify(created.key)).toMatchObject({ rpm: null, tpm: null });
    await tenancy.orgs.setLimits("acme", { rpm: 7, tpm: 900 });
    expect(await tenancy.keys.verify(created.key)).toMatchObject({ rpm: 7, tpm: 900 });
    await tenancy.orgs.setLimits("acme", { rpm: 0, tpm: 0 });
    expect(await tenancy.keys.verify(created.key)).toMatchObject({ rpm: null, tpm: null });
  });

  it("verifies keys to their org and records last use (written at the next flush)", async () => {
    const created = await tenancy.keys.create("acme");
    const principal = await tenancy.keys.verify(created.key);
    expect(principal).toEqual({
      orgId: created.orgId,
      orgName: "acme",
      keyId: created.id,
      rpm: null,
      tpm: null,
    });
    await tenancy.flush();
    const [row] = await store.db.select().from(apiKeys).where(eq(apiKeys.id, created.id));
    expect(row?.lastUsedAt?.getTime()).toBe(clock);
    const wrong = `${created.key.slice(0, -1)}${created.key.endsWith("A") ? "B" : "A"}`;
    expect(await tenancy.keys.verify(wrong)).toBeNull();
    expect(await tenancy.keys.verify("sk-not-a-key")).toBeNull();
    expect(await tenancy.keys.verify("")).toBeNull();
  });

  it("stops accepting a revoked key at once; revoking twice is fine", async () => {
    const created = await tenancy.keys.create("acme");
    expect(await tenancy.keys.verify(created.key)).not.toBeNull(); // now cached
    const revoked = await tenancy.keys.revoke(created.id);
    expect(revoked.revokedAt?.getTime()).toBe(clock);
    expect(await tenancy.keys.verify(created.key)).toBeNull();
    expect((await tenancy.keys.revoke(created.id)).revokedAt?.getTime()).toBe(clock);
    await expect(tenancy.keys.revoke("key_missing")).rejects.toBeInstanceOf(KeyNotFoundError);
  });

  it("sees a revocation made by another replica within the cache TTL", async () => {
    const created = await tenancy.keys.create("acme");
    expect(await tenancy.keys.verify(created.key)).not.toBeNull();
    const otherReplica = createTenancy(store.db, {
      keySecret: KEY_SECRET,
      modelIds: MODELS,
      now: () => clock,
    });
    await otherReplica.keys.revoke(created.id);
    expect(await tenancy.keys.verify(created.key)).not.toBeNull(); // still cached here
    clock += 1000;
    expect(await tenancy.keys.verify(created.key)).toBeNull();
  });

  it("refuses expired keys, also while cached", async () => {
    const created = await tenancy.keys.create("acme", { expiresAt: new Date(clock + 500) });
    expect(await tenancy.keys.verify(created.key)).not.toBeNull();
    clock += 500;
    expect(await tenancy.keys.verify(created.key)).toBeNull();
    clock += 5000;
    expect(await tenancy.keys.verify(created.key)).toBeNull();
    await expect(tenancy.keys.create("acme", { expiresAt: new Date(clock - 1) })).rejects.toBeInstanceOf(
      TenancyValidationError,
    );
  });

  it("keeps one service's cached grants for at most the TTL when another replica changes them", async () => {
    const beta = await tenancy.orgs.getByName("beta");
    if (beta === null) throw new Error("beta missing");
    expect(await tenancy.orgs.allowedModels(beta.id)).toEqual(new Set());
    const otherReplica = createTenancy(store.db, {
      keySecret: KEY_SECRET,
      modelIds: MODELS,
      now: () => clock,
    });
    await otherReplica.orgs.grantModel("beta", "tiny");
    clock += 1000;
    expect(await tenancy.orgs.allowedModels(beta.id)).toEqual(new Set(["tiny"]));
  });
});

describe("PGlite persistence", () => {
  it("keeps data in <dataDir>/pg across restarts", async () => {
    const backend = await pgliteBackend();
    try {
      const first = await openStore(backend.options);
      const service = createTenancy(first.db, { keySecret: KEY_SECRET, modelIds: MODELS });
      const created = await (async () => {
        await service.orgs.create("persisted", ["tiny"]);
        return service.keys.create("persisted");
      })();
      await first.close();

      const second = await openStore(backend.options);
      try {
        const again = createTenancy(second.db, { keySecret: KEY_SECRET, modelIds: MODELS });
        expect((await again.keys.verify(created.key))?.orgName).toBe("persisted");
        expect((await again.orgs.getByName("persisted"))?.models).toEqual(["tiny"]);
      } finally {
        await second.close();
      }
    } finally {
      await backend.cleanup();
    }
  });
});
