// The admin API (/admin/v1) used by the CLI and the dashboard: orgs, limits, grants, keys, users, usage and the
// audit trail, behind the admin token. Every change is made as the actor "admin".
import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono";
import type { z } from "zod";
import { adminTokenMatches } from "../../auth/admin-token.js";
import type { ModelCatalogue } from "../../catalogue/catalogue.js";
import type { Logger } from "../../observability/logger.js";
import { ADMIN_ACTOR } from "../../tenancy/audit.js";
import { OrgNotFoundError } from "../../tenancy/errors.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import type { Org } from "../../tenancy/types.js";
import type { UsageQueries } from "../../usage/queries.js";
import { type ClientAddress, createClientAddress } from "../client-address.js";
import type { AppEnv } from "../env.js";
import { AdminAuthError, AuthThrottledError } from "../errors/api-error.js";
import { type DomainErrorHints, domainApiError } from "../errors/domain-errors.js";
import { bearerCredential } from "../middleware/require-api-key.js";
import { parseJsonBody, validate } from "../validation.js";
import { addModelRoutes } from "./models.js";
import {
  auditQuerySchema,
  auditWire,
  createdKeyWire,
  createdUserWire,
  createKeyBodySchema,
  createOrgBodySchema,
  createUserBodySchema,
  grantBodySchema,
  keyWire,
  listWire,
  orgWire,
  setLimitsBodySchema,
  usageQuerySchema,
  usageWire,
  userWire,
} from "./wire.js";

/** Counts wrong admin tokens per address (the dashboard's operator throttle: one budget for both doors). */
export interface AdminTokenThrottle {
  /** Takes an attempt before the token is compared; 0: go on, else milliseconds until one may be made. */
  take(attempt: { email: string; address: string }): Promise<number>;
  /** The token was right: the attempt is given back. */
  succeeded(attempt: { email: string; address: string }): Promise<void>;
}

export interface AdminAppOptions {
  /** Serves /models (add, load, unload, remove, list); without it those routes do not exist. */
  catalogue?: ModelCatalogue | undefined;
  /** Serves GET /orgs/:name/usage; without it that route does not exist. */
  usage?: UsageQueries;
  /** Wrong admin tokens per address; beyond the budget every token is refused with 429. Default: none. */
  throttle?: AdminTokenThrottle;
  /** The client's address for the throttle and the log (services.clientAddress). */
  clientAddress?: ClientAddress;
  logger?: Logger;
}

/** The throttle's "account": there is one admin token (the same name as the operator sign-in's). */
const ADMIN_TOKEN_ACCOUNT = "operator";

/**
 * Only the admin token opens these routes; an API key, however valid, is just a wrong token here. A presented
 * token is counted against the address's budget before it is compared, so a burst of guesses cannot all be
 * compared; a request without any token guesses nothing and is not counted.
 */
export function requireAdminToken(
  adminToken: string,
  options: Pick<AdminAppOptions, "throttle" | "clientAddress" | "logger"> = {},
): MiddlewareHandler<AppEnv> {
  const clientAddress = options.clientAddress ?? createClientAddress([]);
  return async function requireAdminToken(c, next) {
    const presented = bearerCredential(c.req.header("authorization"));
    if (presented === undefined) throw new AdminAuthError();
    const attempt = { email: ADMIN_TOKEN_ACCOUNT, address: clientAddress(c) };
    const waitMs = (await options.throttle?.take(attempt)) ?? 0;
    if (waitMs > 0) throw new AuthThrottledError("Too many wrong admin tokens from your address.", waitMs);
    if (!adminTokenMatches(adminToken, presented)) {
      options.logger?.warn({ requestId: c.get("requestId"), client: attempt.address }, "wrong admin token");
      throw new AdminAuthError();
    }
    await options.throttle?.succeeded(attempt);
    await next();
  };
}

export function createAdminApp(
  tenancy: Tenancy,
  adminToken: string,
  options: AdminAppOptions = {},
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", requireAdminToken(adminToken, options));

  app.get("/orgs", async (c) => {
    const orgs = await tenancy.orgs.list();
    return c.json(listWire(orgs.map(orgWire)));
  });

  app.post("/orgs", async (c) => {
    const body = await parseBody(c, createOrgBodySchema);
    const org = await domain(
      () =>
        tenancy.orgs.create(body.name, body.models ?? [], {
          rpm: body.rpm,
          tpm: body.tpm,
          actor: ADMIN_ACTOR,
        }),
      { param: "models" },
    );
    return c.json(orgWire(org), 201);
  });

  app.patch("/orgs/:name/limits", async (c) => {
    const body = await parseBody(c, setLimitsBodySchema);
    const org = await domain(() =>
      tenancy.orgs.setLimits(c.req.param("name"), { rpm: body.rpm, tpm: body.tpm }, ADMIN_ACTOR),
    );
    return c.json(orgWire(org));
  });

  app.get("/orgs/:name/users", async (c) => {
    const list = await domain(() => tenancy.users.list(c.req.param("name")));
    return c.json(listWire(list.map(userWire)));
  });

  app.post("/orgs/:name/users", async (c) => {
    const body = await parseBody(c, createUserBodySchema);
    const user = await domain(() =>
      tenancy.users.create({
        orgName: c.req.param("name"),
        email: body.email,
        password: body.password,
        role: body.role,
        actor: ADMIN_ACTOR,
      }),
    );
    return c.json(createdUserWire(user), 201);
  });

  const usage = options.usage;
  if (usage !== undefined) {
    app.get("/orgs/:name/usage", async (c) => {
      const query = parseQuery(c, usageQuerySchema);
      const org = await findOrg(tenancy, c.req.param("name"));
      // By id: usage records name the org by id, so a renamed org keeps its history.
      const summary = await usage.summary(org.id, query);
      return c.json(usageWire(org, query, summary));
    });
  }

  app.get("/audit", async (c) => {
    const query = parseQuery(c, auditQuerySchema);
    const entries = await domain(() =>
      tenancy.audit.list({ orgName: query.org, limit: query.limit, beforeId: query.before }),
    );
    return c.json(listWire(entries.map(auditWire)));
  });

  app.get("/orgs/:name", async (c) => {
    return c.json(orgWire(await findOrg(tenancy, c.req.param("name"))));
  });

  app.post("/orgs/:name/grants", async (c) => {
    const body = await parseBody(c, grantBodySchema);
    const org = await domain(() => tenancy.orgs.grantModel(c.req.param("name"), body.model, ADMIN_ACTOR));
    return c.json(orgWire(org));
  });

  // Model ids may contain "/" (e.g. "org/model"); the greedy pattern accepts them encoded or not.
  app.delete("/orgs/:name/grants/:model{.+}", async (c) => {
    const org = await domain(() =>
      tenancy.orgs.revokeModel(c.req.param("name"), c.req.param("model"), ADMIN_ACTOR),
    );
    return c.json(orgWire(org));
  });

  app.get("/orgs/:name/keys", async (c) => {
    const keys = await domain(() => tenancy.keys.list(c.req.param("name")));
    return c.json(listWire(keys.map(keyWire)));
  });

  app.post("/orgs/:name/keys", async (c) => {
    const body = await parseBody(c, createKeyBodySchema);
    const expiresAt =
      body.expires_in === undefined ? undefined : new Date(Date.now() + body.expires_in * 1000);
    const created = await domain(() =>
      tenancy.keys.create(c.req.param("name"), { name: body.name, expiresAt, actor: ADMIN_ACTOR }),
    );
    return c.json(createdKeyWire(created), 201);
  });

  app.delete("/keys/:id", async (c) => {
    const key = await domain(() => tenancy.keys.revoke(c.req.param("id"), ADMIN_ACTOR));
    return c.json(keyWire(key));
  });

  if (options.catalogue !== undefined) addModelRoutes(app, options.catalogue);

  return app;
}

async function findOrg(tenancy: Tenancy, name: string): Promise<Org> {
  const org = await tenancy.orgs.getByName(name);
  if (org === null) throw new OrgNotFoundError(name);
  return org;
}

/** Parses a JSON body (an empty body counts as `{}`) with `schema`; 400 with the offending `param` otherwise. */
async function parseBody<S extends z.ZodType>(c: Context<AppEnv>, schema: S): Promise<z.output<S>> {
  return validate(parseJsonBody(await c.req.text(), { emptyBody: {} }), schema);
}

/** Parses the query string with `schema`; 400 with the offending `param` otherwise. */
function parseQuery<S extends z.ZodType>(c: Context<AppEnv>, schema: S): z.output<S> {
  return validate(c.req.query(), schema);
}

/**
 * Runs a tenancy call and turns its expected failures into HTTP errors here, where the route knows which request
 * field carried a model id ("models" for a new org; the map's default "model" for a grant).
 */
async function domain<T>(call: () => Promise<T>, hints: DomainErrorHints = {}): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw domainApiError(err, hints) ?? err;
  }
}
