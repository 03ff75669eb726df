// Organizations, their limits and model grants, and the briefly cached grant sets every request checks. No HTTP.
// Every change writes its audit row in the change's own transaction and invalidates what it made stale.
import { and, asc, eq } from "drizzle-orm";
import { newId } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import { modelGrants, organizations } from "../store/schema.js";
import { type StoreStatus, StoreUnavailableError } from "../store/store-status.js";
import { type Actor, ADMIN_ACTOR, writeAudit } from "./audit.js";
import {
  DuplicateOrgError,
  GrantNotFoundError,
  OrgNotFoundError,
  TenancyValidationError,
  UnknownModelIdError,
} from "./errors.js";
import type { CacheInvalidations } from "./invalidation.js";
import { findOrgRow, grantedModels, requireOrgRow, type StoreTx, toOrg } from "./tenancy-store.js";
import { TtlCache, type TtlCacheOptions } from "./ttl-cache.js";
import type { CreateOrgOptions, Org, OrgLimits } from "./types.js";

const ORG_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_LIMIT_VALUE = 2_000_000_000;

type LimitChanges = { rpm?: number | null; tpm?: number | null };

export interface OrgServiceOptions {
  /** Ids of the models served now (a function: models are added and removed at run time); grants of anything else are refused. */
  modelIds: readonly string[] | (() => readonly string[]);
  /** The grant cache's TTL and size: the delay before a change made elsewhere takes effect. */
  cache: TtlCacheOptions;
  /** Whether the store answers: while it does not, grant sets read recently are served from the cache. */
  store: StoreStatus;
  invalidation: CacheInvalidations;
  now: () => number;
}

export class OrgService {
  private readonly modelIds: () => readonly string[];
  private readonly grantCache: TtlCache<string, ReadonlySet<string>>;
  private readonly invalidation: CacheInvalidations;
  private readonly store: StoreStatus;
  private readonly now: () => number;

  constructor(
    private readonly db: StoreDb,
    options: OrgServiceOptions,
  ) {
    this.store = options.store;
    const ids = options.modelIds;
    this.modelIds = typeof ids === "function" ? ids : () => ids;
    this.grantCache = new TtlCache(options.cache);
    this.invalidation = options.invalidation;
    this.now = options.now;
    this.invalidation.addCache((event) => {
      if (event.kind === "org") this.grantCache.delete(event.orgId);
      else if (event.kind === "all") this.grantCache.clear();
    });
  }

  async create(name: string, models: readonly string[] = [], options: CreateOrgOptions = {}): Promise<Org> {
    const limits = normaliseLimits(options);
    return this.db.transaction((tx) => this.insert(tx, name, models, limits, options.actor ?? ADMIN_ACTOR));
  }

  /** Sets the given limits (0 or null = unlimited); a limit left undefined keeps its value. */
  async setLimits(orgName: string, limits: OrgLimits, actor: Actor = ADMIN_ACTOR): Promise<Org> {
    const changes = normaliseLimits(limits);
    if (changes.rpm === undefined && changes.tpm === undefined) {
      throw new TenancyValidationError("Give at least one limit to set (rpm or tpm).", "rpm");
    }
    const updated = await this.db.transaction(async (tx) => {
      const org = await requireOrgRow(tx, orgName);
      const [row] = await tx
        .update(organizations)
        .set(changes)
        .where(eq(organizations.id, org.id))
        .returning();
      if (row === undefined) throw new OrgNotFoundError(orgName);
      await writeAudit(tx, {
        actor,
        action: "limits.set",
        orgId: org.id,
        target: org.name,
        details: { rpm: row.rpm, tpm: row.tpm },
        at: new Date(this.now()),
      });
      return toOrg(row, await grantedModels(tx, org.id));
    });
    // Cached principals carry the limits.
    this.invalidation.changed({ kind: "org", orgId: updated.id });
    return updated;
  }

  async list(): Promise<Org[]> {
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

  async getByName(name: string): Promise<Org | null> {
    const row = await findOrgRow(this.db, name);
    return row === undefined ? null : toOrg(row, await grantedModels(this.db, row.id));
  }

  /** Grants a configured model to an org; granting twice is not an error. */
  async grantModel(orgName: string, modelId: string, actor: Actor = ADMIN_ACTOR): Promise<Org> {
    this.assertKnownModel(modelId);
    const org = await this.db.transaction(async (tx) => {
      const row = await requireOrgRow(tx, orgName);
      const inserted = await tx
        .insert(modelGrants)
        .values({ orgId: row.id, modelId, createdAt: new Date(this.now()) })
        .onConflictDoNothing()
        .returning({ modelId: modelGrants.modelId });
      // Only real changes are recorded: granting twice changes nothing.
      if (inserted.length > 0) {
        await writeAudit(tx, {
          actor,
          action: "grant",
          orgId: row.id,
          target: modelId,
          at: new Date(this.now()),
        });
      }
      return row;
    });
    this.invalidation.changed({ kind: "org", orgId: org.id });
    return toOrg(org, await grantedModels(this.db, org.id));
  }

  /** Removes a grant. The model need not be configured any more: stale grants must stay removable. */
  async revokeModel(orgName: string, modelId: string, actor: Actor = ADMIN_ACTOR): Promise<Org> {
    const org = await this.db.transaction(async (tx) => {
      const row = await requireOrgRow(tx, orgName);
      const deleted = await tx
        .delete(modelGrants)
        .where(and(eq(modelGrants.orgId, row.id), eq(modelGrants.modelId, modelId)))
        .returning({ modelId: modelGrants.modelId });
      if (deleted.length === 0) throw new GrantNotFoundError(orgName, modelId);
      await writeAudit(tx, {
        actor,
        action: "revoke-grant",
        orgId: row.id,
        target: modelId,
        at: new Date(this.now()),
      });
      return row;
    });
    this.invalidation.changed({ kind: "org", orgId: org.id });
    return toOrg(org, await grantedModels(this.db, org.id));
  }

  /**
   * Model ids the org may use (cached briefly: a grant or revocation elsewhere shows within the cache TTL). While
   * the store cannot be asked, a set read within the stale window is served (as verified keys are); without one,
   * a StoreUnavailableError.
   */
  async allowedModels(orgId: string): Promise<Set<string>> {
    // A copy, so a caller cannot change what the next request sees.
    return new Set(await this.grants(orgId));
  }

  private async grants(orgId: string): Promise<ReadonlySet<string>> {
    const cached = this.grantCache.get(orgId);
    if (cached !== undefined) return cached;
    const stale = this.grantCache.getStale(orgId);
    if (!this.store.available) {
      if (stale !== undefined) return stale;
      throw new StoreUnavailableError("model grants cannot be read: the store is unavailable");
    }
    // Taken before the read: a grant change that lands while it is in flight must not be cached over.
    const generation = this.grantCache.generation;
    let models: Set<string>;
    try {
      models = new Set(await this.store.bounded(grantedModels(this.db, orgId)));
    } catch (err) {
      this.store.failed(err);
      if (stale !== undefined) return stale;
      throw new StoreUnavailableError("model grants cannot be read: the store is unavailable", {
        cause: err,
      });
    }
    this.grantCache.setIfCurrent(generation, orgId, models);
    return models;
  }

  /** Inserts an org with its grants and audit row in the caller's transaction (also the first-start bootstrap's). */
  async insert(
    tx: StoreTx,
    name: string,
    models: readonly string[],
    limits: LimitChanges,
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
    await writeAudit(tx, {
      actor,
      action: "org.create",
      orgId: row.id,
      target: name,
      details: { models: unique, rpm: row.rpm, tpm: row.tpm },
      at: new Date(this.now()),
    });
    return toOrg(row, unique);
  }

  private assertKnownModel(modelId: string): void {
    const known = this.modelIds();
    if (!known.includes(modelId)) throw new UnknownModelIdError(modelId, known);
  }
}

/** 0 and null mean unlimited and are stored as null; undefined means "not given". */
function normaliseLimits(limits: OrgLimits): LimitChanges {
  const out: LimitChanges = {};
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
