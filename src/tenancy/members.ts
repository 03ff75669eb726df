// Dashboard users as members of organizations: password sign-in and change, memberships, and the owners' role
// changes and removals (people join through invitations.ts). No HTTP. Every change writes its audit row in its own transaction; an org always keeps at least one owner.
import { and, asc, count, eq } from "drizzle-orm";
import type { StoreDb } from "../store/open-store.js";
import { memberships, type OrganizationRow, organizations, users } from "../store/schema.js";
import { type Actor, type AuditAction, writeAudit } from "./audit.js";
import {
  LastOwnerError,
  MemberNotFoundError,
  OrgNotFoundError,
  TenancyValidationError,
  WrongPasswordError,
} from "./errors.js";
import {
  generatePassword,
  hashPassword,
  MAX_PASSWORD_LENGTH,
  MIN_PASSWORD_LENGTH,
  type ScryptParams,
  verifyPassword,
} from "./password.js";
import type { StoreTx } from "./tenancy-store.js";
import {
  type AuthenticatedUser,
  MEMBERSHIP_ROLES,
  type Membership,
  type MembershipRole,
  type OrgUser,
} from "./types.js";

const MAX_EMAIL_LENGTH = 254;
// Deliberately loose: one "@", something on each side, a dot in the domain. Delivery is the real test.
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function normaliseEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  if (email.length > MAX_EMAIL_LENGTH || !EMAIL_PATTERN.test(email)) {
    throw new TenancyValidationError(`Invalid email address "${raw}".`, "email");
  }
  return email;
}

export function assertRole(role: string): asserts role is MembershipRole {
  if (!(MEMBERSHIP_ROLES as readonly string[]).includes(role)) {
    throw new TenancyValidationError(`Invalid role "${role}": use owner or member.`, "role");
  }
}

/** The given password (checked for length) or a generated one; `generated` says which. */
export function choosePassword(given: string | undefined): { password: string; generated: string | null } {
  const generated = given === undefined ? generatePassword() : null;
  const password = given ?? generated ?? "";
  if (password.length < MIN_PASSWORD_LENGTH || password.length > MAX_PASSWORD_LENGTH) {
    throw new TenancyValidationError(
      `A password needs ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters.`,
      "password",
    );
  }
  return { password, generated };
}

export interface MemberServiceOptions {
  passwordParams?: ScryptParams | undefined;
  now: () => number;
}

export class MemberService {
  /** Checked against when the email is unknown, so a wrong email costs as long as a wrong password. */
  private decoyHash: Promise<string> | undefined;

  constructor(
    private readonly db: StoreDb,
    private readonly options: MemberServiceOptions,
  ) {}

  /** The user when email and password match; null otherwise (no hint which of the two was wrong). */
  async authenticate(email: string, password: string): Promise<AuthenticatedUser | null> {
    const normalised = email.trim().toLowerCase();
    const rows =
      normalised.length > MAX_EMAIL_LENGTH || password.length > MAX_PASSWORD_LENGTH
        ? []
        : await this.db
            .select({ id: users.id, email: users.email, passwordHash: users.passwordHash })
            .from(users)
            .where(eq(users.email, normalised))
            .limit(1);
    const user = rows[0];
    if (user === undefined) {
      this.decoyHash ??= hashPassword(generatePassword(), this.options.passwordParams);
      await verifyPassword(password, await this.decoyHash);
      return null;
    }
    return (await verifyPassword(password, user.passwordHash)) ? { id: user.id, email: user.email } : null;
  }

  /** The user's organizations, by name. */
  async membershipsOf(userId: string): Promise<Membership[]> {
    const rows = await this.db
      .select({ orgId: organizations.id, orgName: organizations.name, role: memberships.role })
      .from(memberships)
      .innerJoin(organizations, eq(memberships.orgId, organizations.id))
      .where(eq(memberships.userId, userId))
      .orderBy(asc(organizations.name));
    return rows.map((r) => ({ ...r, role: r.role as MembershipRole }));
  }

  /**
   * Changes a signed-in user's password after checking the current one (a session alone is not enough: it may be
   * a browser left open). The caller ends the user's other sessions.
   */
  async changePassword(userId: string, current: string, next: string): Promise<void> {
    const [row] = await this.db
      .select({ passwordHash: users.passwordHash })
      .from(users)
      .where(eq(users.id, userId));
    if (row === undefined || current.length > MAX_PASSWORD_LENGTH) throw new WrongPasswordError();
    if (!(await verifyPassword(current, row.passwordHash))) throw new WrongPasswordError();
    choosePassword(next);
    const passwordHash = await hashPassword(next, this.options.passwordParams);
    await this.db.transaction(async (tx) => {
      // Only over the hash that was checked: of two changes racing with the same current password, one wins.
      const changed = await tx
        .update(users)
        .set({ passwordHash })
        .where(and(eq(users.id, userId), eq(users.passwordHash, row.passwordHash)))
        .returning({ id: users.id });
      if (changed.length === 0) throw new WrongPasswordError();
      await writeAudit(tx, {
        actor: userId,
        action: "user.password",
        orgId: null,
        target: userId,
        at: this.nowDate(),
      });
    });
  }

  /** Makes a member an owner or a plain member; refused when it would leave the org without an owner. */
  async setRole(orgName: string, userId: string, role: MembershipRole, actor: Actor): Promise<OrgUser> {
    assertRole(role);
    return this.db.transaction(async (tx) => {
      const org = await lockOrg(tx, orgName);
      const current = await this.member(tx, org, userId);
      if (current.role === role) return current;
      if (current.role === "owner") await this.assertAnotherOwner(tx, org);
      await tx
        .update(memberships)
        .set({ role })
        .where(and(eq(memberships.orgId, org.id), eq(memberships.userId, userId)));
      await this.audit(tx, actor, "member.role", org.id, userId, {
        email: current.email,
        from: current.role,
        to: role,
      });
      return { ...current, role };
    });
  }

  /**
   * Removes a member from an org (never its last owner). A user left without any org is deleted with their
   * sessions: accounts exist only through memberships.
   */
  async remove(
    orgName: string,
    userId: string,
    actor: Actor,
  ): Promise<{ email: string; userDeleted: boolean }> {
    return this.db.transaction(async (tx) => {
      const org = await lockOrg(tx, orgName);
      const current = await this.member(tx, org, userId);
      if (current.role === "owner") await this.assertAnotherOwner(tx, org);
      await tx.delete(memberships).where(and(eq(memberships.orgId, org.id), eq(memberships.userId, userId)));
      const [left] = await tx.select({ n: count() }).from(memberships).where(eq(memberships.userId, userId));
      const userDeleted = (left?.n ?? 0) === 0;
      if (userDeleted) await tx.delete(users).where(eq(users.id, userId));
      await this.audit(tx, actor, "member.remove", org.id, userId, {
        email: current.email,
        role: current.role,
        user_deleted: userDeleted,
      });
      return { email: current.email, userDeleted };
    });
  }

  private async member(tx: StoreTx, org: OrganizationRow, userId: string): Promise<OrgUser> {
    const [row] = await tx
      .select({ email: users.email, role: memberships.role, createdAt: memberships.createdAt })
      .from(memberships)
      .innerJoin(users, eq(memberships.userId, users.id))
      .where(and(eq(memberships.orgId, org.id), eq(memberships.userId, userId)));
    if (row === undefined) throw new MemberNotFoundError(org.name, userId);
    return {
      id: userId,
      email: row.email,
      orgName: org.name,
      role: row.role as MembershipRole,
      createdAt: row.createdAt,
    };
  }

  // Called under lockOrg: the owners counted here cannot change before the transaction ends.
  private async assertAnotherOwner(tx: StoreTx, org: OrganizationRow): Promise<void> {
    const owners = await tx
      .select({ userId: memberships.userId })
      .from(memberships)
      .where(and(eq(memberships.orgId, org.id), eq(memberships.role, "owner")));
    if (owners.length < 2) throw new LastOwnerError(org.name);
  }

  private audit(
    tx: StoreTx,
    actor: Actor,
    action: AuditAction,
    orgId: string,
    target: string,
    details: Record<string, unknown>,
  ): Promise<void> {
    return writeAudit(tx, { actor, action, orgId, target, details, at: this.nowDate() });
  }

  private nowDate(): Date {
    return new Date(this.options.now());
  }
}

/**
 * The org row locked for the rest of the transaction: role changes and removals in one org run one at a time,
 * so two owners demoting each other at once cannot both succeed (locking member rows instead deadlocks).
 */
async function lockOrg(tx: StoreTx, name: string): Promise<OrganizationRow> {
  const [row] = await tx.select().from(organizations).where(eq(organizations.name, name)).for("update");
  if (row === undefined) throw new OrgNotFoundError(name);
  return row;
}
