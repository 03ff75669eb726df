// Who is signed in: the session cookie, the middleware that resolves it (and checks the CSRF token of every POST
// and the active org against the user's memberships), and what it hands to pages as `c.var.auth`.
//
// Reuse: routes registered after `app.use("*", requireSession(deps))` (app.tsx) can rely on `c.var.auth`:
// the user is signed in, the session is within its idle and absolute limits, the active org is one of theirs
// (`auth.org`, with their role), and a POST carried the right `_csrf`. Owner-only actions check
// `requireOwner(c)`.

import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { ModelCatalogue } from "../../catalogue/catalogue.js";
import type { ModelHealth, ModelInfo } from "../../engine/types.js";
import type { RateLimiter } from "../../limits/types.js";
import type { Logger } from "../../observability/logger.js";
import type { SessionPolicy } from "../../tenancy/sessions.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import type { Membership } from "../../tenancy/types.js";
import type { UsageQueries } from "../../usage/queries.js";
import { CSRF_FIELD, type CsrfTokens } from "./csrf.js";
import type { DashboardAuth, DashboardEnv } from "./env.js";
import { errorPage } from "./layout.js";
import type { PasswordChecks } from "./password-checks.js";
import type { SignInThrottle } from "./sign-in-throttle.js";

export type { DashboardAuth, DashboardEnv };

export const SESSION_COOKIE = "hearth_session";

/** Everything the dashboard's routes need, resolved once by createDashboardApp. */
export interface DashboardDeps {
  tenancy: Tenancy;
  csrf: CsrfTokens;
  sessionPolicy: SessionPolicy;
  base: string;
  /** true, false, or "auto": Secure when the request came over https (directly or per X-Forwarded-Proto). */
  secureCookies: boolean | "auto";
  throttle: SignInThrottle;
  /** Any env: the operator pages (own Variables) share it. */
  clientAddress: (c: Context) => string;
  /** Usage summaries (Usage page); absent: the page says usage is not recorded. */
  usage?: Pick<UsageQueries, "summary"> | undefined;
  /** Current rate-limit windows (Limits page); absent: consumption is shown as unknown. */
  limiter?: Pick<RateLimiter, "snapshot"> | undefined;
  /** The configured models (Models page, operator view). */
  models?: (() => readonly ModelInfo[]) | undefined;
  /** Each model's health and its upstream endpoints' (the operator view's fleet section). */
  health?: (() => readonly ModelHealth[]) | undefined;
  /** The embedded models, loaded and unloaded from the operator view's models page. */
  catalogue?: ModelCatalogue | undefined;
  /** Opens the operator view (operator/); absent: the view is off. */
  adminToken?: string | undefined;
  /** Failed operator sign-ins (wrong admin tokens); the admin API shares it (one budget per address). */
  operatorThrottle: SignInThrottle;
  /** Password checks (scrypt) at once: sign-ins beyond it get 429 (and any page that checks a password should). */
  passwordChecks: PasswordChecks;
  /** Failed sign-ins are logged with the client's address (never what was typed). */
  logger?: Logger | undefined;
}

export function isSecureRequest(c: Context, setting: boolean | "auto"): boolean {
  if (setting !== "auto") return setting;
  const forwarded = c.req.header("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase();
  return forwarded === "https" || new URL(c.req.url).protocol === "https:";
}

export function setSessionCookie(c: Context<DashboardEnv>, deps: DashboardDeps, token: string): void {
  setCookie(c, SESSION_COOKIE, token, {
    path: deps.base,
    httpOnly: true,
    sameSite: "Lax",
    secure: isSecureRequest(c, deps.secureCookies),
    maxAge: Math.floor(deps.sessionPolicy.lifetimeMs / 1000),
  });
}

export function clearSessionCookie(c: Context<DashboardEnv>, deps: DashboardDeps): void {
  deleteCookie(c, SESSION_COOKIE, { path: deps.base, secure: isSecureRequest(c, deps.secureCookies) });
}

/** A same-dashboard path to return to after sign-in; anything else (other sites, `//host`) is dropped. */
export function safeNext(base: string, next: string | undefined): string | undefined {
  if (next === undefined || !next.startsWith(`${base}/`) || next.startsWith("//") || next.includes("\\")) {
    return undefined;
  }
  return next;
}

export function requireSession(deps: DashboardDeps): MiddlewareHandler<DashboardEnv> {
  return async function requireSession(c, next) {
    const token = getCookie(c, SESSION_COOKIE);
    const lookup =
      token === undefined
        ? ({ status: "unknown" } as const)
        : await deps.tenancy.sessions.resolve(token, deps.sessionPolicy);
    if (lookup.status !== "active" || lookup.session.userId === null || lookup.session.email === null) {
      if (token !== undefined) clearSessionCookie(c, deps);
      const query = new URLSearchParams();
      if (c.req.method === "GET") query.set("next", c.req.path + new URL(c.req.url).search);
      if (lookup.status === "expired") query.set("expired", "1");
      return c.redirect(`${deps.base}/sign-in?${query}`, 303);
    }
    const { session } = lookup;
    const user = { id: lookup.session.userId, email: lookup.session.email };
    const memberships = await deps.tenancy.members.membershipsOf(user.id);
    const csrfToken = deps.csrf.forSession(session.id);
    const first = memberships[0];
    // Enough to render the frame (nav, sign-out) on the refusals below.
    const partial = (org: Membership): DashboardAuth => ({
      sessionId: session.id,
      user,
      memberships,
      org,
      csrfToken,
      base: deps.base,
    });

    let requested: string | undefined;
    if (c.req.method === "POST") {
      const form = await c.req.parseBody();
      if (!deps.csrf.matches(csrfToken, form[CSRF_FIELD])) {
        return errorPage(
          c,
          403,
          "Request refused",
          "This form could not be verified: its security token is missing or wrong. Nothing was changed. " +
            "Go back, reload the page and try again.",
          first === undefined ? undefined : partial(first),
        );
      }
      requested = typeof form.org === "string" && form.org !== "" ? form.org : undefined;
    } else {
      requested = c.req.query("org") || undefined;
    }
    if (first === undefined) {
      // Unusual: removing a user's last membership deletes the user and so the session. Nothing to show.
      return errorPage(c, 403, "No organization", "Your account is not a member of any organization.");
    }
    const org = requested === undefined ? first : memberships.find((m) => m.orgName === requested);
    if (org === undefined) {
      return errorPage(
        c,
        403,
        "Not a member",
        `You are not a member of the organization "${requested}". Nothing was shown or changed.`,
        partial(first),
      );
    }
    c.set("auth", partial(org));
    await next();
  };
}

/** For owner-only actions: a 403 page in words, or null when the signed-in user owns the active org. */
export function requireOwner(c: Context<DashboardEnv>, action: string): Promise<Response> | null {
  const auth = c.get("auth");
  if (auth.org.role === "owner") return null;
  return errorPage(
    c,
    403,
    "Owners only",
    `Only owners of "${auth.org.orgName}" can ${action}. Ask an owner to do it or to make you an owner.`,
    auth,
  );
}
