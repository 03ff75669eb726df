// Invitations, claims, password changes and the dashboard flash on PGlite and PostgreSQL: no org owner can
// pre-hijack an account (issue 12, item 2), the inviter gets the same answer for existing and new emails, links are
// single-use and expire, and a flash is read once by its own session only.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/open-store.js";
import { auditLog, dashboardFlashes, invitations, memberships, users } from "../../src/store/schema.js";
import {
  AccountExistsError,
  DuplicateUserError,
  InvitationNotFoundError,
  TenancyValidationError,
  WrongPasswordError,
} from "../../src/tenancy/errors.js";
import { FLASH_TTL_MS } from "../../src/tenancy/flash.js";
import { DEFAULT_INVITATION_TTL_MS } from "../../src/tenancy/invitations.js";
import { createTenancy, type Tenancy } from "../../src/tenancy/tenancy.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";

const FAST_SCRYPT = { N: 1 << 10, r: 8, p: 1 };
const POLICY = { idleMs: 60 * 60_000, lifetimeMs: 24 * 60 * 60_000 };

describe.each(STORE_BACKENDS)("invitations and accounts on %s", (_name, makeBackend) => {
  let backend: Backend;
  let store: Store;
  let tenancy: Tenancy;
  let clock = Date.parse("2031-05-01T00:00:00Z");
  let ownerA: { id: string; email: string };
  let ownerB: { id: string; email: string };

  beforeAll(async () => {
    backend = await makeBackend();
    store = await openStore(backend.options);
    tenancy = createTenancy(store.db, {
      keySecret: randomBytes(32),
      modelIds: ["tiny"],
      passwordParams: FAST_SCRYPT,
      now: () => clock,
    });
    await tenancy.orgs.create("org-a");
    await tenancy.orgs.create("org-b");
    ownerA = await tenancy.users.create({
      orgName: "org-a",
      email: "owner@a.test",
      password: "owner a pw 1",
      role: "owner",
    });
    ownerB = await tenancy.users.create({
      orgName: "org-b",
      email: "owner@b.test",
      password: "owner b pw 1",
      role: "owner",
    });
  });

  afterAll(async () => {
    await tenancy?.dispose();
    await store?.close();
    await backend?.cleanup();
  });

  const orgsOf = async (userId: string) =>
    (await tenancy.members.membershipsOf(userId)).map((m) => m.orgName);
  const userByEmail = async (email: string) =>
    (await store.db.select().from(users).where(eq(users.email, email)))[0];

  it("answers an existing and a new email alike: no account is created or looked at, no password exists", async () => {
    const existing = await tenancy.invitations.create({
      orgName: "org-a",
      email: "owner@b.test",
      role: "member",
      actor: ownerA.id,
    });
    const fresh = await tenancy.invitations.create({
      orgName: "org-a",
      email: "new@c.test",
      role: "member",
      actor: ownerA.id,
    });
    const shape = (v: object) =>
      Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x instanceof Date ? "date" : typeof x]));
    expect(shape(existing)).toEqual(shape(fresh));
    expect(Object.keys(existing).sort()).toEqual(
      ["createdAt", "email", "expiresAt", "id", "invitedBy", "orgName", "role", "token"].sort(),
    );
    expect(existing.token).toMatch(/^[0-9A-Za-z]{43}$/);
    expect(fresh.expiresAt.getTime() - clock).toBe(DEFAULT_INVITATION_TTL_MS);
    // Nothing happened to either account: the existing one is still only in org-b, the new one does not exist.
    expect(await orgsOf(ownerB.id)).toEqual(["org-b"]);
    expect(await userByEmail("new@c.test")).toBeUndefined();
    // Only the token's hash is stored.
    const rows = await store.db.select().from(invitations);
    expect(JSON.stringify(rows)).not.toContain(existing.token);
    expect(JSON.stringify(rows)).not.toContain(fresh.token);
    // The two audit rows differ only in ids and email.
    const audits = (await tenancy.audit.list({ orgName: "org-a", limit: 2 })).map((e) => ({
      action: e.action,
      actor: e.actor,
      keys: Object.keys(e.details ?? {}).sort(),
    }));
    expect(audits[0]).toEqual(audits[1]);
    expect(audits[0]).toEqual({
      action: "invitation.create",
      actor: ownerA.id,
      keys: ["email", "role", "superseded"],
    });
  });

  it("pre-hijacking: org A's owner, even claiming A's link for the victim's email, gains nothing from org B's invitation", async () => {
    const victim = "victim@mail.test";
    const linkA = await tenancy.invitations.create({
      orgName: "org-a",
      email: victim,
      role: "member",
      actor: ownerA.id,
    });
    const linkB = await tenancy.invitations.create({
      orgName: "org-b",
      email: victim,
      role: "owner",
      actor: ownerB.id,
    });
    // The worst case: org A's owner uses their own link and so holds an account for the victim's email.
    const squatted = await tenancy.invitations.claim(linkA.token, "chosen by owner A");
    expect(squatted.orgName).toBe("org-a");
    // Org B's invitation is listed for that email, but accepting needs org B's link, which went to the victim.
    expect((await tenancy.invitations.pendingFor(victim)).map((i) => i.orgName)).toEqual(["org-b"]);
    await expect(tenancy.invitations.accept(linkA.token, squatted.user)).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    expect(await orgsOf(squatted.user.id)).toEqual(["org-a"]);
    // The victim's link cannot be claimed as a new account over the squatted one; it stays usable.
    await expect(tenancy.invitations.claim(linkB.token, "victim's own pw")).rejects.toBeInstanceOf(
      AccountExistsError,
    );
    expect((await tenancy.invitations.find(linkB.token)).invitation.orgName).toBe("org-b");
    expect(await orgsOf(squatted.user.id)).toEqual(["org-a"]);
    expect(await tenancy.members.authenticate(victim, "victim's own pw")).toBeNull();
  });

  it("lets the invitee accept with their own account and the link; nobody else can use that link", async () => {
    const person = "person@mail.test";
    const first = await tenancy.invitations.create({
      orgName: "org-a",
      email: person,
      role: "member",
      actor: ownerA.id,
    });
    const claimed = await tenancy.invitations.claim(first.token, "person's own pw");
    // Org A's owner saw a link, never a password: the password is the claimer's.
    expect(await tenancy.members.authenticate(person, "person's own pw")).toMatchObject({ email: person });
    const second = await tenancy.invitations.create({
      orgName: "org-b",
      email: person,
      role: "member",
      actor: ownerB.id,
    });
    // Org A's owner signed in as themselves cannot accept an invitation addressed to someone else.
    await expect(tenancy.invitations.accept(second.token, ownerA)).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    expect(await orgsOf(ownerA.id)).toEqual(["org-a"]);
    expect(await orgsOf(claimed.user.id)).toEqual(["org-a"]);
    expect(await tenancy.invitations.accept(second.token, claimed.user)).toEqual({ orgName: "org-b" });
    expect(await orgsOf(claimed.user.id)).toEqual(["org-a", "org-b"]);
    // Single use: neither accepting nor claiming works twice.
    await expect(tenancy.invitations.accept(second.token, claimed.user)).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    await expect(tenancy.invitations.claim(first.token, "another pw 123")).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    const actions = (await tenancy.audit.list({ orgName: "org-b", limit: 1 }))[0];
    expect(actions).toMatchObject({ action: "invitation.accept", actor: claimed.user.id, target: second.id });
  });

  it("uses a link once even when two claims race", async () => {
    const invitation = await tenancy.invitations.create({
      orgName: "org-b",
      email: "race@mail.test",
      role: "member",
      actor: ownerB.id,
    });
    const results = await Promise.allSettled([
      tenancy.invitations.claim(invitation.token, "first password"),
      tenancy.invitations.claim(invitation.token, "second password"),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect((await store.db.select().from(users).where(eq(users.email, "race@mail.test"))).length).toBe(1);
  });

  it("expires links, supersedes a re-sent one, and lets owners withdraw and invitees decline", async () => {
    const old = await tenancy.invitations.create({
      orgName: "org-a",
      email: "late@mail.test",
      role: "member",
      actor: ownerA.id,
    });
    const resent = await tenancy.invitations.create({
      orgName: "org-a",
      email: "late@mail.test",
      role: "owner",
      actor: ownerA.id,
    });
    await expect(tenancy.invitations.find(old.token)).rejects.toBeInstanceOf(InvitationNotFoundError);
    expect((await tenancy.invitations.find(resent.token)).invitation.role).toBe("owner");
    clock += DEFAULT_INVITATION_TTL_MS;
    await expect(tenancy.invitations.find(resent.token)).rejects.toBeInstanceOf(InvitationNotFoundError);
    await expect(tenancy.invitations.claim(resent.token, "too late pw 1")).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    expect(await userByEmail("late@mail.test")).toBeUndefined();

    const withdrawn = await tenancy.invitations.create({
      orgName: "org-a",
      email: "w@mail.test",
      role: "member",
      actor: ownerA.id,
    });
    await expect(tenancy.invitations.withdraw("org-b", withdrawn.id, ownerB.id)).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    await tenancy.invitations.withdraw("org-a", withdrawn.id, ownerA.id);
    await expect(tenancy.invitations.find(withdrawn.token)).rejects.toBeInstanceOf(InvitationNotFoundError);

    const declined = await tenancy.invitations.create({
      orgName: "org-a",
      email: "owner@b.test",
      role: "member",
      actor: ownerA.id,
    });
    await expect(tenancy.invitations.decline({ id: declined.id }, ownerA)).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    await tenancy.invitations.decline({ id: declined.id }, ownerB);
    await expect(tenancy.invitations.accept(declined.token, ownerB)).rejects.toBeInstanceOf(
      InvitationNotFoundError,
    );
    expect(await orgsOf(ownerB.id)).toEqual(["org-b"]);
    const actions = (await tenancy.audit.list({ orgName: "org-a", limit: 4 })).map((e) => e.action);
    expect(actions).toEqual([
      "invitation.decline",
      "invitation.create",
      "invitation.withdraw",
      "invitation.create",
    ]);
  });

  it("refuses a short password when claiming, and an invitation for a current member", async () => {
    const invitation = await tenancy.invitations.create({
      orgName: "org-b",
      email: "short@mail.test",
      role: "member",
      actor: ownerB.id,
    });
    await expect(tenancy.invitations.claim(invitation.token, "short")).rejects.toBeInstanceOf(
      TenancyValidationError,
    );
    expect((await tenancy.invitations.find(invitation.token)).accountExists).toBe(false);
    await expect(
      tenancy.invitations.create({
        orgName: "org-b",
        email: "OWNER@b.test",
        role: "member",
        actor: ownerB.id,
      }),
    ).rejects.toThrow(/already a member/);
  });

  it("the operator's `users create` refuses an email that has an account in another org, saying so", async () => {
    await expect(
      tenancy.users.create({ orgName: "org-a", email: "owner@b.test", password: "whatever pw 1" }),
    ).rejects.toBeInstanceOf(DuplicateUserError);
    expect(await orgsOf(ownerB.id)).toEqual(["org-b"]);
    expect(await tenancy.members.authenticate("owner@b.test", "owner b pw 1")).not.toBeNull();
  });

  it("changes a password only with the current one, audited; other sessions end", async () => {
    const user = await tenancy.users.create({
      orgName: "org-a",
      email: "pw@a.test",
      password: "old password 1",
    });
    const keep = await tenancy.sessions.create({ userId: user.id }, POLICY);
    const other = await tenancy.sessions.create({ userId: user.id }, POLICY);
    await expect(
      tenancy.members.changePassword(user.id, "wrong password", "new password 1"),
    ).rejects.toBeInstanceOf(WrongPasswordError);
    await expect(tenancy.members.changePassword(user.id, "old password 1", "short")).rejects.toBeInstanceOf(
      TenancyValidationError,
    );
    expect(await tenancy.members.authenticate("pw@a.test", "old password 1")).not.toBeNull();
    await tenancy.members.changePassword(user.id, "old password 1", "new password 1");
    expect(await tenancy.sessions.endOthers(user.id, keep.session.id)).toBe(1);
    expect(await tenancy.members.authenticate("pw@a.test", "old password 1")).toBeNull();
    expect(await tenancy.members.authenticate("pw@a.test", "new password 1")).not.toBeNull();
    expect((await tenancy.sessions.resolve(keep.token, POLICY)).status).toBe("active");
    expect((await tenancy.sessions.resolve(other.token, POLICY)).status).toBe("unknown");
    const [audit] = await store.db.select().from(auditLog).where(eq(auditLog.action, "user.password"));
    expect(audit).toMatchObject({ actor: user.id, target: user.id });
    expect(JSON.stringify(await store.db.select().from(auditLog))).not.toContain("new password 1");
  });

  it("keeps a flash sealed, for its own session, read once, until it expires", async () => {
    const user = await tenancy.users.create({
      orgName: "org-a",
      email: "flash@a.test",
      password: "flash password",
    });
    const mine = await tenancy.sessions.create({ userId: user.id }, POLICY);
    const theirs = await tenancy.sessions.create({ userId: ownerA.id }, POLICY);
    const secret = `sk-${randomBytes(20).toString("hex")}`;
    const id = await tenancy.flash.put(mine.session.id, { kind: "key", key: secret });
    expect(JSON.stringify(await store.db.select().from(dashboardFlashes))).not.toContain(secret);
    expect(await tenancy.flash.take(theirs.session.id, id)).toBeUndefined();
    expect(await tenancy.flash.take(mine.session.id, id)).toEqual({ kind: "key", key: secret });
    expect(await tenancy.flash.take(mine.session.id, id)).toBeUndefined();
    const late = await tenancy.flash.put(mine.session.id, { kind: "key", key: secret });
    clock += FLASH_TTL_MS;
    expect(await tenancy.flash.take(mine.session.id, late)).toBeUndefined();
    expect(await store.db.select().from(dashboardFlashes)).toEqual([]);
    expect(await store.db.select().from(memberships).where(eq(memberships.userId, "nobody"))).toEqual([]);
  });
});
