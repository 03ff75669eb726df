// First start: on an empty store, org `default` with the configured models, one API key and, when asked, its first
// owner, all in one transaction, with the secrets returned once.
import type { StoreDb } from "../store/open-store.js";
import { organizations } from "../store/schema.js";
import { SYSTEM_ACTOR } from "./audit.js";
import { DuplicateOrgError } from "./errors.js";
import type { KeyService } from "./keys.js";
import { choosePassword, normaliseEmail } from "./members.js";
import type { OrgService } from "./orgs.js";
import { hashPassword, type ScryptParams } from "./password.js";
import type { BootstrapOptions, BootstrapResult } from "./types.js";
import type { UserService } from "./users.js";

export const DEFAULT_ORG_NAME = "default";
/** The first owner created by `bootstrap` when asked (".localhost" is a reserved name: it is nobody's mailbox). */
export const DEFAULT_OWNER_EMAIL = "owner@hearth.localhost";

export interface BootstrapDeps {
  db: StoreDb;
  orgs: Pick<OrgService, "insert">;
  keys: Pick<KeyService, "insert">;
  users: Pick<UserService, "insert">;
  passwordParams?: ScryptParams | undefined;
  now?: () => number;
}

/**
 * On an empty store, creates org `default` granted `modelIds` and one key (and, with `ownerEmail`, its first
 * owner with a random password), in one transaction, and returns the secrets once. Null when any org exists
 * (also when another replica won the race).
 */
export async function bootstrap(
  deps: BootstrapDeps,
  modelIds: readonly string[],
  options: BootstrapOptions = {},
): Promise<BootstrapResult | null> {
  const { db } = deps;
  const existing = await db.select({ id: organizations.id }).from(organizations).limit(1);
  if (existing.length > 0) return null;
  const ownerEmail = options.ownerEmail === undefined ? undefined : normaliseEmail(options.ownerEmail);
  const ownerPassword = ownerEmail === undefined ? undefined : choosePassword(undefined).password;
  const ownerHash =
    ownerPassword === undefined ? undefined : await hashPassword(ownerPassword, deps.passwordParams);
  try {
    const created = await db.transaction(async (tx) => {
      const org = await deps.orgs.insert(tx, DEFAULT_ORG_NAME, modelIds, {}, SYSTEM_ACTOR);
      // An expiry, because the first key is printed to the console (and written to the data dir): it is for
      // getting started, and the owner makes lasting keys in the dashboard.
      const expiresAt =
        options.keyLifetimeMs === undefined
          ? undefined
          : new Date((deps.now ?? Date.now)() + options.keyLifetimeMs);
      const key = await deps.keys.insert(tx, org, { name: "bootstrap", expiresAt }, SYSTEM_ACTOR);
      if (ownerEmail !== undefined && ownerHash !== undefined) {
        await deps.users.insert(tx, org, ownerEmail, ownerHash, "owner", SYSTEM_ACTOR);
      }
      return key;
    });
    const owner =
      ownerEmail === undefined || ownerPassword === undefined
        ? null
        : { email: ownerEmail, password: ownerPassword };
    return {
      orgName: created.orgName,
      keyId: created.id,
      key: created.key,
      keyExpiresAt: created.expiresAt,
      owner,
    };
  } catch (err) {
    if (err instanceof DuplicateOrgError) return null;
    throw err;
  }
}
