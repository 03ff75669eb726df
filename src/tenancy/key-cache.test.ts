// The verified-key cache against the store's failures and races: stale-if-error while the store is down, a
// revocation generation so a verification that raced a revocation is never cached, and the TTL per store.
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dataDirWithPglite } from "../../test/support/pglite-template.js";
import { openStore, type Store, type StoreDb, type StoreDriver } from "../store/open-store.js";
import { StoreStatus, StoreUnavailableError } from "../store/store-status.js";
import { cacheTtlMsFor, createTenancy, type Tenancy } from "./tenancy.js";

const KEY_SECRET = Buffer.alloc(32, 3);

/**
 * The store handle with every top-level select's result held back until `release()`: the read happens at once
 * (it sees the store as it is now), the caller gets the answer later — the window a revocation can land in.
 */
function heldReads(db: StoreDb) {
  let gate: Promise<void> | undefined;
  let read: (() => void) | undefined;
  const hold = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(t, p) {
        const value: unknown = Reflect.get(t, p, t);
        if (typeof value !== "function") return value;
        if (p === "then") {
          return (ok: (v: unknown) => unknown, fail: (e: unknown) => unknown) =>
            value
              .call(t, async (result: unknown) => {
                const waiting = gate;
                read?.();
                await waiting;
                return result;
              })
              .then(ok, fail);
        }
        return (...args: unknown[]) => {
          const out: unknown = value.apply(t, args);
          return typeof out === "object" && out !== null ? hold(out) : out;
        };
      },
    });
  const proxy = new Proxy(db, {
    get(t, p) {
      const value: unknown = Reflect.get(t, p, t);
      if (typeof value !== "function") return value;
      if (p === "select") return (...args: unknown[]) => hold(value.apply(t, args));
      return value.bind(t);
    },
  });
  return {
    db: proxy,
    /** Holds the next reads' answers; resolves once one has been read. */
    holdNext(): { readDone: Promise<void>; release: () => void } {
      let release = () => {};
      gate = new Promise((r) => {
        release = () => {
          gate = undefined;
          r();
        };
      });
      const readDone = new Promise<void>((r) => {
        read = () => {
          read = undefined;
          r();
        };
      });
      return { readDone, release };
    },
  };
}

describe("a verification that races a revocation", () => {
  let dir: string;
  let store: Store;
  let reads: ReturnType<typeof heldReads>;
  let tenancy: Tenancy;
  let otherReplica: Tenancy;

  beforeAll(async () => {
    dir = await dataDirWithPglite();
    store = await openStore({ dataDir: dir });
    reads = heldReads(store.db);
    // A long TTL: without the generation, the raced verification would be served for all of it.
    const options = { keySecret: KEY_SECRET, modelIds: ["m"], cacheTtlMs: 60_000 };
    tenancy = createTenancy(reads.db, options);
    otherReplica = createTenancy(store.db, options);
    await tenancy.orgs.create("acme", ["m"]);
  });

  afterAll(async () => {
    await tenancy?.dispose();
    await otherReplica?.dispose();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is not cached when the revocation is made on this replica while the key is being read", async () => {
    const { id, key } = await tenancy.keys.create("acme");
    const { readDone, release } = reads.holdNext();
    const racing = tenancy.keys.verify(key);
    await readDone; // the lookup has seen the key valid
    await tenancy.keys.revoke(id);
    release();
    expect(await racing).not.toBeNull(); // it was valid when read: this one request is served
    expect(await tenancy.keys.verify(key)).toBeNull();
  });

  it("is not cached when the revocation arrives from another replica while the key is being read", async () => {
    const { id, key } = await tenancy.keys.create("acme");
    const { readDone, release } = reads.holdNext();
    const racing = tenancy.keys.verify(key);
    await readDone;
    await otherReplica.keys.revoke(id);
    // What the Redis broadcast delivers on this replica.
    tenancy.invalidation.invalidate({ kind: "key", keyId: id });
    release();
    expect(await racing).not.toBeNull();
    expect(await tenancy.keys.verify(key)).toBeNull();
  });

  it("caches no grant set read while a grant is revoked on another replica", async () => {
    const org = await tenancy.orgs.create("beta", ["m"]);
    const { readDone, release } = reads.holdNext();
    const racing = tenancy.orgs.allowedModels(org.id);
    await readDone; // the read has seen the grant
    await otherReplica.orgs.revokeModel("beta", "m");
    tenancy.invalidation.invalidate({ kind: "org", orgId: org.id });
    release();
    expect(await racing).toEqual(new Set(["m"]));
    expect(await tenancy.orgs.allowedModels(org.id)).toEqual(new Set());
  });
});

describe("verified keys while the store is down", () => {
  let dir: string;
  let store: Store;
  let tenancy: Tenancy;
  /** Another replica on the same store, whose changes never reach this one (a lost broadcast). */
  let elsewhere: Tenancy;
  let status: StoreStatus;
  let clock = Date.parse("2030-01-01T00:00:00Z");
  let storeUp = true;

  beforeAll(async () => {
    dir = await dataDirWithPglite();
    store = await openStore({ dataDir: dir });
    status = new StoreStatus(
      async () => {
        if (!storeUp) throw new Error("connection refused");
      },
      // The test's clock: the status is asked again only when the test moves it past cacheMs.
      { cacheMs: 60_000, timeoutMs: 1000, now: () => clock },
    );
    tenancy = createTenancy(store.db, {
      keySecret: KEY_SECRET,
      modelIds: ["m"],
      cacheTtlMs: 1000,
      staleIfErrorMs: 300_000,
      storeStatus: status,
      now: () => clock,
    });
    elsewhere = createTenancy(store.db, { keySecret: KEY_SECRET, modelIds: ["m"], now: () => clock });
    await tenancy.orgs.create("acme", ["m"]);
  });

  afterAll(async () => {
    await tenancy?.dispose().catch(() => {});
    await elsewhere?.dispose().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves keys verified within the stale window and refuses the others with StoreUnavailableError", async () => {
    const recent = await tenancy.keys.create("acme");
    const old = await tenancy.keys.create("acme");
    const never = await tenancy.keys.create("acme");
    const revoked = await tenancy.keys.create("acme");
    const revokedElsewhere = await tenancy.keys.create("acme");
    expect(await tenancy.keys.verify(old.key)).not.toBeNull();
    expect(await tenancy.keys.verify(revoked.key)).not.toBeNull();
    await tenancy.keys.revoke(revoked.id);
    clock += 200_000;
    const first = await tenancy.keys.verify(recent.key);
    expect(await tenancy.orgs.allowedModels(first?.orgId ?? "")).toEqual(new Set(["m"]));
    expect(await tenancy.keys.verify(revokedElsewhere.key)).not.toBeNull();
    await elsewhere.keys.revoke(revokedElsewhere.id);
    clock += 150_000; // old: 350 s since its verification; recent and revokedElsewhere: 150 s
    // Past the TTL the store is asked and says revoked: that answer wins over the entry kept for outages.
    expect(await tenancy.keys.verify(revokedElsewhere.key)).toBeNull();

    // The store goes away for real: its connection is closed under the services.
    storeUp = false;
    await store.close();
    // The first read finds the store gone (the lookup fails) and is served from the stale entry.
    const principal = await tenancy.keys.verify(recent.key);
    expect(principal?.orgName).toBe("acme");
    expect(status.available).toBe(false);
    // Known down from then on: the stale entries answer without asking the store, keys and grants alike.
    expect((await tenancy.keys.verify(recent.key))?.keyId).toBe(recent.id);
    expect(await tenancy.orgs.allowedModels(principal?.orgId ?? "")).toEqual(new Set(["m"]));
    await expect(tenancy.keys.verify(never.key)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(tenancy.keys.verify(old.key)).rejects.toBeInstanceOf(StoreUnavailableError);
    // A revoked key is never among the stale ones, whether revoked here or found revoked in the store.
    await expect(tenancy.keys.verify(revoked.key)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(tenancy.keys.verify(revokedElsewhere.key)).rejects.toBeInstanceOf(StoreUnavailableError);
    // A malformed key needs no store: still the plain "invalid key".
    expect(await tenancy.keys.verify("sk-nope")).toBeNull();

    // The store flaps: its ping answers again, but the next grant read fails. The stale grants still answer.
    storeUp = true;
    clock += 60_000;
    expect(await status.check()).toBe(true);
    expect(await tenancy.orgs.allowedModels(principal?.orgId ?? "")).toEqual(new Set(["m"]));
    expect(status.available).toBe(false);
  });
});

describe("the cache TTL per store", () => {
  let dir: string;
  let store: Store;
  let clock = Date.parse("2030-01-01T00:00:00Z");

  beforeAll(async () => {
    dir = await dataDirWithPglite();
    store = await openStore({ dataDir: dir });
  });

  afterAll(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Tenancy over `store` with the TTL the server gives `driver`, counting the store reads it makes. */
  function tenancyFor(driver: StoreDriver) {
    const reads = { count: 0 };
    const db = new Proxy(store.db, {
      get(t, p) {
        const value: unknown = Reflect.get(t, p, t);
        if (typeof value !== "function") return value;
        if (p === "select") reads.count++;
        return value.bind(t);
      },
    });
    const tenancy = createTenancy(db, {
      keySecret: KEY_SECRET,
      modelIds: ["m"],
      cacheTtlMs: cacheTtlMsFor(driver),
      now: () => clock,
    });
    return { tenancy, reads };
  }

  /** An org with a key, verified and its grants read once (both cached now). */
  async function cachedKey(tenancy: Tenancy, name: string) {
    const org = await tenancy.orgs.create(name, ["m"]);
    const created = await tenancy.keys.create(name);
    await tenancy.keys.verify(created.key);
    await tenancy.orgs.allowedModels(org.id);
    return { ...created, orgId: org.id };
  }

  it("reads a hot key and its grants again each second on PostgreSQL, where other replicas change them", async () => {
    const { tenancy, reads } = tenancyFor("postgres");
    const { orgId, key } = await cachedKey(tenancy, "shared");
    const before = reads.count;
    clock += 1_500;
    expect(await tenancy.keys.verify(key)).not.toBeNull();
    expect(await tenancy.orgs.allowedModels(orgId)).toEqual(new Set(["m"]));
    expect(reads.count - before).toBe(2);
    await tenancy.dispose();
  });

  it("reads them once on the embedded store, whose one writer drops what it changes at once", async () => {
    const { tenancy, reads } = tenancyFor("pglite");
    const { orgId, id, key } = await cachedKey(tenancy, "alone");
    const before = reads.count;
    clock += 60_000;
    expect(await tenancy.keys.verify(key)).not.toBeNull();
    expect(await tenancy.orgs.allowedModels(orgId)).toEqual(new Set(["m"]));
    expect(reads.count - before).toBe(0);
    // Changes made here still show at once: a revoked grant and a revoked key.
    await tenancy.orgs.revokeModel("alone", "m");
    expect(await tenancy.orgs.allowedModels(orgId)).toEqual(new Set());
    await tenancy.keys.revoke(id);
    expect(await tenancy.keys.verify(key)).toBeNull();
    // The TTL still ends an entry: a new verification past it reads the store.
    const fresh = await tenancy.keys.create("alone");
    await tenancy.keys.verify(fresh.key);
    const cached = reads.count;
    clock += cacheTtlMsFor("pglite");
    expect(await tenancy.keys.verify(fresh.key)).not.toBeNull();
    expect(reads.count - cached).toBe(1);
    await tenancy.dispose();
  });
});
