// The signed-in user's account: change the password (the current one is asked again, wrong guesses count against
// the sign-in throttle); every other session of the user ends, so a session opened with the old one is gone.
import type { Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { TenancyValidationError, WrongPasswordError } from "../../../tenancy/errors.js";
import {
  link,
  MessageNotice,
  NewPasswordFields,
  type PageMessage,
  PostForm,
  renderPage,
  TextField,
} from "../layout.js";
import type { DashboardDeps, DashboardEnv } from "../session.js";

const TITLE = "Account";

export function registerAccount(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/account", (c) => {
    const done = c.req.query("done") === "password";
    return accountPage(
      c,
      done
        ? { kind: "success", text: "Your password was changed. Your other sessions were signed out." }
        : undefined,
    );
  });

  app.post("/account/password", async (c) => {
    const auth = c.get("auth");
    const form = await c.req.parseBody();
    const current = typeof form.current === "string" ? form.current : "";
    const next = typeof form.password === "string" ? form.password : "";
    const confirm = typeof form.confirm === "string" ? form.confirm : "";
    if (next !== confirm) {
      return accountPage(
        c,
        { kind: "error", text: "The two new passwords are not the same. Nothing was changed." },
        400,
      );
    }
    // Guessing the current password here is guessing a sign-in: the same throttle counts it, before the check.
    const attempt = { email: auth.user.email, address: deps.clientAddress(c) };
    const waitMs = await deps.throttle.take(attempt);
    if (waitMs > 0) {
      c.header("retry-after", String(Math.ceil(waitMs / 1000)));
      return accountPage(
        c,
        {
          kind: "error",
          text: "Too many wrong passwords for this account. Nothing was changed: try again later.",
        },
        429,
      );
    }
    const leave = deps.passwordChecks.tryEnter();
    if (leave === null) {
      await deps.throttle.giveBack(attempt);
      c.header("retry-after", "1");
      return accountPage(
        c,
        {
          kind: "error",
          text: "The server is checking many passwords right now. Nothing was changed: please try again in a moment.",
        },
        429,
      );
    }
    try {
      await deps.tenancy.members.changePassword(auth.user.id, current, next);
    } catch (err) {
      if (err instanceof WrongPasswordError) {
        return accountPage(c, { kind: "error", text: `${err.message} Nothing was changed.` }, 400);
      }
      await deps.throttle.giveBack(attempt);
      if (err instanceof TenancyValidationError) {
        return accountPage(c, { kind: "error", text: `Nothing was changed: ${err.message}` }, 400);
      }
      throw err;
    } finally {
      leave();
    }
    await deps.throttle.succeeded(attempt);
    await deps.tenancy.sessions.endOthers(auth.user.id, auth.sessionId);
    return c.redirect(link(auth, "/account", { done: "password" }), 303);
  });
}

function accountPage(
  c: Context<DashboardEnv>,
  notice: PageMessage | undefined,
  status: ContentfulStatusCode = 200,
): Promise<Response> {
  const auth = c.get("auth");
  return renderPage(
    c,
    { title: TITLE, active: "account", status },
    <>
      <h1>{TITLE}</h1>
      <MessageNotice message={notice} />
      <p class="lead">
        Signed in as <strong>{auth.user.email}</strong>.
      </p>
      <section class="card narrow">
        <h2>Change password</h2>
        <PostForm auth={auth} action="/account/password">
          <input
            type="text"
            name="username"
            value={auth.user.email}
            autocomplete="username"
            hidden
            readonly
          />
          <TextField
            id="current-password"
            label="Current password"
            name="current"
            type="password"
            autocomplete="current-password"
            required
          />
          <NewPasswordFields label="New password" />
          <button type="submit">Change password</button>
        </PostForm>
      </section>
    </>,
  );
}
