// Wire shapes of the admin API: zod request bodies and the JSON renderings of orgs and keys.
import { z } from "zod";
import type { CreatedKey, KeyInfo, Org } from "../tenancy/tenancy-service.js";

// Ten years: long enough for any real use, short enough that the date arithmetic cannot overflow.
const MAX_EXPIRES_IN_SECONDS = 10 * 365 * 24 * 3600;

export const createOrgBodySchema = z
  .object({
    name: z.string().min(1).max(64),
    models: z.array(z.string().min(1)).optional(),
  })
  .strict();

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
}

/** The response to creating a key: the only response that carries the secret. */
export interface CreatedKeyWire extends KeyWire {
  key: string;
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
  };
}

export function listWire<T>(data: T[]): ListWire<T> {
  return { object: "list", data };
}
