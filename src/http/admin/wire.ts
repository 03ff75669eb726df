// Wire shapes of the admin API: zod request bodies and the JSON renderings of orgs, keys, users, usage and audit
// entries.
import { z } from "zod";
import type { CatalogueEntry } from "../../catalogue/catalogue.js";
import type { AuditEntry } from "../../tenancy/audit.js";
import type { CreatedKey, CreatedUser, KeyInfo, Org, OrgUser } from "../../tenancy/types.js";
import {
  USAGE_GROUP_BY,
  type UsageGroupBy,
  type UsageQuery,
  type UsageSummary,
  type UsageTotals,
} from "../../usage/queries.js";

// Ten years: long enough for any real use, short enough that the date arithmetic cannot overflow.
const MAX_EXPIRES_IN_SECONDS = 10 * 365 * 24 * 3600;

/** Requests or tokens per minute: 0 or null = unlimited. */
const limitValue = z.number().int().min(0).max(2_000_000_000).nullable();

export const createOrgBodySchema = z
  .object({
    name: z.string().min(1).max(64),
    models: z.array(z.string().min(1)).optional(),
    rpm: limitValue.optional(),
    tpm: limitValue.optional(),
  })
  .strict();

export const setLimitsBodySchema = z
  .object({ rpm: limitValue.optional(), tpm: limitValue.optional() })
  .strict()
  .refine((body) => body.rpm !== undefined || body.tpm !== undefined, {
    message: "Give at least one of 'rpm' and 'tpm'.",
    path: ["rpm"],
  });

export const createUserBodySchema = z
  .object({
    email: z.string().min(1).max(254),
    /** Absent: the server generates one and returns it once. */
    password: z.string().min(8).max(1024).optional(),
    role: z.enum(["owner", "member"]).optional(),
  })
  .strict();

export const auditQuerySchema = z
  .object({
    org: z.string().min(1).optional(),
    limit: z.coerce.number().int().min(1).max(1000).optional(),
    before: z.coerce.number().int().min(1).optional(),
  })
  .strict();

// A calendar date (midnight UTC) or a date-time with its zone: an instant must not depend on the server's zone.
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}))?$/i;

// The validator uses a custom issue's message as written, so it names its parameter.
const instantParam = (name: string) =>
  z.string().transform((raw, ctx) => {
    // An unencoded "+02:00" in a query string arrives as " 02:00".
    const value = raw.replace(/ (\d{2}:?\d{2})$/, "+$1");
    const at = new Date(value);
    if (ISO_INSTANT.test(value) && !Number.isNaN(at.getTime()) && dayExists(value.slice(0, 10))) return at;
    ctx.issues.push({
      code: "custom",
      input: raw,
      message: `Invalid value for '${name}': expected an ISO 8601 date or date-time with a zone, such as 2030-01-31 or 2030-01-31T12:00:00Z.`,
    });
    return z.NEVER;
  });

/** Date would roll "2030-02-31" over to March 3rd. */
function dayExists(date: string): boolean {
  const [year = 0, month = 0, day = 0] = date.split("-").map(Number);
  const utc = new Date(Date.UTC(year, month - 1, day));
  return utc.getUTCMonth() === month - 1 && utc.getUTCDate() === day;
}

export const usageQuerySchema = z
  .object({
    since: instantParam("since").optional(),
    until: instantParam("until").optional(),
    by: z.enum(USAGE_GROUP_BY).optional(),
    // A chat completion's `user` is at most 64 characters, so no longer one can match.
    user: z.string().min(1).max(64).optional(),
  })
  .strict()
  .refine((q) => q.since === undefined || q.until === undefined || q.since < q.until, {
    message: "Invalid value for 'until': it must be later than 'since'.",
    path: ["until"],
  });

export const grantBodySchema = z.object({ model: z.string().min(1) }).strict();

export const createKeyBodySchema = z
  .object({
    name: z.string().max(128).optional(),
    /** Seconds from now; absent = the key does not expire. */
    expires_in: z.number().int().positive().max(MAX_EXPIRES_IN_SECONDS).optional(),
  })
  .strict();

export type CreateOrgBody = z.infer<typeof createOrgBodySchema>;
export type GrantBody = z.infer<typeof grantBodySchema>;
export type CreateKeyBody = z.infer<typeof createKeyBodySchema>;
export type CreateUserBody = z.infer<typeof createUserBodySchema>;

export interface UserWire {
  object: "user";
  id: string;
  email: string;
  org: string;
  role: "owner" | "member";
  created_at: string;
}

/** The response to creating a user without a password: the only one that carries the generated password. */
export interface CreatedUserWire extends UserWire {
  password?: string;
}

export interface AuditWire {
  object: "audit_entry";
  id: number;
  at: string;
  actor: string;
  action: string;
  org_id: string | null;
  target: string;
  details: Record<string, unknown> | null;
}

export interface OrgWire {
  object: "organization";
  id: string;
  name: string;
  models: string[];
  rpm: number | null;
  tpm: number | null;
  created_at: string;
}

export interface KeyWire {
  object: "api_key";
  id: string;
  org: string;
  org_id: string;
  name: string | null;
  prefix: string;
  last4: string;
  /** "sk-AbCd...wxyz": how a key is shown in lists. */
  display: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  created_by: string | null;
}

/** The response to creating a key: the only response that carries the secret. */
export interface CreatedKeyWire extends KeyWire {
  key: string;
}

/** An organization's usage over [since, until): the totals at the top level, as `hearth usage --json` prints. */
export interface UsageWire extends UsageTotals {
  object: "usage";
  org: string;
  org_id: string;
  since: string | null;
  until: string | null;
  by: UsageGroupBy | null;
  /** Only the requests that sent this `user`; null: every request. */
  user: string | null;
  /** One per day (UTC, `YYYY-MM-DD`), model or key id with usage, ordered by key; [] without `by`. */
  groups: ({ key: string } & UsageTotals)[];
}

export interface ListWire<T> {
  object: "list";
  data: T[];
}

export function orgWire(org: Org): OrgWire {
  return {
    object: "organization",
    id: org.id,
    name: org.name,
    models: org.models,
    rpm: org.rpm,
    tpm: org.tpm,
    created_at: org.createdAt.toISOString(),
  };
}

export function keyWire(key: KeyInfo): KeyWire {
  return {
    object: "api_key",
    id: key.id,
    org: key.orgName,
    org_id: key.orgId,
    name: key.name,
    prefix: key.prefix,
    last4: key.last4,
    display: key.display,
    created_at: key.createdAt.toISOString(),
    last_used_at: key.lastUsedAt?.toISOString() ?? null,
    expires_at: key.expiresAt?.toISOString() ?? null,
    revoked_at: key.revokedAt?.toISOString() ?? null,
    created_by: key.createdBy,
  };
}

export function createdKeyWire(key: CreatedKey): CreatedKeyWire {
  return {
    object: "api_key",
    id: key.id,
    key: key.key,
    org: key.orgName,
    org_id: key.orgId,
    name: key.name,
    prefix: key.prefix,
    last4: key.last4,
    display: `${key.prefix}...${key.last4}`,
    created_at: key.createdAt.toISOString(),
    last_used_at: null,
    expires_at: key.expiresAt?.toISOString() ?? null,
    revoked_at: null,
    created_by: key.createdBy,
  };
}

export function userWire(user: OrgUser): UserWire {
  return {
    object: "user",
    id: user.id,
    email: user.email,
    org: user.orgName,
    role: user.role,
    created_at: user.createdAt.toISOString(),
  };
}

export function createdUserWire(user: CreatedUser): CreatedUserWire {
  const wire: CreatedUserWire = userWire(user);
  if (user.generatedPassword !== null) wire.password = user.generatedPassword;
  return wire;
}

export function auditWire(entry: AuditEntry): AuditWire {
  return {
    object: "audit_entry",
    id: entry.id,
    at: entry.at.toISOString(),
    actor: entry.actor,
    action: entry.action,
    org_id: entry.orgId,
    target: entry.target,
    details: entry.details,
  };
}

export function usageWire(org: Org, query: UsageQuery, summary: UsageSummary): UsageWire {
  return {
    object: "usage",
    org: org.name,
    org_id: org.id,
    since: query.since?.toISOString() ?? null,
    until: query.until?.toISOString() ?? null,
    by: query.by ?? null,
    user: query.user ?? null,
    ...summary.totals,
    groups: summary.groups,
  };
}

export function listWire<T>(data: T[]): ListWire<T> {
  return { object: "list", data };
}

/** An embedded model as the admin API lists it: its config, where it is in its lifecycle, its progress and memory. */
export function modelWire(entry: CatalogueEntry) {
  const { config, health } = entry;
  return {
    object: "model" as const,
    id: config.id,
    source: config.source,
    context_size: config.contextSize,
    parallel: config.parallel,
    keep_alive: config.keepAlive ?? null,
    /** Sampling applied when a request leaves the field out (hearth.yaml `defaults`). */
    defaults: config.defaults ?? null,
    /** From hearth.yaml (else added at run time). */
    seeded: entry.seeded,
    state: health?.state ?? "unloaded",
    status: health === undefined ? "unavailable" : health.ready ? "ok" : (health.detail ?? "unavailable"),
    progress: {
      downloaded_bytes: health?.progress?.downloadedBytes ?? 0,
      total_bytes: health?.progress?.totalBytes ?? null,
      load: health?.progress?.load ?? 0,
    },
    memory:
      health?.memory === undefined
        ? null
        : { ram_bytes: health.memory.ramBytes, vram_bytes: health.memory.vramBytes },
    error: health?.error ?? null,
  };
}

export type ModelWire = ReturnType<typeof modelWire>;
