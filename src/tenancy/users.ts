// Users created by the operator (admin API, CLI) as members of an org, and an org's user list. No HTTP.
// Owners' own member management (add, role, remove) is MemberService's.
import { asc, eq } from "drizzle-orm";
import { newId } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import { memberships, users } from "../store/schema.js";
import { type Actor, ADMIN_ACTOR, writeAudit } from "./audit.js";
import { DuplicateUserError } from "./errors.js";
import { assertRole, choosePassword, normaliseEmail } from "./members.js";
import { hashPassword, type ScryptParams } from "./password.js";
import { type OrgRef, requireOrgRow, type StoreTx } from "./tenancy-store.js";
import type { CreatedUser, CreateUserInput, MembershipRole, OrgUser } from "./types.js";

export interface UserServiceOptions {
  /** scrypt cost for new passwords; tests lower it. */
  passwordParams?: ScryptParams | undefined;
  now: () => number;
}

export class UserService {
  constructor(
    private readonly db: StoreDb,
    private readonly options: UserServiceOptions,
  ) {}

  /**
   * Creates a user as a member (or owner) of an existing org. The password is hashed with scrypt before any
   * transaction starts; when none is given, a random one is generated and returned once.
   */
  async create(input: CreateUserInput): Promise<CreatedUser> {
    const email = normaliseEmail(input.email);
    const role = input.role ?? "member";
    assertRole(role);
    const { password, generated: generatedPassword } = choosePassword(input.password);
    // Fail fast on an unknown org before spending the hash.
    await requireOrgRow(this.db, input.orgName);
    const passwordHash = await hashPassword(password, this.options.passwordParams);
    return this.db.transaction(async (tx) => {
      const org = await requireOrgRow(tx, input.orgName);
      const user = await this.insert(tx, org, email, passwordHash, role, input.actor ?? ADMIN_ACTOR);
      return { ...user, generatedPassword };
    });
  }

  async list(orgName: string): Promise<OrgUser[]> {
    const org = await requireOrgRow(this.db, orgName);
    const rows = await this.db
      .select({ id: users.id, email: users.email, role: memberships.role, createdAt: memberships.createdAt })
      .from(memberships)
      .innerJoin(users, eq(memberships.userId, users.id))
      .where(eq(memberships.orgId, org.id))
      .orderBy(asc(users.email));
    return rows.map((r) => ({ ...r, role: r.role as MembershipRole, orgName: org.name }));
  }

  /**
   * Inserts a user with an already hashed password, its membership and audit row in the caller's transaction
   * (also the first-start bootstrap's).
   */
  async insert(
    tx: StoreTx,
    org: OrgRef,
    email: string,
    passwordHash: string,
    role: MembershipRole,
    actor: Actor,
  ): Promise<OrgUser> {
    const id = newId("user");
    const createdAt = new Date(this.options.now());
    const inserted = await tx
      .insert(users)
      .values({ id, email, passwordHash, createdAt })
      .onConflictDoNothing({ target: users.email })
      .returning({ id: users.id });
    if (inserted.length === 0) throw new DuplicateUserError(email);
    await tx.insert(memberships).values({ userId: id, orgId: org.id, role, createdAt });
    await writeAudit(tx, {
      actor,
      action: "user.create",
      orgId: org.id,
      target: id,
      details: { email, role },
      at: new Date(this.options.now()),
    });
    return { id, email, orgName: org.name, role, createdAt };
  }
}
