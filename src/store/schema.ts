// Drizzle table definitions of the tenancy store; drizzle-kit generates the SQL migrations in drizzle/ from this.

import { sql } from "drizzle-orm";
import {
  bigserial,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";
import type { ResponseItem, StoredResponse } from "../responses/types.js";

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

// One row per chat completion admitted by the engine (finished, stopped by the client, or failed after admission).
// No foreign keys: usage is billing evidence and must outlive the keys and orgs it names.
export const usageRecords = pgTable(
  "usage_records",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    // When the request ended.
    at: instant("at").notNull(),
    orgId: text("org_id").notNull(),
    keyId: text("key_id").notNull(),
    model: text("model").notNull(),
    requestId: text("request_id").notNull(),
    promptTokens: integer("prompt_tokens").notNull(),
    // Every generated token, reasoning included (reasoning is billed as output).
    completionTokens: integer("completion_tokens").notNull(),
    reasoningTokens: integer("reasoning_tokens").notNull(),
    cachedTokens: integer("cached_tokens").notNull(),
    // "completed" (the reply was sent whole), "aborted" (the client left), "error" (failed after admission).
    status: text("status").notNull(),
    latencyMs: integer("latency_ms").notNull(),
    // The request's `user` (the caller's end-user id, at most 64 characters); null when absent. Not `user`: a
    // reserved word in SQL.
    user: text("end_user"),
    // The API endpoint the request came through (usage/types.ts USAGE_ENDPOINTS); rows from before there were two
    // endpoints are chat completions.
    endpoint: text("endpoint").notNull().default("chat.completions"),
  },
  (t) => [
    index("usage_records_org_at_idx").on(t.orgId, t.at),
    // One record per request: a write whose answer was lost (the store stopped or hung after the commit) is
    // retried by the meter, and the retry must not count the request twice.
    uniqueIndex("usage_records_org_request_idx").on(t.orgId, t.requestId),
    check("usage_records_status_check", sql`${t.status} in ('completed', 'aborted', 'error')`),
    check("usage_records_endpoint_check", sql`${t.endpoint} in ('chat.completions', 'responses')`),
  ],
);

// Dashboard sign-in sessions. The cookie carries a random token; only its SHA-256 is stored.
export const sessions = pgTable(
  "sessions",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull().unique(),
    // The signed-in user; null for an operator session opened with the admin token.
    userId: text("user_id").references(() => users.id, { onDelete: "cascade" }),
    operator: boolean("operator").notNull().default(false),
    createdAt: instant("created_at").notNull().defaultNow(),
    expiresAt: instant("expires_at").notNull(),
    lastSeenAt: instant("last_seen_at").notNull().defaultNow(),
  },
  (t) => [index("sessions_user_id_idx").on(t.userId), index("sessions_expires_at_idx").on(t.expiresAt)],
);

// Invitations to join an org, made by its owners in the dashboard. The link carries a random token; only its
// SHA-256 is stored. Addressed to an email, not a user: whether that email has an account is decided when the
// link is used, so the owner who invites learns nothing about it. Single use: `resolvedAt` is set exactly once.
export const invitations = pgTable(
  "invitations",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    // Lowercased like users.email.
    email: text("email").notNull(),
    role: text("role").notNull(),
    tokenHash: text("token_hash").notNull().unique(),
    // The inviting user's id (or "admin").
    invitedBy: text("invited_by").notNull(),
    createdAt: instant("created_at").notNull().defaultNow(),
    expiresAt: instant("expires_at").notNull(),
    // Null while pending; then when and how it ended.
    resolvedAt: instant("resolved_at"),
    outcome: text("outcome"),
  },
  (t) => [
    index("invitations_email_idx").on(t.email),
    index("invitations_org_id_idx").on(t.orgId),
    check("invitations_role_check", sql`${t.role} in ('owner', 'member')`),
    check(
      "invitations_outcome_check",
      sql`${t.outcome} is null or ${t.outcome} in ('accepted', 'claimed', 'declined', 'withdrawn', 'superseded')`,
    ),
  ],
);

// One-time messages from a POST to the page it redirects to (Post/Redirect/Get), e.g. a new key's secret. Bound
// to the session, deleted when read; the payload is AES-256-GCM-sealed (tenancy/flash.ts): no secret rests in clear.
export const dashboardFlashes = pgTable(
  "dashboard_flashes",
  {
    id: text("id").primaryKey(),
    sessionId: text("session_id")
      .notNull()
      .references(() => sessions.id, { onDelete: "cascade" }),
    payload: text("payload").notNull(),
    expiresAt: instant("expires_at").notNull(),
  },
  (t) => [index("dashboard_flashes_session_id_idx").on(t.sessionId)],
);

// The model catalogue's changes made at run time (admin API, CLI, dashboard): hearth.yaml's models are the seed, a
// row changes it. `config` is the model entry as given (hearth.yaml's shape, validated by its schema); null removes
// the model (a seed model too, so it stays removed after a restart).
export const modelCatalogue = pgTable("model_catalogue", {
  id: text("id").primaryKey(),
  config: jsonb("config").$type<Record<string, unknown>>(),
  updatedAt: instant("updated_at").notNull().defaultNow(),
});

// Stored responses of the Responses API (`store: true`), per organization, until `expires_at` (hearth.yaml's
// responses.retention). Rows past it are invisible to reads and removed by the periodic sweep.
export const responses = pgTable(
  "responses",
  {
    // `resp_…`
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    model: text("model").notNull(),
    createdAt: instant("created_at").notNull(),
    expiresAt: instant("expires_at").notNull(),
    // No foreign key: the response it continued may be deleted or expire first (the chain then starts here).
    previousResponseId: text("previous_response_id"),
    // This request's own input items, as GET /v1/responses/{id}/input_items lists them.
    inputItems: jsonb("input_items").$type<ResponseItem[]>().notNull(),
    // The response object as the client received it.
    response: jsonb("response").$type<StoredResponse["response"]>().notNull(),
    // Its share of a rebuilt previous_response_id conversation, so that a chain's bounds are checked without
    // loading any items: UTF-8 bytes of its input and output items' JSON (item by item, summed), and their number.
    size: integer("size").notNull(),
    itemCount: integer("item_count").notNull(),
  },
  (t) => [
    // Reads are by (org, id); the org_id prefix also serves the cascade when an organization is removed.
    index("responses_org_id_idx").on(t.orgId, t.id),
    index("responses_expires_at_idx").on(t.expiresAt),
  ],
);

export type OrganizationRow = typeof organizations.$inferSelect;
export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type ModelGrantRow = typeof modelGrants.$inferSelect;
export type UserRow = typeof users.$inferSelect;
export type MembershipRow = typeof memberships.$inferSelect;
export type AuditLogRow = typeof auditLog.$inferSelect;
export type UsageRecordRow = typeof usageRecords.$inferSelect;
export type SessionRow = typeof sessions.$inferSelect;
export type InvitationRow = typeof invitations.$inferSelect;
export type ModelCatalogueRow = typeof modelCatalogue.$inferSelect;
export type ResponseRow = typeof responses.$inferSelect;
