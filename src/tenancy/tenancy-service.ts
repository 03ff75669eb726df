// Organizations, users, model grants, API keys and the audit trail: the tenancy rules, over either store driver.
// No HTTP. Every change writes its audit row in the change's own transaction. One class on purpose: the caches
// it owns (keys, grants) must be invalidated by the very calls that change what they hold.
import { createHmac } from "node:crypto";
import { and, asc, desc, eq, isNull, lt } from "drizzle-orm";
import { displayKey, generateApiKey, hashApiKey, hashesEqual, isWellFormedApiKey } from "../auth/api-key.js";
import type { Principal } from "../auth/principal.js";
import { newId } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import {
  type ApiKeyRow,
  apiKeys,
  auditLog,
  memberships,
  modelGrants,
  type OrganizationRow,
  organizations,
  users,
} from "../store/schema.js";
import {
  type Actor,
  ADMIN_ACTOR,
  type AuditAction,
  type AuditEntry,
  SYSTEM_ACTOR,
  writeAudit,
} from "./audit.js";
import {
  DuplicateOrgError,
  DuplicateUserError,
  GrantNotFoundError,
  KeyNotFoundError,
  OrgNotFoundError,
  TenancyValidationError,
  UnknownModelIdError,
} from "./errors.js";
import { LastUsedRecorder } from "./last-used.js";
import { assertRole, choosePassword, MemberService, normaliseEmail } from "./members.js";
import { hashPassword, type ScryptParams } from "./password.js";
import { SessionService } from "./sessions.js";
import { TtlCache } from "./ttl-cache.js";
import type {
  AuditQuery,
  BootstrapOptions,
  BootstrapResult,
  CreatedKey,
  CreatedUser,
  CreateKeyOptions,
  CreateOrgOptions,
  CreateUserInput,
  KeyInfo,
  MembershipRole,
  Org,
  OrgLimits,
  OrgUser,
} from "./types.js";

export * from "./types.js";

export const DEFAULT_ORG_NAME = "default";
const ORG_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** The first owner created by `bootstrap` when asked (".localhost" is a reserved name: it is nobody's mailbox). */
export const DEFAULT_OWNER_EMAIL = "owner@hearth.localhost";
const MAX_KEY_NAME_LENGTH = 128;
const MAX_LIMIT_VALUE = 2_000_000_000;
const MAX_AUDIT_PAGE = 1000;

export interface TenancyServiceOptions {
  /** HMAC key for API keys (see auth/key-secret.ts). */
  keySecret: Uint8Array;
  /** Ids of the configured models; grants of anything else are refused. */
  modelIds: readonly string[];
  /** How long verified keys and grant sets are cached: the delay before a change made elsewhere takes effect. */
  cacheTtlMs?: number;
  cacheMaxEntries?: number;
  /** How long key uses wait in memory before last_used_at is written (default 5 s). */
  lastUsedFlushMs?: number;
  /** Where background failures (a failed last-used flush) are reported; default: a process warning. */
  onBackgroundError?: (err: unknown) => void;
  /** scrypt cost for new passwords; tests lower it. */
  passwordParams?: ScryptParams;
  now?: () => number;
}

/**
 * A change that stale cache entries must not outlive: a revoked key, or an org whose limits or grants changed.
 * Applied at once on the replica that made it, and sent to the others by a broadcast when one is wired.
 */
export type CacheInvalidation = { kind: "key"; keyId: string } | { kind: "org"; orgId: string };

interface CachedKey {
  principal: Principal;
  keyExpiresAt: number | null;
}

type StoreTx = Parameters<Parameters<StoreDb["transaction"]>[0]>[0];
type Executor = StoreDb | StoreTx;

export class TenancyService {
  private readonly keySecret: Uint8Array;
  private readonly modelIds: readonly string[];
  private readonly knownModels: ReadonlySet<string>;
  private readonly now: () => number;
  /** Verified keys by HMAC hash. Only successes are cached, so a new key works at once. */
  private readonly keyCache: TtlCache<string, CachedKey>;
  private readonly grantCache: TtlCache<string, ReadonlySet<string>>;
  private readonly lastUsed: LastUsedRecorder;
  private readonly passwordParams: ScryptParams | undefined;
  /** Dashboard users' memberships and the owners' member management. */
  readonly members: MemberService;
  /** Dashboard sign-in sessions. */
  readonly sessions: SessionService;
  private readonly invalidationListeners: ((event: CacheInvalidation) => void)[] = [];

  constructor(
    private readonly db: StoreDb,
    options: TenancyServiceOptions,
  ) {
    this.keySecret = options.keySecret;
    this.modelIds = [...options.modelIds];
    this.knownModels = new Set(options.modelIds);
    this.now = options.now ?? Date.now;
    const cacheOptions = {
      ttlMs: options.cacheTtlMs ?? 1000,
      maxEntries: options.cacheMaxEntries ?? 10_000,
      now: this.now,
    };
    this.keyCache = new TtlCache(cacheOptions);
    this.grantCache = new TtlCache(cacheOptions);
    this.passwordParams = options.passwordParams;
    this.members = new MemberService(db, { passwordParams: options.passwordParams, now: this.now });
    this.sessions = new SessionService(db, this.now);
    this.lastUsed = new LastUsedRecorder(db, {
      flushIntervalMs: options.lastUsedFlushMs ?? 5000,
      onError:
        options.onBackgroundError ??
        ((err) => process.emitWarning(`hearth: could not record API key use: ${String(err)}`)),
    });
  }

  /**
   * A 32-byte key for another purpose (e.g. "dashboard-csrf"), derived from the server key secret: replicas that
   * share the secret share it, and the secret itself never leaves this service.
   */
  deriveSecret(purpose: string): Buffer {
    return createHmac("sha256", this.keySecret).update(`hearth derived secret: ${purpose}`).digest();
  }

  /** Drops what a change made elsewhere (another replica) made stale in this replica's caches. */
  invalidate(event: CacheInvalidation): void {
    if (event.kind === "key") {
      this.keyCache.deleteWhere((entry) => entry.principal.keyId === event.keyId);
    } else {
      this.keyCache.deleteWhere((entry) => entry.principal.orgId === event.orgId);
      this.grantCache.delete(event.orgId);
    }
  }

  /**
   * Calls `listener` after every change this replica makes that other replicas' caches must drop (the
   * broadcast's publisher). Without one, other replicas see changes within the cache TTL.
   */
  onInvalidation(listener: (event: CacheInvalidation) => void): void {
    this.invalidationListeners.push(listener);
  }

  private changed(event: CacheInvalidation): void {
    this.invalidate(event);
    for (const listener of this.invalidationListeners) listener(event);
  }

  /** Writes the key uses noted since the last flush (they are otherwise written every few seconds). */
  flush(): Promise<void> {
    return this.lastUsed.flush();
  }

  /** Flushes pending key uses and stops the timer; call before closing the store. */
  dispose(): Promise<void> {
    return this.lastUsed.dispose();
  }

  // ---- organizations and grants ----

  async createOrg(
    name: string,
    models: readonly string[] = [],
    options: CreateOrgOptions = {},
  ): Promise<Org> {
    const limits = normaliseLimits(options);
    return this.db.transaction((tx) =>
      this.insertOrg(tx, name, models, limits, options.actor ?? ADMIN_ACTOR),
    );
  }

  /** Sets the given limits (0 or null = unlimited); a limit left undefined keeps its value. */
  async setLimits(orgName: string, limits: OrgLimits, actor: Actor = ADMIN_ACTOR): Promise<Org> {
    const changes = normaliseLimits(limits);
    if (changes.rpm === undefined && changes.tpm === undefined) {
      throw new TenancyValidationError("Give at least one limit to set (rpm or tpm).", "rpm");
    }
    const updated = await this.db.transaction(async (tx) => {
      const org = await this.requireOrgRow(tx, orgName);
      const [row] = await tx
        .update(organizations)
        .set(changes)
        .where(eq(organizations.id, org.id))
        .returning();
      if (row === undefined) throw new OrgNotFoundError(orgName);
      await this.audit(tx, actor, "limits.set", org.id, org.name, { rpm: row.rpm, tpm: row.tpm });
      return toOrg(row, await this.grantedModels(tx, org.id));
    });
    // Cached principals carry the limits.
    this.changed({ kind: "org", orgId: updated.id });
    return updated;
  }

  async listOrgs(): Promise<Org[]> {
    const orgs = await this.db.select().from(organizations).orderBy(asc(organizations.name));
    const grants = await this.db
      .select({ orgId: modelGrants.orgId, modelId: modelGrants.modelId })
      .from(modelGrants)
      .orderBy(asc(modelGrants.modelId));
    const byOrg = new Map<string, string[]>();
    for (const g of grants) {
      const list = byOrg.get(g.orgId);
      if (list === undefined) byOrg.set(g.orgId, [g.modelId]);
      else list.push(g.modelId);
    }
    return orgs.map((row) => toOrg(row, byOrg.get(row.id) ?? []));
  }

  async getOrgByName(name: string): Promise<Org | null> {
    const row = await this.findOrgRow(this.db, name);
    return row === undefined ? null : toOrg(row, await this.grantedModels(this.db, row.id));
  }

  /** Grants a configured model to an org; granting twice is not an error. */
  async grantModel(orgName: string, modelId: string, actor: Actor = ADMIN_ACTOR): Promise<Org> {
    this.assertKnownModel(modelId);
    const org = await this.db.transaction(async (tx) => {
      const row = await this.requireOrgRow(tx, orgName);
      const inserted = await tx
        .insert(modelGrants)
        .values({ orgId: row.id, modelId, createdAt: new Date(this.now()) })
        .onConflictDoNothing()
        .returning({ modelId: modelGrants.modelId });
      // Only real changes are recorded: granting twice changes nothing.
      if (inserted.length > 0) await this.audit(tx, actor, "grant", row.id, modelId);
      return row;
    });
    this.changed({ kind: "org", orgId: org.id });
    return toOrg(org, await this.grantedModels(this.db, org.id));
  }

  /** Removes a grant. The model need not be configured any more: stale grants must stay removable. */
  async revokeModel(orgName: string, modelId: string, actor: Actor = ADMIN_ACTOR): Promise<Org> {
    const org = await this.db.transaction(async (tx) => {
      const row = await this.requireOrgRow(tx, orgName);
      const deleted = await tx
        .delete(modelGrants)
        .where(and(eq(modelGrants.orgId, row.id), eq(modelGrants.modelId, modelId)))
        .returning({ modelId: modelGrants.modelId });
      if (deleted.length === 0) throw new GrantNotFoundError(orgName, modelId);
      await this.audit(tx, actor, "revoke-grant", row.id, modelId);
      return row;
    });
    this.changed({ kind: "org", orgId: org.id });
    return toOrg(org, await this.grantedModels(this.db, org.id));
  }

  /** Model ids the org may use (cached briefly: a grant or revocation elsewhere shows within the cache TTL). */
  async allowedModels(orgId: string): Promise<Set<string>> {
    let models = this.grantCache.get(orgId);
    if (models === undefined) {
      models = new Set(await this.grantedModels(this.db, orgId));
      this.grantCache.set(orgId, models);
    }
    // A copy, so a caller cannot change what the next request sees.
    return new Set(models);
  }

  // ---- keys ----

  /** Creates a key; the returned value is the only place its secret ever exists. */
  async createKey(orgName: string, options: CreateKeyOptions = {}): Promise<CreatedKey> {
    return this.db.transaction(async (tx) => {
      const org = await this.requireOrgRow(tx, orgName);
      return this.insertKey(tx, org, options, options.actor ?? ADMIN_ACTOR);
    });
  }

  async listKeys(orgName: string): Promise<KeyInfo[]> {
    const org = await this.requireOrgRow(this.db, orgName);
    const rows = await this.db
      .select()
      .from(apiKeys)
      .where(eq(apiKeys.orgId, org.id))
      .orderBy(asc(apiKeys.createdAt), asc(apiKeys.id));
    return rows.map((row) => this.withPendingUse(toKeyInfo(row, org.name)));
  }

  /**
   * Revokes a key at once in this process (and within the cache TTL in other replicas); idempotent. With
   * `orgName`, a key of any other org is "not found" and untouched: a user acting for one org cannot reach
   * another's keys by id.
   */
  async revokeKey(
    id: string,
    actor: Actor = ADMIN_ACTOR,
    scope: { orgName?: string } = {},
  ): Promise<KeyInfo> {
    const row = await this.db.transaction(async (tx) => {
      const found = await tx
        .select({ key: apiKeys, orgName: organizations.name })
        .from(apiKeys)
        .innerJoin(organizations, eq(apiKeys.orgId, organizations.id))
        .where(eq(apiKeys.id, id))
        .for("update", { of: apiKeys });
      const current = found[0];
      if (current === undefined || (scope.orgName !== undefined && current.orgName !== scope.orgName)) {
        throw new KeyNotFoundError(id);
      }
      const revoked = await tx
        .update(apiKeys)
        .set({ revokedAt: new Date(this.now()) })
        .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
        .returning({ revokedAt: apiKeys.revokedAt });
      current.key.revokedAt = revoked[0]?.revokedAt ?? current.key.revokedAt;
      // Revoking twice is fine and recorded once.
      if (revoked.length > 0) await this.audit(tx, actor, "key.revoke", current.key.orgId, id);
      return current;
    });
    this.changed({ kind: "key", keyId: row.key.id });
    return this.withPendingUse(toKeyInfo(row.key, row.orgName));
  }

  /** The principal of a valid key; null for malformed, unknown, revoked or expired keys (no reason given). */
  async verifyKey(secret: string): Promise<Principal | null> {
    if (!isWellFormedApiKey(secret)) return null;
    const hash = hashApiKey(this.keySecret, secret);
    const now = this.now();
    const cached = this.keyCache.get(hash);
    if (cached !== undefined) {
      if (cached.keyExpiresAt !== null && cached.keyExpiresAt <= now) return null;
      this.lastUsed.record(cached.principal.keyId, now);
      return { ...cached.principal };
    }

    const rows = await this.db
      .select({ key: apiKeys, orgName: organizations.name, rpm: organizations.rpm, tpm: organizations.tpm })
      .from(apiKeys)
      .innerJoin(organizations, eq(apiKeys.orgId, organizations.id))
      .where(eq(apiKeys.hash, hash))
      .limit(1);
    const row = rows[0];
    // The lookup is by hash, so equality holds; the constant-time check guards against a lookup that ever matches
    // loosely (collation, a changed index) without leaking timing.
    if (row === undefined || !hashesEqual(row.key.hash, hash)) return null;
    const { key } = row;
    if (key.revokedAt !== null) return null;
    if (key.expiresAt !== null && key.expiresAt.getTime() <= now) return null;

    const principal: Principal = {
      orgId: key.orgId,
      orgName: row.orgName,
      keyId: key.id,
      rpm: row.rpm,
      tpm: row.tpm,
    };
    this.keyCache.set(hash, { principal, keyExpiresAt: key.expiresAt?.getTime() ?? null });
    this.lastUsed.record(key.id, now);
    return { ...principal };
  }

  /**
   * First start: on an empty store, creates org `default` granted `modelIds` and one key (and, with
   * `ownerEmail`, its first owner with a random password), in one transaction, and returns the secrets once.
   * Null when any org exists (also when another replica won the race).
   */
  async bootstrap(
    modelIds: readonly string[],
    options: BootstrapOptions = {},
  ): Promise<BootstrapResult | null> {
    const existing = await this.db.select({ id: organizations.id }).from(organizations).limit(1);
    if (existing.length > 0) return null;
    const ownerEmail = options.ownerEmail === undefined ? undefined : normaliseEmail(options.ownerEmail);
    const ownerPassword = ownerEmail === undefined ? undefined : choosePassword(undefined).password;
    const ownerHash =
      ownerPassword === undefined ? undefined : await hashPassword(ownerPassword, this.passwordParams);
    try {
      const created = await this.db.transaction(async (tx) => {
        const org = await this.insertOrg(tx, DEFAULT_ORG_NAME, modelIds, {}, SYSTEM_ACTOR);
        const key = await this.insertKey(tx, org, { name: "bootstrap" }, SYSTEM_ACTOR);
        if (ownerEmail !== undefined && ownerHash !== undefined) {
          await this.insertUser(tx, org, ownerEmail, ownerHash, "owner", SYSTEM_ACTOR);
        }
        return key;
      });
      const owner =
        ownerEmail === undefined || ownerPassword === undefined
          ? null
          : { email: ownerEmail, password: ownerPassword };
      return { orgName: created.orgName, keyId: created.id, key: created.key, owner };
    } catch (err) {
      if (err instanceof DuplicateOrgError) return null;
      throw err;
    }
  }

  // ---- users and memberships ----

  /**
   * Creates a user as a member (or owner) of an existing org. The password is hashed with scrypt before any
   * transaction starts; when none is given, a random one is generated and returned once.
   */
  async createUser(input: CreateUserInput): Promise<CreatedUser> {
    const email = normaliseEmail(input.email);
    const role = input.role ?? "member";
    assertRole(role);
    const { password, generated: generatedPassword } = choosePassword(input.password);
    // Fail fast on an unknown org before spending the hash.
    await this.requireOrgRow(this.db, input.orgName);
    const passwordHash = await hashPassword(password, this.passwordParams);
    return this.db.transaction(async (tx) => {
      const org = await this.requireOrgRow(tx, input.orgName);
      const user = await this.insertUser(tx, org, email, passwordHash, role, input.actor ?? ADMIN_ACTOR);
      return { ...user, generatedPassword };
    });
  }

  async listUsers(orgName: string): Promise<OrgUser[]> {
    const org = await this.requireOrgRow(this.db, orgName);
    const rows = await this.db
      .select({ id: users.id, email: users.email, role: memberships.role, createdAt: memberships.createdAt })
      .from(memberships)
      .innerJoin(users, eq(memberships.userId, users.id))
      .where(eq(memberships.orgId, org.id))
      .orderBy(asc(users.email));
    return rows.map((r) => ({ ...r, role: r.role as MembershipRole, orgName: org.name }));
  }

  // ---- audit ----

  /** Audit entries, newest first. */
  async listAudit(query: AuditQuery = {}): Promise<AuditEntry[]> {
    const limit = query.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_AUDIT_PAGE) {
      throw new TenancyValidationError(`limit must be a whole number from 1 to ${MAX_AUDIT_PAGE}.`, "limit");
    }
    const conditions = [];
    if (query.orgName !== undefined) {
      const org = await this.requireOrgRow(this.db, query.orgName);
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

  // ---- internals ----

  private audit(
    tx: StoreTx,
    actor: Actor,
    action: AuditAction,
    orgId: string | null,
    target: string,
    details?: Record<string, unknown>,
  ): Promise<void> {
    return writeAudit(tx, {
      actor,
      action,
      orgId,
      target,
      at: new Date(this.now()),
      ...(details === undefined ? {} : { details }),
    });
  }

  private async insertUser(
    tx: StoreTx,
    org: Pick<OrganizationRow, "id" | "name">,
    email: string,
    passwordHash: string,
    role: MembershipRole,
    actor: Actor,
  ): Promise<OrgUser> {
    const id = newId("user");
    const createdAt = new Date(this.now());
    const inserted = await tx
      .insert(users)
      .values({ id, email, passwordHash, createdAt })
      .onConflictDoNothing({ target: users.email })
      .returning({ id: users.id });
    if (inserted.length === 0) throw new DuplicateUserError(email);
    await tx.insert(memberships).values({ userId: id, orgId: org.id, role, createdAt });
    await this.audit(tx, actor, "user.create", org.id, id, { email, role });
    return { id, email, orgName: org.name, role, createdAt };
  }

  private withPendingUse(key: KeyInfo): KeyInfo {
    const pending = this.lastUsed.pendingFor(key.id);
    if (pending === undefined || (key.lastUsedAt !== null && key.lastUsedAt.getTime() >= pending)) return key;
    return { ...key, lastUsedAt: new Date(pending) };
  }

  private async insertOrg(
    tx: StoreTx,
    name: string,
    models: readonly string[],
    limits: { rpm?: number | null; tpm?: number | null },
    actor: Actor,
  ): Promise<Org> {
    if (!ORG_NAME_PATTERN.test(name)) {
      throw new TenancyValidationError(
        `Invalid organization name "${name}": use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.`,
        "name",
      );
    }
    const unique = [...new Set(models)].sort();
    for (const modelId of unique) this.assertKnownModel(modelId);
    const createdAt = new Date(this.now());
    const inserted = await tx
      .insert(organizations)
      .values({ id: newId("org"), name, createdAt, rpm: limits.rpm ?? null, tpm: limits.tpm ?? null })
      .onConflictDoNothing({ target: organizations.name })
      .returning();
    const row = inserted[0];
    if (row === undefined) throw new DuplicateOrgError(name);
    if (unique.length > 0) {
      await tx.insert(modelGrants).values(unique.map((modelId) => ({ orgId: row.id, modelId, createdAt })));
    }
    await this.audit(tx, actor, "org.create", row.id, name, { models: unique, rpm: row.rpm, tpm: row.tpm });
    return toOrg(row, unique);
  }

  private async insertKey(
    tx: StoreTx,
    org: Pick<OrganizationRow, "id" | "name">,
    options: CreateKeyOptions,
    actor: Actor,
  ): Promise<CreatedKey> {
    const name = options.name?.trim() || null;
    if (name !== null && name.length > MAX_KEY_NAME_LENGTH) {
      throw new TenancyValidationError(`Key name is longer than ${MAX_KEY_NAME_LENGTH} characters.`, "name");
    }
    const createdAt = new Date(this.now());
    const expiresAt = options.expiresAt ?? null;
    if (expiresAt !== null && !(expiresAt.getTime() > createdAt.getTime())) {
      throw new TenancyValidationError("A key's expiry must be in the future.", "expires_at");
    }
    const generated = generateApiKey(this.keySecret);
    const id = newId("key");
    await tx.insert(apiKeys).values({
      id,
      orgId: org.id,
      name,
      prefix: generated.prefix,
      last4: generated.last4,
      hash: generated.hash,
      createdAt,
      expiresAt,
      createdBy: actor,
    });
    // The display form only: the audit trail must never hold anything that verifies.
    await this.audit(tx, actor, "key.create", org.id, id, {
      name,
      display: displayKey(generated.prefix, generated.last4),
      expires_at: expiresAt?.toISOString() ?? null,
    });
    return {
      id,
      key: generated.key,
      name,
      prefix: generated.prefix,
      last4: generated.last4,
      orgId: org.id,
      orgName: org.name,
      createdAt,
      expiresAt,
      createdBy: actor,
    };
  }

  private assertKnownModel(modelId: string): void {
    if (!this.knownModels.has(modelId)) throw new UnknownModelIdError(modelId, this.modelIds);
  }

  private async findOrgRow(exec: Executor, name: string): Promise<OrganizationRow | undefined> {
    const rows = await exec.select().from(organizations).where(eq(organizations.name, name)).limit(1);
    return rows[0];
  }

  private async requireOrgRow(exec: Executor, name: string): Promise<OrganizationRow> {
    const row = await this.findOrgRow(exec, name);
    if (row === undefined) throw new OrgNotFoundError(name);
    return row;
  }

  private async grantedModels(exec: Executor, orgId: string): Promise<string[]> {
    const rows = await exec
      .select({ modelId: modelGrants.modelId })
      .from(modelGrants)
      .where(eq(modelGrants.orgId, orgId))
      .orderBy(asc(modelGrants.modelId));
    return rows.map((r) => r.modelId);
  }
}

function toOrg(row: OrganizationRow, models: string[]): Org {
  return { id: row.id, name: row.name, createdAt: row.createdAt, rpm: row.rpm, tpm: row.tpm, models };
}

function toKeyInfo(row: ApiKeyRow, orgName: string): KeyInfo {
  return {
    id: row.id,
    orgId: row.orgId,
    orgName,
    name: row.name,
    prefix: row.prefix,
    last4: row.last4,
    display: displayKey(row.prefix, row.last4),
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    revokedAt: row.revokedAt,
    expiresAt: row.expiresAt,
    createdBy: row.createdBy,
  };
}

/** 0 and null mean unlimited and are stored as null; undefined means "not given". */
function normaliseLimits(limits: OrgLimits): { rpm?: number | null; tpm?: number | null } {
  const out: { rpm?: number | null; tpm?: number | null } = {};
  for (const field of ["rpm", "tpm"] as const) {
    const value = limits[field];
    if (value === undefined) continue;
    if (value !== null && (!Number.isInteger(value) || value < 0 || value > MAX_LIMIT_VALUE)) {
      throw new TenancyValidationError(
        `${field} must be a whole number from 0 (unlimited) to ${MAX_LIMIT_VALUE}.`,
        field,
      );
    }
    out[field] = value === 0 ? null : value;
  }
  return out;
}
