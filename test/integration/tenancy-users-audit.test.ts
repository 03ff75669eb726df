// Users and memberships, org limits, the audit trail and coalesced last-use times, on PGlite and PostgreSQL.
import { randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/open-store.js";
import { apiKeys, auditLog, memberships, users } from "../../src/store/schema.js";
import {
  DuplicateUserError,
  GrantNotFoundError,
  OrgNotFoundError,
  TenancyValidationError,
  UnknownModelIdError,
} from "../../src/tenancy/errors.js";
import { verifyPassword } from "../../src/tenancy/password.js";
import { createTenancy, type Tenancy } from "../../src/tenancy/tenancy.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";

const MODELS = ["tiny", "small"];
const KEY_SECRET = randomBytes(32);
const FAST_SCRYPT = { N: 1 << 10, r: 8, p: 1 };

describe.each(STORE_BACKENDS)("users, limits, audit and last use on %s", (_name, makeBackend) => {
  let backend: Backend;
  let store: Store;
  let clock = Date.parse("2031-05-01T00:00:00Z");
  let tenancy: Tenancy;

  const service = (options: { lastUsedFlushMs?: number } = {}) =>
    createTenancy(store.db, {
      keySecret: KEY_SECRET,
      modelIds: MODELS,
      now: () => clock,
      passwordParams: FAST_SCRYPT,
      ...options,
    });

  beforeAll(async () => {
    backend = await makeBackend();
    store = await openStore(backend.options);
    // A long flush interval: these tests decide when last-use times are written.
    tenancy = service({ lastUsedFlushMs: 3_600_000 });
    await tenancy.orgs.create("acme", ["tiny"]);
    await tenancy.orgs.create("beta");
  });

  afterAll(async () => {
    await tenancy?.dispose();
    await store?.close();
    await backend?.cleanup();
  });

  const auditRows = () => store.db.select().from(auditLog).orderBy(auditLog.id);

  describe("users and memberships", () => {
    it("creates a user with a scrypt hash and a membership; the password is stored nowhere in clear", async () => {
      const created = await tenancy.users.create({
        orgName: "acme",
        email: "  Owner@Acme.TEST ",
        password: "correct horse battery",
        role: "owner",
      });
      expect(created).toMatchObject({ email: "owner@acme.test", role: "owner", orgName: "acme" });
      expect(created.generatedPassword).toBeNull();
      const [row] = await store.db.select().from(users).where(eq(users.id, created.id));
      expect(row?.passwordHash).toMatch(/^scrypt\$/);
      expect(JSON.stringify(row)).not.toContain("correct horse");
      expect(await verifyPassword("correct horse battery", row?.passwordHash ?? "")).toBe(true);
      const [membership] = await store.db
        .select()
        .from(memberships)
        .where(eq(memberships.userId, created.id));
      expect(membership).toMatchObject({ role: "owner" });
    });

    it("generates a password when none is given and returns it once", async () => {
      const created = await tenancy.users.create({ orgName: "beta", email: "m@beta.test" });
      expect(created.role).toBe("member");
      expect(created.generatedPassword).toMatch(/^[0-9A-Za-z]{22}$/);
      const [row] = await store.db.select().from(users).where(eq(users.id, created.id));
      expect(await verifyPassword(created.generatedPassword ?? "", row?.passwordHash ?? "")).toBe(true);
      expect(JSON.stringify(await tenancy.users.list("beta"))).not.toContain(created.generatedPassword);
    });

    it("keeps emails unique regardless of case, and writes nothing for a refused user", async () => {
      const before = (await auditRows()).length;
      await expect(
        tenancy.users.create({ orgName: "beta", email: "OWNER@acme.test" }),
      ).rejects.toBeInstanceOf(DuplicateUserError);
      await expect(tenancy.users.create({ orgName: "nope", email: "x@acme.test" })).rejects.toBeInstanceOf(
        OrgNotFoundError,
      );
      for (const input of [
        { email: "no-at-sign" },
        { email: "x@acme.test", password: "short" },
        { email: "x@acme.test", role: "admin" as "owner" },
      ]) {
        await expect(tenancy.users.create({ orgName: "acme", ...input })).rejects.toBeInstanceOf(
          TenancyValidationError,
        );
      }
      expect((await tenancy.users.list("acme")).map((u) => u.email)).toEqual(["owner@acme.test"]);
      expect(await auditRows()).toHaveLength(before);
    });

    it("refuses a role the database does not know even past the service (check constraint)", async () => {
      const [user] = await store.db.select().from(users).limit(1);
      const beta = await tenancy.orgs.getByName("beta");
      await expect(
        store.db.insert(memberships).values({ userId: user?.id ?? "", orgId: beta?.id ?? "", role: "root" }),
      ).rejects.toThrow();
    });
  });

  describe("limits", () => {
    it("stores rpm and tpm (0 = unlimited = null) at creation and on change", async () => {
      const org = await tenancy.orgs.create("metered", [], { rpm: 60, tpm: 0 });
      expect(org).toMatchObject({ rpm: 60, tpm: null });
      expect(await tenancy.orgs.setLimits("metered", { tpm: 1000 })).toMatchObject({ rpm: 60, tpm: 1000 });
      expect(await tenancy.orgs.setLimits("metered", { rpm: 0 })).toMatchObject({ rpm: null, tpm: 1000 });
      const listed = (await tenancy.orgs.list()).find((o) => o.name === "metered");
      expect(listed).toMatchObject({ rpm: null, tpm: 1000 });
    });

    it("refuses bad values, empty changes and unknown orgs", async () => {
      await expect(tenancy.orgs.setLimits("metered", {})).rejects.toBeInstanceOf(TenancyValidationError);
      await expect(tenancy.orgs.setLimits("metered", { rpm: -1 })).rejects.toBeInstanceOf(
        TenancyValidationError,
      );
      await expect(tenancy.orgs.setLimits("metered", { tpm: 2.5 })).rejects.toBeInstanceOf(
        TenancyValidationError,
      );
      await expect(tenancy.orgs.create("m2", [], { rpm: -3 })).rejects.toBeInstanceOf(TenancyValidationError);
      await expect(tenancy.orgs.setLimits("nope", { rpm: 1 })).rejects.toBeInstanceOf(OrgNotFoundError);
      expect(await tenancy.orgs.getByName("m2")).toBeNull();
      expect(await tenancy.orgs.getByName("metered")).toMatchObject({ rpm: null, tpm: 1000 });
    });
  });

  describe("audit trail", () => {
    it("records who did what to which target and when, for every kind of change", async () => {
      const start = (await auditRows()).length;
      clock += 1000;
      await tenancy.orgs.grantModel("beta", "small", "user_abc");
      await tenancy.orgs.grantModel("beta", "small"); // no change, no record
      await tenancy.orgs.revokeModel("beta", "small");
      const key = await tenancy.keys.create("beta", { name: "k", actor: "user_abc" });
      await tenancy.keys.revoke(key.id);
      await tenancy.keys.revoke(key.id); // already revoked, no record
      await tenancy.orgs.setLimits("beta", { rpm: 5 });
      const rows = (await auditRows()).slice(start);
      const beta = await tenancy.orgs.getByName("beta");
      expect(rows.map((r) => [r.actor, r.action, r.target, r.orgId])).toEqual([
        ["user_abc", "grant", "small", beta?.id],
        ["admin", "revoke-grant", "small", beta?.id],
        ["user_abc", "key.create", key.id, beta?.id],
        ["admin", "key.revoke", key.id, beta?.id],
        ["admin", "limits.set", "beta", beta?.id],
      ]);
      for (const row of rows) expect(row.at.getTime()).toBe(clock);
      expect(rows[2]?.details).toMatchObject({ name: "k", display: `${key.prefix}...${key.last4}` });
      expect(JSON.stringify(rows)).not.toContain(key.key);
      expect(rows[4]?.details).toEqual({ rpm: 5, tpm: null });
      const [keyRow] = await store.db.select().from(apiKeys).where(eq(apiKeys.id, key.id));
      expect(keyRow?.createdBy).toBe("user_abc");
    });

    it("has org.create and user.create entries, and the bootstrap is done by the system", async () => {
      const entries = await tenancy.audit.list({ limit: 1000 });
      const creates = entries.filter((e) => e.action === "org.create").map((e) => e.target);
      expect(creates).toEqual(expect.arrayContaining(["acme", "beta", "metered"]));
      const userCreates = entries.filter((e) => e.action === "user.create");
      expect(userCreates.map((e) => e.details?.email).sort()).toEqual(["m@beta.test", "owner@acme.test"]);
      const fresh = await openFreshBootstrap();
      expect(fresh).toEqual([
        ["system", "key.create"],
        ["system", "org.create"],
      ]);
    });

    it("writes no audit row when the change fails, and no change without its audit row", async () => {
      const before = (await auditRows()).length;
      await expect(tenancy.orgs.revokeModel("beta", "tiny")).rejects.toBeInstanceOf(GrantNotFoundError);
      await expect(tenancy.orgs.grantModel("beta", "huge")).rejects.toBeInstanceOf(UnknownModelIdError);
      await expect(tenancy.keys.create("nope")).rejects.toBeInstanceOf(OrgNotFoundError);
      expect(await auditRows()).toHaveLength(before);

      // Same transaction: an audit row that cannot be written rolls the change back.
      await store.db.execute(
        sqlText("alter table audit_log add constraint audit_block check (action <> 'grant') not valid"),
      );
      try {
        await expect(tenancy.orgs.grantModel("beta", "tiny")).rejects.toThrow();
        expect((await tenancy.orgs.getByName("beta"))?.models).toEqual([]);
      } finally {
        await store.db.execute(sqlText("alter table audit_log drop constraint audit_block"));
      }
    });

    it("lists newest first, by org, with paging", async () => {
      const all = await tenancy.audit.list();
      expect(all.map((e) => e.id)).toEqual([...all.map((e) => e.id)].sort((a, b) => b - a));
      const metered = await tenancy.audit.list({ orgName: "metered" });
      expect(metered.map((e) => e.action)).toEqual(["limits.set", "limits.set", "org.create"]);
      const page = await tenancy.audit.list({ limit: 2, beforeId: all[0]?.id });
      expect(page.map((e) => e.id)).toEqual([all[1]?.id, all[2]?.id]);
      await expect(tenancy.audit.list({ limit: 0 })).rejects.toBeInstanceOf(TenancyValidationError);
      await expect(tenancy.audit.list({ orgName: "nope" })).rejects.toBeInstanceOf(OrgNotFoundError);
    });
  });

  describe("last_used_at", () => {
    it("is coalesced in memory: many uses, no write until the flush, then one write of the latest", async () => {
      const key = await tenancy.keys.create("acme");
      const firstUse = clock;
      for (let i = 0; i < 50; i++) {
        expect(await tenancy.keys.verify(key.key)).not.toBeNull();
        clock += 10;
      }
      const lastUse = clock - 10;
      const stored = async () =>
        (await store.db.select().from(apiKeys).where(eq(apiKeys.id, key.id)))[0]?.lastUsedAt?.getTime() ??
        null;
      expect(await stored()).toBeNull();
      // Lists already show the pending use.
      const listed = (await tenancy.keys.list("acme")).find((k) => k.id === key.id);
      expect(listed?.lastUsedAt?.getTime()).toBe(lastUse);
      expect(lastUse).toBeGreaterThan(firstUse);
      await tenancy.flush();
      expect(await stored()).toBe(lastUse);
    });

    it("never moves back when another replica wrote a later use", async () => {
      const key = await tenancy.keys.create("acme");
      await tenancy.keys.verify(key.key);
      const usedHere = clock;
      const later = new Date(clock + 60_000);
      await store.db.update(apiKeys).set({ lastUsedAt: later }).where(eq(apiKeys.id, key.id));
      await tenancy.flush();
      const [row] = await store.db.select().from(apiKeys).where(eq(apiKeys.id, key.id));
      expect(row?.lastUsedAt?.getTime()).toBe(later.getTime());
      expect(usedHere).toBeLessThan(later.getTime());
    });

    it("is flushed by the timer every few seconds and by dispose() on shutdown", async () => {
      const timed = service({ lastUsedFlushMs: 50 });
      const a = await timed.keys.create("acme");
      await timed.keys.verify(a.key);
      const written = async (id: string) =>
        (await store.db.select().from(apiKeys).where(eq(apiKeys.id, id)))[0]?.lastUsedAt ?? null;
      const deadline = Date.now() + 5000;
      while ((await written(a.id)) === null && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      expect((await written(a.id))?.getTime()).toBe(clock);

      const slow = service({ lastUsedFlushMs: 3_600_000 });
      const b = await slow.keys.create("acme");
      await slow.keys.verify(b.key);
      expect(await written(b.id)).toBeNull();
      await slow.dispose();
      expect((await written(b.id))?.getTime()).toBe(clock);
      await timed.dispose();
    });

    it("keeps uses whose write failed for the next flush", async () => {
      const errors: unknown[] = [];
      const flaky = createTenancy(store.db, {
        keySecret: KEY_SECRET,
        modelIds: MODELS,
        now: () => clock,
        lastUsedFlushMs: 3_600_000,
        onBackgroundError: (err) => errors.push(err),
      });
      const key = await flaky.keys.create("acme");
      await flaky.keys.verify(key.key);
      await store.db.execute(sqlText("alter table api_keys rename column last_used_at to lu_tmp"));
      try {
        await expect(flaky.flush()).rejects.toThrow();
      } finally {
        await store.db.execute(sqlText("alter table api_keys rename column lu_tmp to last_used_at"));
      }
      await flaky.flush();
      const [row] = await store.db.select().from(apiKeys).where(eq(apiKeys.id, key.id));
      expect(row?.lastUsedAt?.getTime()).toBe(clock);
      await flaky.dispose();
    });
  });

  /** Bootstraps a second, empty database of the same kind and returns its audit rows as [actor, action]. */
  async function openFreshBootstrap(): Promise<[string, string][]> {
    const other = await makeBackend();
    const otherStore = await openStore(other.options);
    try {
      const fresh = createTenancy(otherStore.db, { keySecret: KEY_SECRET, modelIds: MODELS });
      await fresh.bootstrap(MODELS);
      await fresh.dispose();
      const rows = await otherStore.db.select().from(auditLog);
      return rows
        .map((r) => [r.actor, r.action] as [string, string])
        .sort((x, y) => x[1].localeCompare(y[1]));
    } finally {
      await otherStore.close();
      await other.cleanup();
    }
  }
});

function sqlText(text: string) {
  return sql.raw(text);
}
