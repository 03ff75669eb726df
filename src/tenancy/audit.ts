// The audit trail: the registry of actions, who can act, the one writer used inside each change's transaction,
// and the reader (newest first, by org, paged).
import { and, desc, eq, lt } from "drizzle-orm";
import type { StoreDb } from "../store/open-store.js";
import { auditLog } from "../store/schema.js";
import { TenancyValidationError } from "./errors.js";
import { requireOrgRow, type StoreTx } from "./tenancy-store.js";
import type { Actor, AuditQuery } from "./types.js";

export type { Actor };

const MAX_AUDIT_PAGE = 1000;

/** Changes the admin API (and so the CLI) can make; the dashboard makes them too. */
export const AUDIT_ACTIONS = Object.freeze([
  "org.create",
  "grant",
  "revoke-grant",
  "key.create",
  "key.revoke",
  "limits.set",
  "user.create",
] as const);
/**
 * Member management, made by owners in the dashboard only (the admin API has no route for it yet). "member.add"
 * is no longer written (people join through invitations) but stays readable in older trails.
 */
export const MEMBER_AUDIT_ACTIONS = Object.freeze(["member.add", "member.role", "member.remove"] as const);
/** Invitations (owners make and withdraw them; invitees accept, decline or claim them) and password changes. */
export const ACCOUNT_AUDIT_ACTIONS = Object.freeze([
  "invitation.create",
  "invitation.withdraw",
  "invitation.accept",
  "invitation.decline",
  "invitation.claim",
  "user.password",
] as const);
/** The model catalogue's changes (admin API, CLI, the operator view): the target is the model id. */
export const MODEL_AUDIT_ACTIONS = Object.freeze([
  "model.add",
  "model.remove",
  "model.load",
  "model.unload",
] as const);
export type AuditAction =
  | (typeof AUDIT_ACTIONS)[number]
  | (typeof MODEL_AUDIT_ACTIONS)[number]
  | (typeof MEMBER_AUDIT_ACTIONS)[number]
  | (typeof ACCOUNT_AUDIT_ACTIONS)[number];

/** The admin token's holder (CLI, operator scripts). */
export const ADMIN_ACTOR = "admin";
/** The server itself, e.g. the first-start bootstrap. */
export const SYSTEM_ACTOR = "system";
export interface AuditEntry {
  id: number;
  at: Date;
  actor: Actor;
  action: AuditAction;
  orgId: string | null;
  target: string;
  details: Record<string, unknown> | null;
}

export interface AuditRecord {
  actor: Actor;
  action: AuditAction;
  orgId: string | null;
  target: string;
  details?: Record<string, unknown>;
  at: Date;
}

/** Writes one audit row with the change's own transaction, so a change and its record commit or fail together. */
export async function writeAudit(tx: StoreTx, record: AuditRecord): Promise<void> {
  await tx.insert(auditLog).values({
    actor: record.actor,
    action: record.action,
    orgId: record.orgId,
    target: record.target,
    details: record.details ?? null,
    at: record.at,
  });
}

export class AuditService {
  constructor(private readonly db: StoreDb) {}

  /** Audit entries, newest first. */
  async list(query: AuditQuery = {}): Promise<AuditEntry[]> {
    const limit = query.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_AUDIT_PAGE) {
      throw new TenancyValidationError(`limit must be a whole number from 1 to ${MAX_AUDIT_PAGE}.`, "limit");
    }
    const conditions = [];
    if (query.orgName !== undefined) {
      const org = await requireOrgRow(this.db, query.orgName);
      conditions.push(eq(auditLog.orgId, org.id));
    }
    if (query.beforeId !== undefined) conditions.push(lt(auditLog.id, query.beforeId));
    const rows = await this.db
      .select()
      .from(auditLog)
      .where(and(...conditions))
      .orderBy(desc(auditLog.id))
      .limit(limit);
    return rows.map((r) => ({ ...r, action: r.action as AuditAction }));
  }
}
