// Drizzle table definitions of the tenancy store; drizzle-kit generates the SQL migrations in drizzle/ from this.
import { index, integer, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

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

export type OrganizationRow = typeof organizations.$inferSelect;
export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type ModelGrantRow = typeof modelGrants.$inferSelect;
