// Organizations, model grants and API keys: the tenancy rules, written once over either store driver. No HTTP.
import { and, asc, eq, isNull } from "drizzle-orm";
import { displayKey, generateApiKey, hashApiKey, hashesEqual, isWellFormedApiKey } from "../auth/api-key.js";
import type { Principal } from "../auth/principal.js";
import { newId } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import {
  type ApiKeyRow,
  apiKeys,
  modelGrants,
  type OrganizationRow,
  organizations,
} from "../store/schema.js";
import {
  DuplicateOrgError,
  GrantNotFoundError,
  KeyNotFoundError,
  OrgNotFoundError,
  TenancyValidationError,
  UnknownModelIdError,
} from "./errors.js";
import { TtlCache } from "./ttl-cache.js";

export const DEFAULT_ORG_NAME = "default";
const ORG_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_KEY_NAME_LENGTH = 128;
// last_used_at is a hint for people, not an audit log: one write per key per minute at most.
const LAST_USED_RESOLUTION_MS = 60_000;

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
}

export interface CreateKeyOptions {
  name?: string | undefined;
  expiresAt?: Date | undefined;
}

export interface BootstrapResult {
  orgName: string;
  keyId: string;
  /** The first API key, to be printed once. */
  key: string;
}

export interface TenancyServiceOptions {
  /** HMAC key for API keys (see auth/key-secret.ts). */
  keySecret: Uint8Array;
  /** Ids of the configured models; grants of anything else are refused. */
  modelIds: readonly string[];
  /** How long verified keys and grant sets are cached: the delay before a change made elsewhere takes effect. */
  cacheTtlMs?: number;
  cacheMaxEntries?: number;
  now?: () => number;
}

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
  }

  // ---- organizations and grants ----

  async createOrg(name: string, models: readonly string[] = []): Promise<Org> {
    return this.db.transaction((tx) => this.insertOrg(tx, name, models));
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
  async grantModel(orgName: string, modelId: string): Promise<Org> {
    this.assertKnownModel(modelId);
    const org = await this.requireOrgRow(this.db, orgName);
    await this.db.insert(modelGrants).values({ orgId: org.id, modelId }).onConflictDoNothing();
    this.grantCache.delete(org.id);
    return toOrg(org, await this.grantedModels(this.db, org.id));
  }

  /** Removes a grant. The model need not be configured any more: stale grants must stay removable. */
  async revokeModel(orgName: string, modelId: string): Promise<Org> {
    const org = await this.requireOrgRow(this.db, orgName);
    const deleted = await this.db
      .delete(modelGrants)
      .where(and(eq(modelGrants.orgId, org.id), eq(modelGrants.modelId, modelId)))
      .returning({ modelId: modelGrants.modelId });
    this.grantCache.delete(org.id);
    if (deleted.length === 0) throw new GrantNotFoundError(orgName, modelId);
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
    const org = await this.requireOrgRow(this.db, orgName);
    return this.insertKey(this.db, org, options);
  }

  async listKeys(orgName: string): Promise<KeyInfo[]> {
    const org = await this.requireOrgRow(this.db, orgName);
    const rows = await this.db
      .select()
      .from(apiKeys)
      .where(eq(apiKeys.orgId, org.id))
      .orderBy(asc(apiKeys.createdAt), asc(apiKeys.id));
    return rows.map((row) => toKeyInfo(row, org.name));
  }

  /** Revokes a key at once in this process (and within the cache TTL in other replicas); idempotent. */
  async revokeKey(id: string): Promise<KeyInfo> {
    await this.db
      .update(apiKeys)
      .set({ revokedAt: new Date(this.now()) })
      .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)));
    const rows = await this.db
      .select({ key: apiKeys, orgName: organizations.name })
      .from(apiKeys)
      .innerJoin(organizations, eq(apiKeys.orgId, organizations.id))
      .where(eq(apiKeys.id, id));
    const row = rows[0];
    if (row === undefined) throw new KeyNotFoundError(id);
    this.keyCache.delete(row.key.hash);
    return toKeyInfo(row.key, row.orgName);
  }

  /** The principal of a valid key; null for malformed, unknown, revoked or expired keys (no reason given). */
  async verifyKey(secret: string): Promise<Principal | null> {
    if (!isWellFormedApiKey(secret)) return null;
    const hash = hashApiKey(this.keySecret, secret);
    const now = this.now();
    const cached = this.keyCache.get(hash);
    if (cached !== undefined) {
      if (cached.keyExpiresAt !== null && cached.keyExpiresAt <= now) return null;
      return { ...cached.principal };
    }

    const rows = await this.db
      .select({ key: apiKeys, orgName: organizations.name })
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

    const principal: Principal = { orgId: key.orgId, orgName: row.orgName, keyId: key.id };
    this.keyCache.set(hash, { principal, keyExpiresAt: key.expiresAt?.getTime() ?? null });
    if (key.lastUsedAt === null || now - key.lastUsedAt.getTime() >= LAST_USED_RESOLUTION_MS) {
      await this.db
        .update(apiKeys)
        .set({ lastUsedAt: new Date(now) })
        .where(eq(apiKeys.id, key.id));
    }
    return { ...principal };
  }

  /**
   * First start: on an empty store, creates org `default` granted `modelIds` and one key, in one transaction,
   * and returns the key once. Null when any org exists (also when another replica won the race).
   */
  async bootstrap(modelIds: readonly string[]): Promise<BootstrapResult | null> {
    const existing = await this.db.select({ id: organizations.id }).from(organizations).limit(1);
    if (existing.length > 0) return null;
    try {
      const created = await this.db.transaction(async (tx) => {
        const org = await this.insertOrg(tx, DEFAULT_ORG_NAME, modelIds);
        return this.insertKey(tx, org, { name: "bootstrap" });
      });
      return { orgName: created.orgName, keyId: created.id, key: created.key };
    } catch (err) {
      if (err instanceof DuplicateOrgError) return null;
      throw err;
    }
  }

  // ---- internals ----

  private async insertOrg(exec: Executor, name: string, models: readonly string[]): Promise<Org> {
    if (!ORG_NAME_PATTERN.test(name)) {
      throw new TenancyValidationError(
        `Invalid organization name "${name}": use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.`,
        "name",
      );
    }
    const unique = [...new Set(models)].sort();
    for (const modelId of unique) this.assertKnownModel(modelId);
    const inserted = await exec
      .insert(organizations)
      .values({ id: newId("org"), name, createdAt: new Date(this.now()) })
      .onConflictDoNothing({ target: organizations.name })
      .returning();
    const row = inserted[0];
    if (row === undefined) throw new DuplicateOrgError(name);
    if (unique.length > 0) {
      await exec.insert(modelGrants).values(unique.map((modelId) => ({ orgId: row.id, modelId })));
    }
    return toOrg(row, unique);
  }

  private async insertKey(
    exec: Executor,
    org: Pick<OrganizationRow, "id" | "name">,
    options: CreateKeyOptions,
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
    await exec.insert(apiKeys).values({
      id,
      orgId: org.id,
      name,
      prefix: generated.prefix,
      last4: generated.last4,
      hash: generated.hash,
      createdAt,
      expiresAt,
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
  };
}
