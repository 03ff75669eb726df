// The tenancy services built once over the store: the typed bag that the server, admin API, dashboard and tests use.
import { sql } from "drizzle-orm";
import type { StoreDb, StoreDriver } from "../store/open-store.js";
import { StoreStatus } from "../store/store-status.js";
import { AuditService } from "./audit.js";
import { bootstrap } from "./bootstrap.js";
import { FlashService } from "./flash.js";
import { CacheInvalidations } from "./invalidation.js";
import { InvitationService } from "./invitations.js";
import { KeyService } from "./keys.js";
import { MemberService } from "./members.js";
import { OrgService } from "./orgs.js";
import type { ScryptParams } from "./password.js";
import { SessionService } from "./sessions.js";
import type { BootstrapOptions, BootstrapResult } from "./types.js";
import { UserService } from "./users.js";

/** The cache TTL where other replicas share the store: the bound on a change they made going unseen. */
const SHARED_STORE_CACHE_TTL_MS = 1000;

/**
 * How long verified keys and grant sets are served from memory before the store is read again. On PostgreSQL,
 * replicas share the store: a change another replica makes reaches this one by the Redis broadcast, and the TTL
 * (1 s) is the bound when the broadcast is missing or lost. The embedded store (PGlite) has one process, this
 * one, and every change (admin API, dashboard, CLI through the admin API) drops its entries at once (the
 * invalidation fan-out): nothing can change behind the cache, so a short TTL would only re-read the same rows, a
 * synchronous WASM query on the event loop (a key lookup took 4.6 ms inside a loaded gateway on 2026-11-26),
 * once per second for every key and organization in use. There the TTL (5 min) only bounds the life of entries.
 */
export function cacheTtlMsFor(driver: StoreDriver): number {
  switch (driver) {
    case "postgres":
      return SHARED_STORE_CACHE_TTL_MS;
    case "pglite":
      return 5 * 60_000;
    default:
      return driver satisfies never;
  }
}

export interface TenancyOptions {
  /** HMAC key for API keys (see auth/key-secret.ts). */
  keySecret: Uint8Array;
  /** Ids of the models served now (a function: models are added and removed at run time); grants of anything else are refused. */
  modelIds: readonly string[] | (() => readonly string[]);
  /**
   * How long verified keys and grant sets are cached: the delay before a change made elsewhere takes effect.
   * Default 1 s; the server sets `cacheTtlMsFor(store.driver)`.
   */
  cacheTtlMs?: number;
  cacheMaxEntries?: number;
  /**
   * How long a verified key (and its org's grants) keeps working while the store cannot be asked; 0 = not at
   * all. Default 5 minutes.
   */
  staleIfErrorMs?: number;
  /** The store's health, shared with /health. Default: one over `db` with the default timeouts. */
  storeStatus?: StoreStatus;
  /** How long key uses wait in memory before last_used_at is written (default 5 s). */
  lastUsedFlushMs?: number;
  /** Where background failures (a failed last-used flush) are reported; default: a process warning. */
  onBackgroundError?: (err: unknown) => void;
  /** scrypt cost for new passwords; tests lower it. */
  passwordParams?: ScryptParams;
  /** How long an invitation link works (default 7 days). */
  invitationTtlMs?: number;
  now?: () => number;
}

export interface Tenancy {
  /** Organizations, limits, model grants and the grant cache. */
  readonly orgs: OrgService;
  /** API keys, the verified-key cache and last-used times; derives secrets from the server key secret. */
  readonly keys: KeyService;
  /** Users created by the operator, and an org's user list. */
  readonly users: UserService;
  /** The audit trail's reader. */
  readonly audit: AuditService;
  /** Dashboard users' memberships and the owners' member management. */
  readonly members: MemberService;
  /** Dashboard sign-in sessions. */
  readonly sessions: SessionService;
  /** Owners' invitations and their links: how people join an org (claimed as a new account or accepted). */
  readonly invitations: InvitationService;
  /** One-time, sealed messages from a dashboard POST to the page it redirects to. */
  readonly flash: FlashService;
  /** Drops stale cache entries on every change; the Redis broadcast listens to it and feeds it. */
  readonly invalidation: CacheInvalidations;
  /** First start on an empty store (see bootstrap.ts); null when any org exists. */
  bootstrap(modelIds: readonly string[], options?: BootstrapOptions): Promise<BootstrapResult | null>;
  /** Writes the key uses noted since the last flush (they are otherwise written every few seconds). */
  flush(): Promise<void>;
  /** Flushes pending key uses and stops the timer; call before closing the store. */
  dispose(): Promise<void>;
}

const DEFAULT_STALE_IF_ERROR_MS = 5 * 60_000;

export function createTenancy(db: StoreDb, options: TenancyOptions): Tenancy {
  const now = options.now ?? Date.now;
  // Keys and grant sets share one policy: a change made elsewhere shows within the same TTL for both.
  const cache = {
    ttlMs: options.cacheTtlMs ?? SHARED_STORE_CACHE_TTL_MS,
    maxEntries: options.cacheMaxEntries ?? 10_000,
    staleMs: options.staleIfErrorMs ?? DEFAULT_STALE_IF_ERROR_MS,
    now,
  };
  const store =
    options.storeStatus ??
    new StoreStatus(
      async () => {
        await db.execute(sql`select 1`);
      },
      { cacheMs: 1000, timeoutMs: 2000 },
    );
  const invalidation = new CacheInvalidations();
  const orgs = new OrgService(db, { modelIds: options.modelIds, cache, store, invalidation, now });
  const keys = new KeyService(db, {
    keySecret: options.keySecret,
    cache,
    store,
    lastUsed: {
      flushIntervalMs: options.lastUsedFlushMs ?? 5000,
      onError:
        options.onBackgroundError ??
        ((err) => process.emitWarning(`hearth: could not record API key use: ${String(err)}`)),
    },
    invalidation,
    now,
  });
  const users = new UserService(db, { passwordParams: options.passwordParams, now });
  const bootstrapDeps = { db, orgs, keys, users, passwordParams: options.passwordParams, now };
  return Object.freeze({
    orgs,
    keys,
    users,
    audit: new AuditService(db),
    members: new MemberService(db, { passwordParams: options.passwordParams, now }),
    sessions: new SessionService(db, now),
    invitations: new InvitationService(db, {
      passwordParams: options.passwordParams,
      ttlMs: options.invitationTtlMs,
      now,
    }),
    flash: new FlashService(db, { key: keys.deriveSecret("dashboard-flash"), now }),
    invalidation,
    bootstrap: (modelIds: readonly string[], bootstrapOptions: BootstrapOptions = {}) =>
      bootstrap(bootstrapDeps, modelIds, bootstrapOptions),
    flush: () => keys.flush(),
    dispose: () => {
      store.stop();
      return keys.dispose();
    },
  });
}
