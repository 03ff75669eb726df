// The operator's session: a `sessions` row with operator = true and no user, named by its own cookie (path
// <base>/operator, SameSite=Strict), so it never mixes with an org member's session in the same browser.
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { Redis } from "ioredis";
import type { SessionPolicy } from "../../../tenancy/sessions.js";
import { CSRF_FIELD } from "../csrf.js";
import { type DashboardDeps, type DashboardEnv, isSecureRequest } from "../session.js";
import { createSignInThrottle, type ThrottleRule } from "../sign-in-throttle.js";
import { operatorErrorPage } from "./frame.js";

export const OPERATOR_COOKIE = "hearth_operator";

/** The operator holds the keys to every org: shorter sessions than members' (30 min idle, 8 h at most). */
export const OPERATOR_SESSION_POLICY: SessionPolicy = Object.freeze({
  idleMs: 30 * 60 * 1000,
  lifetimeMs: 8 * 60 * 60 * 1000,
});

/**
 * Wrong admin tokens per client address: 5 per 15 minutes, at the operator sign-in and the admin API alike (one
 * budget: both doors guess the same secret). Per address only: a budget shared by everyone would let anyone lock
 * the operator out, and the token (256 random bits, or a HEARTH_ADMIN_TOKEN of at least 32 characters) is not
 * guessable at any rate.
 */
export const OPERATOR_THROTTLE_RULES: readonly ThrottleRule[] = Object.freeze([
  { per: "address", failures: 5, windowSeconds: 900 },
]);

/** The throttle's "account": there is one operator. */
export const OPERATOR_ACCOUNT = "operator";

export function createOperatorThrottle(
  rules: readonly ThrottleRule[] = OPERATOR_THROTTLE_RULES,
  redis?: Redis,
) {
  return createSignInThrottle(rules, redis, "admin-token");
}

export interface OperatorAuth {
  sessionId: string;
  /** The `_csrf` value of this session's forms. */
  csrfToken: string;
  /** Where the dashboard is mounted, e.g. "/dashboard". */
  base: string;
}

/** Optional so that an operator Context is a dashboard Context (layout.tsx renders both); see operatorAuth. */
export interface OperatorEnv {
  Variables: DashboardEnv["Variables"] & { operator?: OperatorAuth };
}

/** The operator session of a request that passed requireOperator. */
export function operatorAuth(c: Context<OperatorEnv>): OperatorAuth {
  const auth = c.get("operator");
  if (auth === undefined) throw new Error("operator route registered before requireOperator");
  return auth;
}

/** The shorter of the dashboard's policy and the operator's own. */
export function operatorPolicy(deps: DashboardDeps): SessionPolicy {
  return {
    idleMs: Math.min(deps.sessionPolicy.idleMs, OPERATOR_SESSION_POLICY.idleMs),
    lifetimeMs: Math.min(deps.sessionPolicy.lifetimeMs, OPERATOR_SESSION_POLICY.lifetimeMs),
  };
}

export function operatorPath(deps: Pick<DashboardDeps, "base">, path = ""): string {
  return `${deps.base}/operator${path}`;
}

export function setOperatorCookie(c: Context, deps: DashboardDeps, token: string): void {
  setCookie(c, OPERATOR_COOKIE, token, {
    path: operatorPath(deps),
    httpOnly: true,
    sameSite: "Strict",
    secure: isSecureRequest(c, deps.secureCookies),
    maxAge: Math.floor(operatorPolicy(deps).lifetimeMs / 1000),
  });
}

export function clearOperatorCookie(c: Context, deps: DashboardDeps): void {
  deleteCookie(c, OPERATOR_COOKIE, {
    path: operatorPath(deps),
    secure: isSecureRequest(c, deps.secureCookies),
  });
}

/**
 * Resolves the operator cookie to an operator session (a member's session token is not one) and checks the CSRF
 * token of every POST; otherwise back to the operator sign-in, saying why when the session ran out.
 */
export function requireOperator(deps: DashboardDeps): MiddlewareHandler<OperatorEnv> {
  return async function requireOperator(c, next) {
    const token = getCookie(c, OPERATOR_COOKIE);
    const lookup =
      token === undefined
        ? ({ status: "unknown" } as const)
        : await deps.tenancy.sessions.resolve(token, operatorPolicy(deps));
    if (lookup.status !== "active" || !lookup.session.operator || lookup.session.userId !== null) {
      if (token !== undefined) clearOperatorCookie(c, deps);
      const query = lookup.status === "expired" ? "?expired=1" : "";
      return c.redirect(`${operatorPath(deps, "/sign-in")}${query}`, 303);
    }
    const auth: OperatorAuth = {
      sessionId: lookup.session.id,
      csrfToken: deps.csrf.forSession(lookup.session.id),
      base: deps.base,
    };
    if (c.req.method === "POST") {
      const form = await c.req.parseBody();
      if (!deps.csrf.matches(auth.csrfToken, form[CSRF_FIELD])) {
        return operatorErrorPage(
          c,
          403,
          "Request refused",
          "This form could not be verified: its security token is missing or wrong. Nothing was changed. " +
            "Go back, reload the page and try again.",
        );
      }
    }
    c.set("operator", auth);
    await next();
  };
}
