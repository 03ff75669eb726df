// The operator's sign-in with the admin token (compared in constant time, throttled per address, CSRF-protected
// with a nonce cookie like the members' sign-in) and sign-out.
import { randomBytes } from "node:crypto";
import type { Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { adminTokenMatches } from "../../../auth/admin-token.js";
import { CSRF_FIELD } from "../csrf.js";
import { MessageNotice, type PageMessage } from "../layout.js";
import type { DashboardDeps } from "../session.js";
import { isSecureRequest } from "../session.js";
import { operatorPage } from "./frame.js";
import {
  clearOperatorCookie,
  OPERATOR_ACCOUNT,
  OPERATOR_COOKIE,
  type OperatorEnv,
  operatorPath,
  operatorPolicy,
  setOperatorCookie,
} from "./operator-session.js";

const NONCE_COOKIE = "hearth_operator_sign_in";
const NONCE_PATTERN = /^[A-Za-z0-9_-]{22}$/;

/** GET and POST /sign-in: public. `adminToken` is the server's. */
export function registerOperatorSignIn(
  app: Hono<OperatorEnv>,
  deps: DashboardDeps,
  adminToken: string,
): void {
  app.get("/sign-in", async (c) => {
    const token = getCookie(c, OPERATOR_COOKIE);
    if (token !== undefined) {
      const lookup = await deps.tenancy.sessions.resolve(token, operatorPolicy(deps));
      if (lookup.status === "active" && lookup.session.operator) return c.redirect(operatorPath(deps), 303);
    }
    const message: PageMessage | undefined =
      c.req.query("expired") === "1"
        ? { kind: "info", text: "Your operator session has expired. Please sign in again." }
        : c.req.query("signed_out") === "1"
          ? { kind: "success", text: "You have signed out of the operator view." }
          : undefined;
    return signInPage(c, deps, 200, message);
  });

  app.post("/sign-in", async (c) => {
    const form = await c.req.parseBody();
    const presented = typeof form.token === "string" ? form.token.trim() : "";
    const nonce = getCookie(c, NONCE_COOKIE);
    if (nonce === undefined || !deps.csrf.matches(signInToken(deps, nonce), form[CSRF_FIELD])) {
      return signInPage(c, deps, 403, {
        kind: "error",
        text: "This sign-in form has expired or did not come from this dashboard. Please try again.",
      });
    }
    if (presented === "") {
      return signInPage(c, deps, 400, { kind: "error", text: "Enter the admin token." });
    }
    const attempt = { email: OPERATOR_ACCOUNT, address: deps.clientAddress(c) };
    // Counted before the token is compared, so a burst of guesses cannot all pass the throttle.
    const waitMs = await deps.operatorThrottle.take(attempt);
    if (waitMs > 0) {
      const minutes = Math.max(1, Math.ceil(waitMs / 60_000));
      c.header("retry-after", String(Math.ceil(waitMs / 1000)));
      return signInPage(c, deps, 429, {
        kind: "error",
        text: `Too many wrong admin tokens from your address. Operator sign-in is paused: try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`,
      });
    }
    if (!adminTokenMatches(adminToken, presented)) {
      deps.logger?.warn({ requestId: c.get("requestId"), client: attempt.address }, "wrong admin token");
      return signInPage(c, deps, 401, {
        kind: "error",
        text: "That is not this server's admin token. Nothing was signed in.",
      });
    }
    await deps.operatorThrottle.succeeded(attempt);
    await deps.tenancy.sessions.deleteExpired();
    const { token } = await deps.tenancy.sessions.create({ operator: true }, operatorPolicy(deps));
    setOperatorCookie(c, deps, token);
    deleteCookie(c, NONCE_COOKIE, { path: operatorPath(deps) });
    return c.redirect(operatorPath(deps), 303);
  });
}

/** POST /sign-out: behind requireOperator (CSRF-checked like every change). */
export function registerOperatorSignOut(app: Hono<OperatorEnv>, deps: DashboardDeps): void {
  app.post("/sign-out", async (c) => {
    const token = getCookie(c, OPERATOR_COOKIE);
    if (token !== undefined) await deps.tenancy.sessions.end(token);
    clearOperatorCookie(c, deps);
    return c.redirect(operatorPath(deps, "/sign-in?signed_out=1"), 303);
  });
}

// Bound to the nonce and to the operator form: a members' sign-in token is worthless here.
function signInToken(deps: DashboardDeps, nonce: string): string {
  return deps.csrf.forSignIn(`operator:${nonce}`);
}

function signInPage(
  c: Context<OperatorEnv>,
  deps: DashboardDeps,
  status: ContentfulStatusCode,
  message: PageMessage | undefined,
): Promise<Response> {
  let nonce = getCookie(c, NONCE_COOKIE);
  if (nonce === undefined || !NONCE_PATTERN.test(nonce)) {
    nonce = randomBytes(16).toString("base64url");
    setCookie(c, NONCE_COOKIE, nonce, {
      path: operatorPath(deps),
      httpOnly: true,
      sameSite: "Strict",
      secure: isSecureRequest(c, deps.secureCookies),
    });
  }
  return operatorPage(
    c,
    { title: "Operator sign-in", status },
    <section class="card narrow">
      <h1>Operator sign-in</h1>
      <MessageNotice message={message} />
      <form method="post" action={operatorPath(deps, "/sign-in")}>
        <input type="hidden" name={CSRF_FIELD} value={signInToken(deps, nonce)} />
        <div class="field">
          <label for="admin-token">Admin token</label>
          <input
            id="admin-token"
            name="token"
            type="password"
            autocomplete="off"
            required
            autofocus
            aria-describedby="admin-token-hint"
          />
          <p class="hint" id="admin-token-hint">
            The server's admin token: <code>HEARTH_ADMIN_TOKEN</code>, or the file <code>admin-token</code> in
            its data directory.
          </p>
        </div>
        <button type="submit">Sign in</button>
      </form>
      <p>
        <a href={`${deps.base}/sign-in`}>Member sign-in</a>
      </p>
    </section>,
  );
}
