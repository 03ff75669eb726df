// API keys: create, list, revoke and verify, with the verified-key cache and the coalesced last-used times. No HTTP.
// Every change writes its audit row in the change's own transaction and invalidates what it made stale.
import { createHmac } from "node:crypto";
import { and, asc, eq, isNull } from "drizzle-orm";
import { displayKey, generateApiKey, hashApiKey, hashesEqual, isWellFormedApiKey } from "../auth/api-key.js";
import type { Principal } from "../auth/principal.js";
import { newId } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import { type ApiKeyRow, apiKeys, organizations } from "../store/schema.js";
import { type StoreStatus, StoreUnavailableError } from "../store/store-status.js";
import { type Actor, ADMIN_ACTOR, writeAudit } from "./audit.js";
import { KeyNotFoundError, TenancyValidationError } from "./errors.js";
import type { CacheInvalidations } from "./invalidation.js";
import { LastUsedRecorder, type LastUsedRecorderOptions } from "./last-used.js";
import { type OrgRef, requireOrgRow, type StoreTx } from "./tenancy-store.js";
import { TtlCache, type TtlCacheOptions } from "./ttl-cache.js";
import type { CreatedKey, CreateKeyOptions, KeyInfo } from "./types.js";

const MAX_KEY_NAME_LENGTH = 128;

export interface KeyServiceOptions {
  /** HMAC key for API keys (see auth/key-secret.ts). */
  keySecret: Uint8Array;
  /**
   * The verified-key cache's TTL and size (the delay before a change made elsewhere takes effect), and how long
   * a verified key keeps working while the store cannot be asked (staleMs).
   */
  cache: TtlCacheOptions;
  /** Whether the store answers: while it does not, known keys are served from the cache and others refused. */
  store: StoreStatus;
  /** How key uses are coalesced before last_used_at is written. */
  lastUsed: LastUsedRecorderOptions;
  invalidation: CacheInvalidations;
  now: () => number;
}

interface CachedKey {
  principal: Principal;
  keyExpiresAt: number | null;
}

export class KeyService {
  private readonly keySecret: Uint8Array;
  /** Verified keys by HMAC hash. Only successes are cached, so a new key works at once. */
  private readonly keyCache: TtlCache<string, CachedKey>;
  private readonly lastUsed: LastUsedRecorder;
  private readonly invalidation: CacheInvalidations;
  private readonly store: StoreStatus;
  private readonly now: () => number;

  constructor(
    private readonly db: StoreDb,
    options: KeyServiceOptions,
  ) {
    this.keySecret = options.keySecret;
    this.store = options.store;
    this.keyCache = new TtlCache(options.cache);
    this.lastUsed = new LastUsedRecorder(db, options.lastUsed);
    this.invalidation = options.invalidation;
    this.now = options.now;
    // An org's events drop its keys too: cached principals carry the org's limits. Every event also bumps the
    // cache's generation, so a verification that read the key before the change is not cached (see verify).
    this.invalidation.addCache((event) => {
      if (event.kind === "key") this.keyCache.deleteWhere((entry) => entry.principal.keyId === event.keyId);
      else if (event.kind === "org")
        this.keyCache.deleteWhere((entry) => entry.principal.orgId === event.orgId);
      else if (event.kind === "all") this.keyCache.clear();
    });
  }

  /**
   * A 32-byte key for another purpose (e.g. "dashboard-csrf"), derived from the server key secret: replicas that
   * share the secret share it, and the secret itself never leaves this service.
   */
  deriveSecret(purpose: string): Buffer {
    return createHmac("sha256", this.keySecret).update(`hearth derived secret: ${purpose}`).digest();
  }

  /** Creates a key; the returned value is the only place its secret ever exists. */
  async create(orgName: string, options: CreateKeyOptions = {}): Promise<CreatedKey> {
    return this.db.transaction(async (tx) => {
      const org = await requireOrgRow(tx, orgName);
      return this.insert(tx, org, options, options.actor ?? ADMIN_ACTOR);
    });
  }

  async list(orgName: string): Promise<KeyInfo[]> {
    const org = await requireOrgRow(this.db, orgName);
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
  async revoke(id: string, actor: Actor = ADMIN_ACTOR, scope: { orgName?: string } = {}): Promise<KeyInfo> {
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
      if (revoked.length > 0) {
        await writeAudit(tx, {
          actor,
          action: "key.revoke",
          orgId: current.key.orgId,
          target: id,
          at: new Date(this.now()),
        });
      }
      return current;
    });
    this.invalidation.changed({ kind: "key", keyId: row.key.id });
    return this.withPendingUse(toKeyInfo(row.key, row.orgName));
  }

  /**
   * The principal of a valid key; null for malformed, unknown, revoked or expired keys (no reason given). While
   * the store cannot be asked, a key verified within the stale window is served as it was then, and any other
   * key is a StoreUnavailableError (the caller answers 503: retry later).
   */
  async verify(secret: string): Promise<Principal | null> {
    if (!isWellFormedApiKey(secret)) return null;
    const hash = hashApiKey(this.keySecret, secret);
    const now = this.now();
    const cached = this.keyCache.get(hash);
    if (cached !== undefined) return this.use(cached, now);
    const stale = this.keyCache.getStale(hash);
    // Known down: answer at once rather than wait on the store per request (a background ping finds recovery).
    if (!this.store.available) {
      if (stale !== undefined) return this.use(stale, now);
      throw new StoreUnavailableError("API keys cannot be checked: the store is unavailable");
    }

    // Taken before the read: a revocation that lands while the read is in flight must not be cached over.
    const generation = this.keyCache.generation;
    let rows: Awaited<ReturnType<KeyService["lookup"]>>;
    try {
      rows = await this.store.bounded(this.lookup(hash));
    } catch (err) {
      this.store.failed(err);
      if (stale !== undefined) return this.use(stale, now);
      throw new StoreUnavailableError("API keys cannot be checked: the store is unavailable", { cause: err });
    }
    const row = rows[0];
    // The lookup is by hash, so equality holds; the constant-time check guards against a lookup that ever matches
    // loosely (collation, a changed index) without leaking timing.
    const valid =
      row !== undefined &&
      hashesEqual(row.key.hash, hash) &&
      row.key.revokedAt === null &&
      (row.key.expiresAt === null || row.key.expiresAt.getTime() > now);
    if (!valid) {
      // The store's answer wins over a stale entry (revoked elsewhere while a broadcast was lost).
      if (stale !== undefined) this.keyCache.delete(hash);
      return null;
    }
    const { key } = row;
    const principal: Principal = {
      orgId: key.orgId,
      orgName: row.orgName,
      keyId: key.id,
      rpm: row.rpm,
      tpm: row.tpm,
    };
    this.keyCache.setIfCurrent(generation, hash, {
      principal,
      keyExpiresAt: key.expiresAt?.getTime() ?? null,
    });
    this.lastUsed.record(key.id, now);
    return { ...principal };
  }

  private async lookup(hash: string) {
    return await this.db
      .select({ key: apiKeys, orgName: organizations.name, rpm: organizations.rpm, tpm: organizations.tpm })
      .from(apiKeys)
      .innerJoin(organizations, eq(apiKeys.orgId, organizations.id))
      .where(eq(apiKeys.hash, hash))
      .limit(1);
  }

  /** A cached verification: still refused once the key has expired. */
  private use(cached: CachedKey, now: number): Principal | null {
    if (cached.keyExpiresAt !== null && cached.keyExpiresAt <= now) return null;
    this.lastUsed.record(cached.principal.keyId, now);
    return { ...cached.principal };
  }

  /** Inserts a key and its audit row in the caller's transaction (also the first-start bootstrap's). */
  async insert(tx: StoreTx, org: OrgRef, options: CreateKeyOptions, actor: Actor): Promise<CreatedKey> {
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
    await writeAudit(tx, {
      actor,
      action: "key.create",
      orgId: org.id,
      target: id,
      details: {
        name,
        display: displayKey(generated.prefix, generated.last4),
        expires_at: expiresAt?.toISOString() ?? null,
      },
      at: new Date(this.now()),
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

  /** Writes the key uses noted since the last flush (they are otherwise written every few seconds). */
  flush(): Promise<void> {
    return this.lastUsed.flush();
  }

  /** Flushes pending key uses and stops the timer; call before closing the store. */
  dispose(): Promise<void> {
    return this.lastUsed.dispose();
  }

  private withPendingUse(key: KeyInfo): KeyInfo {
    const pending = this.lastUsed.pendingFor(key.id);
    if (pending === undefined || (key.lastUsedAt !== null && key.lastUsedAt.getTime() >= pending)) return key;
    return { ...key, lastUsedAt: new Date(pending) };
  }
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
