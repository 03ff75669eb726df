// Invitations: how an org owner brings a person into the org. No HTTP.
//
// An owner never creates an account or sees a password. Inviting an email makes a single-use link (a random token;
// only its SHA-256 is stored) that expires. The person who holds the link either claims it as a new account,
// choosing their own password, or, when the email already has an account, signs in to it and accepts. Both need
// the link: an account holder cannot join an org they were merely invited to by email, so whoever squats an
// address (say, an owner who claimed their own invitation for someone else's email) gains no other org's
// invitations to it. Inviting does not look at accounts at all, so the owner gets the same answer either way.
import { createHash, randomBytes } from "node:crypto";
import { and, asc, eq, gt, isNull, type SQL } from "drizzle-orm";
import { base62, newId } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import { invitations, memberships, organizations, users } from "../store/schema.js";
import { type Actor, writeAudit } from "./audit.js";
import { AccountExistsError, AlreadyMemberError, InvitationNotFoundError } from "./errors.js";
import { assertRole, choosePassword, normaliseEmail } from "./members.js";
import { hashPassword, type ScryptParams } from "./password.js";
import { requireOrgRow, type StoreTx } from "./tenancy-store.js";
import type { AuthenticatedUser, MembershipRole } from "./types.js";

/** How long an invitation link works (default): long enough to reach someone, short enough to not linger. */
export const DEFAULT_INVITATION_TTL_MS = 7 * 24 * 60 * 60_000;
const TOKEN_PATTERN = /^[0-9A-Za-z]{43}$/;

export type InvitationOutcome = "accepted" | "claimed" | "declined" | "withdrawn" | "superseded";

export interface InvitationServiceOptions {
  passwordParams?: ScryptParams | undefined;
  ttlMs?: number | undefined;
  now: () => number;
}

export interface InviteInput {
  orgName: string;
  email: string;
  role: MembershipRole;
  actor: Actor;
}

/** A pending invitation as pages show it: never its token. */
export interface Invitation {
  id: string;
  orgName: string;
  email: string;
  role: MembershipRole;
  /** The inviting user's email; null when they are gone or it was the operator. */
  invitedBy: string | null;
  createdAt: Date;
  expiresAt: Date;
}

/** An invitation just made: the only value that carries its token, for the link shown once. */
export interface CreatedInvitation extends Invitation {
  token: string;
}

/** What a link leads to: the invitation, and whether its email has an account (told only to the link's holder). */
export interface InvitationLookup {
  invitation: Invitation;
  accountExists: boolean;
}

export function hashInvitationToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export class InvitationService {
  constructor(
    private readonly db: StoreDb,
    private readonly options: InvitationServiceOptions,
  ) {}

  /**
   * Invites `email` into the org. A pending invitation of the same email to the same org is superseded (its link
   * stops working), so inviting again is how an owner re-sends a lost link. Refused only for a current member.
   */
  async create(input: InviteInput): Promise<CreatedInvitation> {
    const email = normaliseEmail(input.email);
    assertRole(input.role);
    const token = base62(randomBytes(32));
    const now = this.nowDate();
    const expiresAt = new Date(now.getTime() + (this.options.ttlMs ?? DEFAULT_INVITATION_TTL_MS));
    return this.db.transaction(async (tx) => {
      const org = await requireOrgRow(tx, input.orgName);
      // Membership of this org is on the owner's own Members page: saying so reveals nothing new.
      const [member] = await tx
        .select({ userId: memberships.userId })
        .from(memberships)
        .innerJoin(users, eq(memberships.userId, users.id))
        .where(and(eq(memberships.orgId, org.id), eq(users.email, email)));
      if (member !== undefined) throw new AlreadyMemberError(org.name, email);
      const superseded = await tx
        .update(invitations)
        .set({ resolvedAt: now, outcome: "superseded" })
        .where(
          and(eq(invitations.orgId, org.id), eq(invitations.email, email), isNull(invitations.resolvedAt)),
        )
        .returning({ id: invitations.id });
      const id = newId("invitation");
      await tx.insert(invitations).values({
        id,
        orgId: org.id,
        email,
        role: input.role,
        tokenHash: hashInvitationToken(token),
        invitedBy: input.actor,
        createdAt: now,
        expiresAt,
      });
      await writeAudit(tx, {
        actor: input.actor,
        action: "invitation.create",
        orgId: org.id,
        target: id,
        details: {
          email,
          role: input.role,
          superseded: superseded.map((s) => s.id),
        },
        at: this.nowDate(),
      });
      const invitedBy = await emailOf(tx, input.actor);
      return { id, orgName: org.name, email, role: input.role, invitedBy, createdAt: now, expiresAt, token };
    });
  }

  /** The pending invitation a link names; InvitationNotFoundError for a bad, used or expired one. */
  async find(token: string): Promise<InvitationLookup> {
    const [row] = await this.pending(this.db, token);
    if (row === undefined) throw new InvitationNotFoundError();
    const [account] = await this.db.select({ id: users.id }).from(users).where(eq(users.email, row.email));
    return { invitation: await this.view(this.db, row), accountExists: account !== undefined };
  }

  /**
   * Uses a link as a new account with the password its holder chose: the user, their membership and the
   * invitation's end commit together. AccountExistsError when the email has an account (the link stays usable
   * for accepting); InvitationNotFoundError when the link is used, expired or unknown.
   */
  async claim(token: string, password: string): Promise<{ user: AuthenticatedUser; orgName: string }> {
    choosePassword(password);
    const lookup = await this.find(token);
    if (lookup.accountExists) throw new AccountExistsError(lookup.invitation.email);
    // Hash before the transaction: scrypt is slow and holds no lock.
    const passwordHash = await hashPassword(password, this.options.passwordParams);
    return this.db.transaction(async (tx) => {
      const row = await this.resolve(tx, token, "claimed");
      const userId = newId("user");
      const inserted = await tx
        .insert(users)
        .values({ id: userId, email: row.email, passwordHash, createdAt: this.nowDate() })
        .onConflictDoNothing({ target: users.email })
        .returning({ id: users.id });
      // Created since find(): roll back, so the link can still be accepted by signing in.
      if (inserted.length === 0) throw new AccountExistsError(row.email);
      await tx
        .insert(memberships)
        .values({ userId, orgId: row.orgId, role: row.role, createdAt: this.nowDate() });
      await writeAudit(tx, {
        actor: userId,
        action: "invitation.claim",
        orgId: row.orgId,
        target: row.id,
        details: {
          email: row.email,
          role: row.role,
        },
        at: this.nowDate(),
      });
      return { user: { id: userId, email: row.email }, orgName: await orgName(tx, row.orgId) };
    });
  }

  /** The signed-in `user` accepts the link's invitation: only when it is addressed to their email. */
  async accept(token: string, user: AuthenticatedUser): Promise<{ orgName: string }> {
    return this.db.transaction(async (tx) => {
      const row = await this.resolve(tx, token, "accepted", user.email);
      // Already a member (e.g. through an earlier invitation): the role they have stays.
      await tx
        .insert(memberships)
        .values({ userId: user.id, orgId: row.orgId, role: row.role, createdAt: this.nowDate() })
        .onConflictDoNothing();
      await writeAudit(tx, {
        actor: user.id,
        action: "invitation.accept",
        orgId: row.orgId,
        target: row.id,
        details: {
          email: row.email,
          role: row.role,
        },
        at: this.nowDate(),
      });
      return { orgName: await orgName(tx, row.orgId) };
    });
  }

  /** The signed-in `user` declines an invitation to their email, by link token or by id (their list). */
  async decline(
    ref: { token: string } | { id: string },
    user: AuthenticatedUser,
  ): Promise<{ orgName: string }> {
    return this.db.transaction(async (tx) => {
      const row =
        "token" in ref
          ? await this.resolve(tx, ref.token, "declined", user.email)
          : await this.resolveById(tx, { id: ref.id, email: user.email }, "declined");
      await writeAudit(tx, {
        actor: user.id,
        action: "invitation.decline",
        orgId: row.orgId,
        target: row.id,
        details: { email: row.email },
        at: this.nowDate(),
      });
      return { orgName: await orgName(tx, row.orgId) };
    });
  }

  /** An owner withdraws a pending invitation of their org: its link stops working. */
  async withdraw(orgName: string, id: string, actor: Actor): Promise<Invitation> {
    return this.db.transaction(async (tx) => {
      const org = await requireOrgRow(tx, orgName);
      const row = await this.resolveById(tx, { id, orgId: org.id }, "withdrawn");
      await writeAudit(tx, {
        actor: actor,
        action: "invitation.withdraw",
        orgId: org.id,
        target: row.id,
        details: { email: row.email },
        at: this.nowDate(),
      });
      return this.view(tx, row);
    });
  }

  /** Pending invitations addressed to this email, newest first (the invitee's list). */
  async pendingFor(email: string): Promise<Invitation[]> {
    return this.list(eq(invitations.email, email.toLowerCase()));
  }

  /** Pending invitations of an org, newest first (the owners' list). */
  async pendingOf(orgName: string): Promise<Invitation[]> {
    const org = await requireOrgRow(this.db, orgName);
    return this.list(eq(invitations.orgId, org.id));
  }

  private async list(condition: SQL): Promise<Invitation[]> {
    const rows = await this.db
      .select({ row: invitations, orgName: organizations.name, invitedBy: users.email })
      .from(invitations)
      .innerJoin(organizations, eq(invitations.orgId, organizations.id))
      .leftJoin(users, eq(invitations.invitedBy, users.id))
      .where(and(condition, isNull(invitations.resolvedAt), gt(invitations.expiresAt, this.nowDate())))
      .orderBy(asc(invitations.createdAt));
    return rows.reverse().map(({ row, orgName, invitedBy }) => toInvitation(row, orgName, invitedBy));
  }

  private pending(exec: StoreDb | StoreTx, token: string) {
    if (!TOKEN_PATTERN.test(token)) return Promise.resolve([]);
    return exec
      .select()
      .from(invitations)
      .where(
        and(
          eq(invitations.tokenHash, hashInvitationToken(token)),
          isNull(invitations.resolvedAt),
          gt(invitations.expiresAt, this.nowDate()),
        ),
      )
      .limit(1);
  }

  /** Ends the pending invitation its link names (addressed to `email`, when given). */
  private resolve(tx: StoreTx, token: string, outcome: InvitationOutcome, email?: string) {
    if (!TOKEN_PATTERN.test(token)) throw new InvitationNotFoundError();
    const byToken = eq(invitations.tokenHash, hashInvitationToken(token));
    return this.resolveWhere(
      tx,
      [byToken, ...(email === undefined ? [] : [eq(invitations.email, email)])],
      outcome,
    );
  }

  /** Ends a pending invitation by id, addressed to `email` or of `orgId` (whichever is given). */
  private resolveById(
    tx: StoreTx,
    ref: { id: string; email?: string; orgId?: string },
    outcome: InvitationOutcome,
  ) {
    const conditions = [eq(invitations.id, ref.id)];
    if (ref.email !== undefined) conditions.push(eq(invitations.email, ref.email));
    if (ref.orgId !== undefined) conditions.push(eq(invitations.orgId, ref.orgId));
    return this.resolveWhere(tx, conditions, outcome);
  }

  /**
   * Ends a pending invitation in one conditional UPDATE: of two uses racing (two tabs, two replicas) exactly one
   * gets the row, which is what makes a link single-use.
   */
  private async resolveWhere(tx: StoreTx, conditions: SQL[], outcome: InvitationOutcome) {
    const [row] = await tx
      .update(invitations)
      .set({ resolvedAt: this.nowDate(), outcome })
      .where(and(...conditions, isNull(invitations.resolvedAt), gt(invitations.expiresAt, this.nowDate())))
      .returning();
    if (row === undefined) throw new InvitationNotFoundError();
    return row;
  }

  private async view(exec: StoreDb | StoreTx, row: typeof invitations.$inferSelect): Promise<Invitation> {
    return toInvitation(row, await orgName(exec, row.orgId), await emailOf(exec, row.invitedBy));
  }

  private nowDate(): Date {
    return new Date(this.options.now());
  }
}

function toInvitation(
  row: typeof invitations.$inferSelect,
  orgName: string,
  invitedBy: string | null,
): Invitation {
  return {
    id: row.id,
    orgName,
    email: row.email,
    role: row.role as MembershipRole,
    invitedBy,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
  };
}

async function orgName(exec: StoreDb | StoreTx, orgId: string): Promise<string> {
  const [row] = await exec
    .select({ name: organizations.name })
    .from(organizations)
    .where(eq(organizations.id, orgId));
  return row?.name ?? "";
}

async function emailOf(exec: StoreDb | StoreTx, actor: Actor): Promise<string | null> {
  const [row] = await exec.select({ email: users.email }).from(users).where(eq(users.id, actor));
  return row?.email ?? null;
}
