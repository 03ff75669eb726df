// The tenancy services' value types: what callers get back and pass in. Never a secret except in Created*.

/** Who made a change (audit.ts): "admin", "system", or a user id (`user_…`) when the dashboard acts for a user. */
export type Actor = string;

export const MEMBERSHIP_ROLES = Object.freeze(["owner", "member"] as const);
export type MembershipRole = (typeof MEMBERSHIP_ROLES)[number];

export interface Org {
  id: string;
  name: string;
  createdAt: Date;
  rpm: number | null;
  tpm: number | null;
  /** Granted model ids, sorted. */
  models: string[];
}

/** A key as lists show it: never the secret or its hash. */
export interface KeyInfo {
  id: string;
  orgId: string;
  orgName: string;
  name: string | null;
  /** Leading characters of the key ("sk-AbCd"). */
  prefix: string;
  last4: string;
  /** "sk-AbCd...wxyz" */
  display: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  expiresAt: Date | null;
  /** "admin", "system" or a user id; null for keys made before this was recorded. */
  createdBy: Actor | null;
}

/** A key just created: the only value that ever carries the secret. */
export interface CreatedKey {
  id: string;
  key: string;
  name: string | null;
  prefix: string;
  last4: string;
  orgId: string;
  orgName: string;
  createdAt: Date;
  expiresAt: Date | null;
  createdBy: Actor;
}

export interface CreateKeyOptions {
  name?: string | undefined;
  expiresAt?: Date | undefined;
  actor?: Actor | undefined;
}

/** Requests and tokens per minute; 0 or null means unlimited (stored as null). */
export interface OrgLimits {
  rpm?: number | null | undefined;
  tpm?: number | null | undefined;
}

export interface CreateOrgOptions extends OrgLimits {
  actor?: Actor | undefined;
}

export interface CreateUserInput {
  orgName: string;
  email: string;
  /** Absent: a random password is generated and returned once. */
  password?: string | undefined;
  role?: MembershipRole | undefined;
  actor?: Actor | undefined;
}

/** A user as lists show it: never the password or its hash. */
export interface OrgUser {
  id: string;
  email: string;
  orgName: string;
  role: MembershipRole;
  createdAt: Date;
}

export interface CreatedUser extends OrgUser {
  /** Only when the password was generated: shown once, stored nowhere in clear. */
  generatedPassword: string | null;
}

export interface AuditQuery {
  orgName?: string | undefined;
  /** Newest first; at most 1000 (default 100). */
  limit?: number | undefined;
  /** Entries with a smaller id than this, for paging backwards. */
  beforeId?: number | undefined;
}

export interface BootstrapOptions {
  /** Also create this user as the first owner of org `default`, with a random password returned once. */
  ownerEmail?: string | undefined;
  /** The first key expires this long after it is created (main.ts: server.bootstrapKeyExpiresInDays); absent: never. */
  keyLifetimeMs?: number | undefined;
}

export interface BootstrapResult {
  orgName: string;
  keyId: string;
  /** The first API key, to be printed once. */
  key: string;
  /** When that key stops working (null: never). */
  keyExpiresAt: Date | null;
  /** The first owner's dashboard sign-in, to be printed once; null unless `ownerEmail` was given. */
  owner: { email: string; password: string } | null;
}

/** One of a user's organizations and the user's role there. */
export interface Membership {
  orgId: string;
  orgName: string;
  role: MembershipRole;
}

/** A user whose password was just checked. */
export interface AuthenticatedUser {
  id: string;
  email: string;
}
