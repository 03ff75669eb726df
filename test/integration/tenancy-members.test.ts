// Members, sessions and the first owner on both stores: roles, the last-owner rule under concurrency, accounts
// that end with their last membership, session expiry, and the bootstrap's one-time owner password.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/open-store.js";
import { auditLog, sessions, users } from "../../src/store/schema.js";
import { DEFAULT_OWNER_EMAIL } from "../../src/tenancy/bootstrap.js";
import { AlreadyMemberError, LastOwnerError, MemberNotFoundError } from "../../src/tenancy/errors.js";
import { createTenancy, type Tenancy } from "../../src/tenancy/tenancy.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";

const FAST_SCRYPT = { N: 1 << 10, r: 8, p: 1 };
const POLICY = { idleMs: 60 * 60_000, lifetimeMs: 24 * 60 * 60_000 };

describe.each(STORE_BACKENDS)("members and sessions on %s", (_name, makeBackend) => {
  let backend: Backend;
  let store: Store;
  let tenancy: Tenancy;
  let clock = Date.parse("2031-05-01T00:00:00Z");
  let ownerPassword = "";

  beforeAll(async () => {
    backend = await makeBackend();
    store = await openStore(backend.options);
    tenancy = createTenancy(store.db, {
      keySecret: randomBytes(32),
      modelIds: ["tiny"],
      passwordParams: FAST_SCRYPT,
      now: () => clock,
    });
    const boot = await tenancy.bootstrap(["tiny"], { ownerEmail: DEFAULT_OWNER_EMAIL });
    ownerPassword = boot?.owner?.password ?? "";
  });

  afterAll(async () => {
    await tenancy?.dispose();
    await store?.close();
    await backend?.cleanup();
  });

  it("bootstraps the first owner with a random password, returned once and stored only as a hash", async () => {
    expect(ownerPassword).toMatch(/^[A-Za-z0-9]{22}$/);
    const [row] = await store.db.select().from(users).where(eq(users.email, DEFAULT_OWNER_EMAIL));
    expect(row?.passwordHash).toMatch(/^scrypt\$/);
    expect(JSON.stringify(await store.db.select().from(auditLog))).not.toContain(ownerPassword);
    const owner = await tenancy.members.authenticate(" Owner@Hearth.localhost ", ownerPassword);
    expect(owner?.email).toBe(DEFAULT_OWNER_EMAIL);
    expect(await tenancy.members.membershipsOf(owner?.id ?? "")).toEqual([
      expect.objectContaining({ orgName: "default", role: "owner" }),
    ]);
    expect(await tenancy.members.authenticate(DEFAULT_OWNER_EMAIL, "wrong password")).toBeNull();
    expect(await tenancy.members.authenticate("nobody@example.test", ownerPassword)).toBeNull();
  });

  it("keeps at least one owner, even when two owners demote each other at the same time", async () => {
    await tenancy.orgs.create("duo");
    const a = await tenancy.users.create({ orgName: "duo", email: "a@duo.test", role: "owner" });
    const b = await tenancy.users.create({ orgName: "duo", email: "b@duo.test", role: "owner" });
    const results = await Promise.allSettled([
      tenancy.members.setRole("duo", a.id, "member", b.id),
      tenancy.members.setRole("duo", b.id, "member", a.id),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const refused = results.find((r) => r.status === "rejected");
    expect(refused?.status === "rejected" && refused.reason).toBeInstanceOf(LastOwnerError);
    const roles = (await tenancy.users.list("duo")).map((u) => u.role).sort();
    expect(roles).toEqual(["member", "owner"]);
    const lastOwner = (await tenancy.users.list("duo")).find((u) => u.role === "owner");
    await expect(tenancy.members.remove("duo", lastOwner?.id ?? "", "admin")).rejects.toBeInstanceOf(
      LastOwnerError,
    );
  });

  it("adds an existing account to a second org by its accepted invitation; the last membership's removal deletes it", async () => {
    await tenancy.orgs.create("second");
    const first = await tenancy.users.create({ orgName: "second", email: "x@second.test", role: "member" });
    const invitation = await tenancy.invitations.create({
      orgName: "duo",
      email: "X@second.test",
      role: "member",
      actor: "admin",
    });
    await tenancy.invitations.accept(invitation.token, { id: first.id, email: first.email });
    await expect(
      tenancy.invitations.create({ orgName: "duo", email: "x@second.test", role: "member", actor: "admin" }),
    ).rejects.toBeInstanceOf(AlreadyMemberError);
    const id = first.id;
    const { token } = await tenancy.sessions.create({ userId: id }, POLICY);
    expect(await tenancy.members.remove("duo", id, "admin")).toEqual({
      email: "x@second.test",
      userDeleted: false,
    });
    expect((await tenancy.sessions.resolve(token, POLICY)).status).toBe("active");
    expect(await tenancy.members.remove("second", id, "admin")).toEqual({
      email: "x@second.test",
      userDeleted: true,
    });
    expect((await tenancy.sessions.resolve(token, POLICY)).status).toBe("unknown");
    await expect(tenancy.members.remove("second", id, "admin")).rejects.toBeInstanceOf(MemberNotFoundError);
  });

  it("resolves sessions within the idle and absolute limits only, and forgets them at sign-out", async () => {
    const owner = await tenancy.members.authenticate(DEFAULT_OWNER_EMAIL, ownerPassword);
    const { token, session } = await tenancy.sessions.create({ userId: owner?.id ?? "" }, POLICY);
    const [row] = await store.db.select().from(sessions).where(eq(sessions.id, session.id));
    expect(row?.tokenHash).toHaveLength(64);
    expect(JSON.stringify(row)).not.toContain(token);
    expect(await tenancy.sessions.resolve(token, POLICY)).toMatchObject({
      status: "active",
      session: { email: DEFAULT_OWNER_EMAIL },
    });
    clock += POLICY.idleMs;
    expect((await tenancy.sessions.resolve(token, POLICY)).status).toBe("expired");
    expect((await tenancy.sessions.resolve(token, POLICY)).status).toBe("unknown");

    const other = await tenancy.sessions.create({ userId: owner?.id ?? "" }, POLICY);
    await tenancy.sessions.end(other.token);
    expect((await tenancy.sessions.resolve(other.token, POLICY)).status).toBe("unknown");
    expect((await tenancy.sessions.resolve("not a token", POLICY)).status).toBe("unknown");
  });
});
