// The dashboard web app (server-rendered Hono JSX): sign-in, invitations, keys, usage, models, limits, members,
// account, and the operator view (operator/); mounted by src/http/app.ts at /dashboard (createDashboardApp).
//
// Adding a page: write pages/<name>.tsx exporting register<Name>(app, deps) (see pages/keys.tsx) and register it
// below: after requireSession for a member's page (it gets `c.var.auth` and CSRF-checked POSTs for free), before
// it for a public one. layout.tsx has the frame, forms, notices and dialogs.
import type { Context } from "hono";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { secureHeaders } from "hono/secure-headers";
import type { Redis } from "ioredis";
import type { Logger } from "../../observability/logger.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import { type ClientAddress, createClientAddress } from "../client-address.js";
import { DASHBOARD_CSS, DASHBOARD_JS } from "./assets.js";
import { CsrfTokens } from "./csrf.js";
import { errorPage } from "./layout.js";
import { registerOperator } from "./operator/index.js";
import { createOperatorThrottle, OPERATOR_THROTTLE_RULES } from "./operator/operator-session.js";
import { registerAccount } from "./pages/account.js";
import { registerInvitations } from "./pages/invitations.js";
import { registerJoin } from "./pages/join.js";
import { registerKeys } from "./pages/keys.js";
import { registerLimits } from "./pages/limits.js";
import { registerMembers } from "./pages/members.js";
import { registerModels } from "./pages/models.js";
import { registerSignIn, registerSignOut } from "./pages/sign-in.js";
import { registerUsage } from "./pages/usage.js";
import { PasswordChecks } from "./password-checks.js";
import { type DashboardDeps, type DashboardEnv, requireSession } from "./session.js";
import { createSignInThrottle, DEFAULT_THROTTLE_RULES, type SignInThrottle } from "./sign-in-throttle.js";

export const DEFAULT_SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
export const DEFAULT_SESSION_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;
const MAX_FORM_BYTES = 64 * 1024;

export interface DashboardOptions {
  tenancy: Tenancy;
  logger?: Logger | undefined;
  /** Where the app is mounted (default "/dashboard"): links and the cookie path use it. */
  base?: string | undefined;
  /** Key of the CSRF HMAC; default: derived from the server key secret (the same on every replica). */
  csrfSecret?: Uint8Array | undefined;
  /** A session ends after this long without a request (default 12 h)… */
  sessionIdleMs?: number | undefined;
  /** …and this long after sign-in in any case (default 7 days). */
  sessionLifetimeMs?: number | undefined;
  /** Secure cookies: always, never, or "auto" (default): when the request came over https. */
  secureCookies?: boolean | "auto" | undefined;
  /** Failed sign-in counting (default: DEFAULT_THROTTLE_RULES, in `redis` when given, else in memory). */
  throttle?: SignInThrottle | undefined;
  /** Redis shared by the replicas (HEARTH_REDIS_URL): sign-in throttles count there, so across replicas. */
  redis?: Redis | undefined;
  /** The client's address for throttles and logs (default: the socket's peer; services.clientAddress knows proxies). */
  clientAddress?: ClientAddress | undefined;
  /** Password checks (scrypt) at once; more sign-ins at the same moment get 429 (default 2, server.signInConcurrency). */
  signInConcurrency?: number | undefined;
  /** Usage summaries for the Usage page (services.usageQueries). */
  usage?: DashboardDeps["usage"];
  /** Rate-limit windows for the Limits page (services.limiter). */
  limiter?: DashboardDeps["limiter"];
  /** The configured models for the Models page and the operator view (services.engine.listModels). */
  models?: DashboardDeps["models"];
  /** Each model's health for the operator view (services.engine.health). */
  health?: DashboardDeps["health"];
  /** The operator view's models page (load, unload); absent: that page says models cannot change at run time. */
  catalogue?: DashboardDeps["catalogue"];
  /** The admin token: opens the operator view at <base>/operator; absent, the view is off. */
  adminToken?: string | undefined;
  /** Wrong admin tokens at the operator sign-in (default: OPERATOR_THROTTLE_RULES, like `throttle`). */
  operatorThrottle?: SignInThrottle | undefined;
}

// Pages load nothing but the dashboard's own stylesheet and script, and cannot be framed (clickjacking).
// Strict-Transport-Security stays off: Hearth serves plain HTTP itself, and whether a host (and with
// includeSubDomains its whole domain) is HTTPS-only is for the deployment's TLS proxy to say.
const SECURITY_HEADERS = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'none'"],
    styleSrc: ["'self'"],
    scriptSrc: ["'self'"],
    imgSrc: ["'self'"],
    // The operator's models page fetches itself again while a model loads (assets.ts).
    connectSrc: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
    baseUri: ["'none'"],
  },
  xFrameOptions: "DENY",
  referrerPolicy: "no-referrer",
  xContentTypeOptions: "nosniff",
  strictTransportSecurity: false,
});

export function createDashboardApp(options: DashboardOptions): Hono<DashboardEnv> {
  const base = options.base ?? "/dashboard";
  const deps: DashboardDeps = {
    tenancy: options.tenancy,
    csrf: new CsrfTokens(options.csrfSecret ?? options.tenancy.keys.deriveSecret("dashboard-csrf")),
    sessionPolicy: {
      idleMs: options.sessionIdleMs ?? DEFAULT_SESSION_IDLE_MS,
      lifetimeMs: options.sessionLifetimeMs ?? DEFAULT_SESSION_LIFETIME_MS,
    },
    base,
    secureCookies: options.secureCookies ?? "auto",
    throttle: options.throttle ?? createSignInThrottle(DEFAULT_THROTTLE_RULES, options.redis),
    clientAddress: options.clientAddress ?? createClientAddress([]),
    usage: options.usage,
    limiter: options.limiter,
    models: options.models,
    health: options.health,
    catalogue: options.catalogue,
    adminToken: options.adminToken,
    operatorThrottle:
      options.operatorThrottle ?? createOperatorThrottle(OPERATOR_THROTTLE_RULES, options.redis),
    passwordChecks: new PasswordChecks(options.signInConcurrency),
    logger: options.logger,
  };
  const app = new Hono<DashboardEnv>();

  app.use("*", async (c, next) => {
    c.set("base", base);
    await next();
    // secureHeaders has no Cache-Control; pages (per-user, with CSRF tokens) are never cached, assets say so.
    if (!c.res.headers.has("cache-control")) c.header("cache-control", "no-store");
  });
  app.use("*", SECURITY_HEADERS);
  app.use(
    "*",
    bodyLimit({
      maxSize: MAX_FORM_BYTES,
      onError: (c) =>
        errorPage(c, 413, "Form too large", "The form sent more data than the dashboard accepts."),
    }),
  );

  app.get("/assets/dashboard.css", (c) => asset(c, DASHBOARD_CSS, "text/css; charset=utf-8"));
  app.get("/assets/dashboard.js", (c) => asset(c, DASHBOARD_JS, "text/javascript; charset=utf-8"));
  app.get("/", (c) => c.redirect(`${base}/keys`, 303));
  registerSignIn(app, deps);
  // Invitation links are public: their holder may have no account yet.
  registerJoin(app, deps);
  // The operator view has its own session (admin token) and checks; members' sessions do not open it.
  registerOperator(app, deps);

  // Everything below needs a signed-in user; POSTs also a valid CSRF token.
  app.use("*", requireSession(deps));
  registerSignOut(app, deps);
  registerKeys(app, deps);
  registerUsage(app, deps);
  registerModels(app, deps);
  registerLimits(app, deps);
  registerMembers(app, deps);
  registerInvitations(app, deps);
  registerAccount(app, deps);
  app.all("*", (c) =>
    errorPage(c, 404, "Page not found", `There is no dashboard page at ${c.req.path}.`, c.get("auth")),
  );

  app.onError((err, c) => {
    const requestId = c.get("requestId");
    options.logger?.error({ err, requestId }, "dashboard error");
    const reference = requestId === undefined ? "" : ` Reference: ${requestId}.`;
    return errorPage(
      c,
      500,
      "Something went wrong",
      `The dashboard could not complete this request; nothing more is known here.${reference}`,
    );
  });
  return app;
}

function asset(c: Context<DashboardEnv>, body: string, type: string): Response {
  c.header("content-type", type);
  c.header("cache-control", "public, max-age=3600");
  return c.body(body);
}
