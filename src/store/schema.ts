// Drizzle table definitions of the tenancy store; drizzle-kit generates the SQL migrations in drizzle/ from this.

import { sql } from "drizzle-orm";
import {
  bigserial,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from "drizzle-orm/pg-core";

// Timestamps with time zone so PostgreSQL servers in any zone agree on instants.
const instant = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

export const organizations = pgTable("organizations", {
  id: text("id").primaryKey(),
  name: text("name").notNull().unique(),
  createdAt: instant("created_at").notNull().defaultNow(),
  // Requests and tokens per minute; null = unlimited. Filled in by the limits feature.
  rpm: integer("rpm"),
  tpm: integer("tpm"),
});

export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    name: text("name"),
    // Only what is needed to recognise a key in a list ("sk-AbCd…wxyz"); the secret itself is never stored.
    prefix: text("prefix").notNull(),
    last4: text("last4").notNull(),
    // HMAC-SHA-256(server key secret, key) as lowercase hex: the lookup index for verification.
    hash: text("hash").notNull().unique(),
    createdAt: instant("created_at").notNull().defaultNow(),
    lastUsedAt: instant("last_used_at"),
    revokedAt: instant("revoked_at"),
    expiresAt: instant("expires_at"),
    // Who created the key: "admin" (the admin token), "system" (first start) or a user id.
    createdBy: text("created_by"),
  },
  (t) => [index("api_keys_org_id_idx").on(t.orgId)],
);

export const modelGrants = pgTable(
  "model_grants",
  {
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    modelId: text("model_id").notNull(),
    createdAt: instant("created_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.modelId] })],
);

export const users = pgTable("users", {
  id: text("id").primaryKey(),
  // Stored lowercased, so uniqueness does not depend on how an address was typed.
  email: text("email").notNull().unique(),
  // scrypt$N$r$p$salt$hash (base64): see tenancy/password.ts. Never the password itself.
  passwordHash: text("password_hash").notNull(),
  createdAt: instant("created_at").notNull().defaultNow(),
});

export const memberships = pgTable(
  "memberships",
  {
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    role: text("role").notNull(),
    createdAt: instant("created_at").notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.userId, t.orgId] }),
    index("memberships_org_id_idx").on(t.orgId),
    check("memberships_role_check", sql`${t.role} in ('owner', 'member')`),
  ],
);

// Append-only record of every tenancy change, written in the same transaction as the change itself.
// No foreign keys: the trail must outlive what it talks about.
export const auditLog = pgTable(
  "audit_log",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    at: instant("at").notNull().defaultNow(),
    // "admin" (the admin token), "system" (first start) or a user id.
    actor: text("actor").notNull(),
    action: text("action").notNull(),
    orgId: text("org_id"),
    // What the action was applied to: an org name, a key id, a model id, a user id.
    target: text("target").notNull(),
    details: jsonb("details").$type<Record<string, unknown>>(),
  },
  (t) => [index("audit_log_at_idx").on(t.at), index("audit_log_org_id_idx").on(t.orgId, t.at)],
);

export type OrganizationRow = typeof organizations.$inferSelect;
export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type ModelGrantRow = typeof modelGrants.$inferSelect;
export type UserRow = typeof users.$inferSelect;
export type MembershipRow = typeof memberships.$inferSelect;
export type AuditLogRow = typeof auditLog.$inferSelect;
