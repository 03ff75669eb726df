// Sign-in (email + password, throttled, CSRF-protected with a nonce cookie) and sign-out.
import { randomBytes } from "node:crypto";
import type { Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { CSRF_FIELD } from "../csrf.js";
import { MessageNotice, type PageMessage, renderPage, TextField } from "../layout.js";
import { BUSY_RETRY_AFTER_SECONDS } from "../password-checks.js";
import {
  clearSessionCookie,
  type DashboardDeps,
  type DashboardEnv,
  isSecureRequest,
  SESSION_COOKIE,
  safeNext,
  setSessionCookie,
} from "../session.js";

const NONCE_COOKIE = "hearth_sign_in";
const NONCE_PATTERN = /^[A-Za-z0-9_-]{22}$/;

interface SignInForm {
  email?: string;
  next?: string | undefined;
  message?: PageMessage | undefined;
}

/** GET and POST /sign-in: public. */
export function registerSignIn(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/sign-in", (c) => {
    const expired = c.req.query("expired") === "1";
    const signedOut = c.req.query("signed_out") === "1";
    const message = expired
      ? { kind: "info" as const, text: "Your session has expired. Please sign in again." }
      : signedOut
        ? { kind: "success" as const, text: "You have signed out." }
        : undefined;
    return signInPage(c, deps, 200, { next: safeNext(deps.base, c.req.query("next")), message });
  });

  app.post("/sign-in", async (c) => {
    const form = await c.req.parseBody();
    const email = typeof form.email === "string" ? form.email.trim().toLowerCase() : "";
    const password = typeof form.password === "string" ? form.password : "";
    const next = safeNext(deps.base, typeof form.next === "string" ? form.next : undefined);
    const nonce = getCookie(c, NONCE_COOKIE);
    if (nonce === undefined || !deps.csrf.matches(deps.csrf.forSignIn(nonce), form[CSRF_FIELD])) {
      return signInPage(c, deps, 403, {
        email,
        next,
        message: {
          kind: "error",
          text: "This sign-in form has expired or did not come from this dashboard. Please try again.",
        },
      });
    }
    if (email === "" || password === "") {
      return signInPage(c, deps, 400, {
        email,
        next,
        message: { kind: "error", text: "Enter your email and your password." },
      });
    }
    const attempt = { email, address: deps.clientAddress(c) };
    // The attempt is counted before the password is checked, so a burst of guesses cannot all pass the throttle.
    const waitMs = await deps.throttle.take(attempt);
    if (waitMs > 0) {
      const minutes = Math.max(1, Math.ceil(waitMs / 60_000));
      c.header("retry-after", String(Math.ceil(waitMs / 1000)));
      return signInPage(c, deps, 429, {
        email,
        next,
        message: {
          kind: "error",
          text: `Too many failed sign-in attempts. Signing in to this account is paused: try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`,
        },
      });
    }
    const leave = deps.passwordChecks.tryEnter();
    if (leave === null) {
      await deps.throttle.giveBack(attempt);
      c.header("retry-after", String(BUSY_RETRY_AFTER_SECONDS));
      return signInPage(c, deps, 429, {
        email,
        next,
        message: {
          kind: "error",
          text: "The server is checking many sign-ins right now. Nothing was checked: please try again in a moment.",
        },
      });
    }
    let user: Awaited<ReturnType<typeof deps.tenancy.members.authenticate>>;
    try {
      user = await deps.tenancy.members.authenticate(email, password);
    } finally {
      leave();
    }
    if (user === null) {
      deps.logger?.warn(
        { requestId: c.get("requestId"), client: attempt.address },
        "dashboard sign-in failed",
      );
      return signInPage(c, deps, 401, {
        email,
        next,
        message: { kind: "error", text: "Incorrect email or password." },
      });
    }
    await deps.throttle.succeeded(attempt);
    await deps.tenancy.sessions.deleteExpired();
    const { token } = await deps.tenancy.sessions.create({ userId: user.id }, deps.sessionPolicy);
    setSessionCookie(c, deps, token);
    deleteCookie(c, NONCE_COOKIE, { path: deps.base });
    return c.redirect(next ?? `${deps.base}/keys`, 303);
  });
}

/** POST /sign-out: behind the session middleware, so it needs the session's CSRF token like any change. */
export function registerSignOut(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.post("/sign-out", async (c) => {
    const token = getCookie(c, SESSION_COOKIE);
    if (token !== undefined) await deps.tenancy.sessions.end(token);
    clearSessionCookie(c, deps);
    return c.redirect(`${deps.base}/sign-in?signed_out=1`, 303);
  });
}

function signInPage(
  c: Context<DashboardEnv>,
  deps: DashboardDeps,
  status: ContentfulStatusCode,
  form: SignInForm,
): Promise<Response> {
  let nonce = getCookie(c, NONCE_COOKIE);
  if (nonce === undefined || !NONCE_PATTERN.test(nonce)) {
    nonce = randomBytes(16).toString("base64url");
    setCookie(c, NONCE_COOKIE, nonce, {
      path: deps.base,
      httpOnly: true,
      sameSite: "Lax",
      secure: isSecureRequest(c, deps.secureCookies),
    });
  }
  return renderPage(
    c,
    { title: "Sign in", status },
    <section class="card narrow">
      <h1>Sign in to Hearth</h1>
      <MessageNotice message={form.message} />
      <form method="post" action={`${deps.base}/sign-in`}>
        <input type="hidden" name={CSRF_FIELD} value={deps.csrf.forSignIn(nonce)} />
        {form.next === undefined ? null : <input type="hidden" name="next" value={form.next} />}
        <TextField
          id="email"
          label="Email"
          name="email"
          type="email"
          autocomplete="username"
          required
          value={form.email ?? ""}
          autofocus={form.email === undefined || form.email === ""}
        />
        <TextField
          id="password"
          label="Password"
          name="password"
          type="password"
          autocomplete="current-password"
          required
          autofocus={form.email !== undefined && form.email !== ""}
        />
        <button type="submit">Sign in</button>
      </form>
    </section>,
  );
}
