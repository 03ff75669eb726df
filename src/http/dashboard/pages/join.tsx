// Invitation links (/join/<token>), public: the person who holds one either claims it as a new account (choosing
// their own password) or signs in to the account of the invited email and accepts or declines. The page offers
// both until someone is signed in, so it does not say whether the email has an account; only a claim attempt for
// an email that has one is told so. The token in the path is the capability (256 random bits, only its hash
// stored); responses are never cached and send no Referer, so it does not leak from here.
import { randomBytes } from "node:crypto";
import type { Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import {
  AccountExistsError,
  InvitationNotFoundError,
  TenancyValidationError,
} from "../../../tenancy/errors.js";
import type { Invitation } from "../../../tenancy/invitations.js";
import { CSRF_FIELD } from "../csrf.js";
import {
  formatDate,
  MessageNotice,
  NewPasswordFields,
  Notice,
  type PageMessage,
  renderPage,
} from "../layout.js";
import {
  clearSessionCookie,
  type DashboardDeps,
  type DashboardEnv,
  isSecureRequest,
  SESSION_COOKIE,
  setSessionCookie,
} from "../session.js";

const NONCE_COOKIE = "hearth_join";
const NONCE_PATTERN = /^[A-Za-z0-9_-]{22}$/;
const FORM = "join";

/** Who is signed in, if anyone: these pages are public, so no session is required. */
interface Viewer {
  sessionId: string;
  user: { id: string; email: string };
}

export function registerJoin(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/join/:token", async (c) => {
    const invitation = await findInvitation(deps, c.req.param("token"));
    if (invitation === undefined) return invalidLink(c, deps);
    return joinPage(c, deps, invitation, await currentViewer(c, deps));
  });

  // Claim: a new account with the password chosen here, signed in at once.
  app.post("/join/:token", async (c) => {
    const token = c.req.param("token");
    const form = await c.req.parseBody();
    const invitation = await findInvitation(deps, token);
    if (invitation === undefined) return invalidLink(c, deps);
    const nonce = getCookie(c, NONCE_COOKIE);
    if (nonce === undefined || !deps.csrf.matches(deps.csrf.forPublicForm(FORM, nonce), form[CSRF_FIELD])) {
      return joinPage(c, deps, invitation, undefined, 403, {
        kind: "error",
        text: "This form has expired or did not come from this dashboard. Nothing was changed: please try again.",
      });
    }
    const password = typeof form.password === "string" ? form.password : "";
    const confirm = typeof form.confirm === "string" ? form.confirm : "";
    if (password !== confirm) {
      return joinPage(c, deps, invitation, undefined, 400, {
        kind: "error",
        text: "The two passwords are not the same. Nothing was changed.",
      });
    }
    let claimed: Awaited<ReturnType<typeof deps.tenancy.invitations.claim>>;
    try {
      claimed = await deps.tenancy.invitations.claim(token, password);
    } catch (err) {
      if (err instanceof InvitationNotFoundError) return invalidLink(c, deps);
      if (err instanceof AccountExistsError || err instanceof TenancyValidationError) {
        const status = err instanceof AccountExistsError ? 409 : 400;
        return joinPage(c, deps, invitation, undefined, status, { kind: "error", text: err.message });
      }
      throw err;
    }
    // Whoever was signed in in this browser before is signed out: the browser now belongs to the new account.
    const previous = getCookie(c, SESSION_COOKIE);
    if (previous !== undefined) await deps.tenancy.sessions.end(previous);
    const { token: sessionToken } = await deps.tenancy.sessions.create(
      { userId: claimed.user.id },
      deps.sessionPolicy,
    );
    setSessionCookie(c, deps, sessionToken);
    deleteCookie(c, NONCE_COOKIE, { path: deps.base });
    return c.redirect(`${deps.base}/keys?${new URLSearchParams({ org: claimed.orgName })}`, 303);
  });

  app.post("/join/:token/accept", async (c) => {
    const token = c.req.param("token");
    const viewer = await signedInViewer(c, deps);
    if (viewer instanceof Response) return viewer;
    try {
      const { orgName } = await deps.tenancy.invitations.accept(token, viewer.user);
      return c.redirect(`${deps.base}/keys?${new URLSearchParams({ org: orgName })}`, 303);
    } catch (err) {
      if (err instanceof InvitationNotFoundError) return invalidLink(c, deps);
      throw err;
    }
  });

  app.post("/join/:token/decline", async (c) => {
    const viewer = await signedInViewer(c, deps);
    if (viewer instanceof Response) return viewer;
    try {
      await deps.tenancy.invitations.decline({ token: c.req.param("token") }, viewer.user);
    } catch (err) {
      if (err instanceof InvitationNotFoundError) return invalidLink(c, deps);
      throw err;
    }
    return c.redirect(`${deps.base}/invitations?done=declined`, 303);
  });
}

async function findInvitation(deps: DashboardDeps, token: string): Promise<Invitation | undefined> {
  try {
    return (await deps.tenancy.invitations.find(token)).invitation;
  } catch (err) {
    if (err instanceof InvitationNotFoundError) return undefined;
    throw err;
  }
}

async function currentViewer(c: Context<DashboardEnv>, deps: DashboardDeps): Promise<Viewer | undefined> {
  const token = getCookie(c, SESSION_COOKIE);
  if (token === undefined) return undefined;
  const lookup = await deps.tenancy.sessions.resolve(token, deps.sessionPolicy);
  if (lookup.status !== "active" || lookup.session.userId === null || lookup.session.email === null) {
    return undefined;
  }
  return { sessionId: lookup.session.id, user: { id: lookup.session.userId, email: lookup.session.email } };
}

/** Accepting and declining need the invited account signed in and the session's CSRF token. */
async function signedInViewer(c: Context<DashboardEnv>, deps: DashboardDeps): Promise<Viewer | Response> {
  const viewer = await currentViewer(c, deps);
  if (viewer === undefined) {
    if (getCookie(c, SESSION_COOKIE) !== undefined) clearSessionCookie(c, deps);
    const next = `${deps.base}/join/${c.req.param("token")}`;
    return c.redirect(`${deps.base}/sign-in?${new URLSearchParams({ next })}`, 303);
  }
  const form = await c.req.parseBody();
  if (!deps.csrf.matches(deps.csrf.forSession(viewer.sessionId), form[CSRF_FIELD])) {
    return message(
      c,
      deps,
      403,
      "Request refused",
      "This form could not be verified: its security token is missing or wrong. Nothing was changed. " +
        "Go back, reload the page and try again.",
    );
  }
  return viewer;
}

function invalidLink(c: Context<DashboardEnv>, deps: DashboardDeps): Promise<Response> {
  return message(
    c,
    deps,
    404,
    "Invitation not valid",
    `${new InvitationNotFoundError().message} Ask whoever invited you for a new link.`,
  );
}

function message(
  c: Context<DashboardEnv>,
  deps: DashboardDeps,
  status: ContentfulStatusCode,
  title: string,
  text: string,
): Promise<Response> {
  return renderPage(
    c,
    { title, status },
    <section class="card narrow">
      <h1>{title}</h1>
      <Notice kind="error">{text}</Notice>
      <p>
        <a href={`${deps.base}/sign-in`}>Go to sign-in</a>
      </p>
    </section>,
  );
}

function joinPage(
  c: Context<DashboardEnv>,
  deps: DashboardDeps,
  invitation: Invitation,
  viewer: Viewer | undefined,
  status: ContentfulStatusCode = 200,
  notice?: PageMessage,
): Promise<Response> {
  const action = `${deps.base}/join/${c.req.param("token")}`;
  const signIn = `${deps.base}/sign-in?${new URLSearchParams({ next: action })}`;
  const title = `Join ${invitation.orgName}`;
  const claimCsrf = viewer === undefined ? claimFormToken(c, deps) : "";
  return renderPage(
    c,
    { title, status },
    <section class="card narrow">
      <h1>{title}</h1>
      <p>
        {invitation.invitedBy === null ? "You are" : `${invitation.invitedBy} invited you`}
        {invitation.invitedBy === null ? " invited" : ""} to join <strong>{invitation.orgName}</strong> as{" "}
        {invitation.role}, with the account <strong>{invitation.email}</strong>. This link works once, until{" "}
        {formatDate(invitation.expiresAt)}.
      </p>
      <MessageNotice message={notice} />
      {viewer === undefined ? (
        <>
          <ClaimForm csrf={claimCsrf} action={action} email={invitation.email} />
          <h2>Already have a Hearth account?</h2>
          <p>
            <a href={signIn}>Sign in as {invitation.email}</a> to accept or decline this invitation.
          </p>
        </>
      ) : viewer.user.email === invitation.email ? (
        <div class="actions">
          <form method="post" action={`${action}/accept`}>
            <input type="hidden" name={CSRF_FIELD} value={deps.csrf.forSession(viewer.sessionId)} />
            <button type="submit">Accept and join {invitation.orgName}</button>
          </form>
          <form method="post" action={`${action}/decline`}>
            <input type="hidden" name={CSRF_FIELD} value={deps.csrf.forSession(viewer.sessionId)} />
            <button type="submit" class="secondary">
              Decline
            </button>
          </form>
        </div>
      ) : (
        <>
          <Notice kind="info">
            You are signed in as {viewer.user.email}, but this invitation is for {invitation.email}. Sign out,
            then open this link again.
          </Notice>
          <form method="post" action={`${deps.base}/sign-out`}>
            <input type="hidden" name={CSRF_FIELD} value={deps.csrf.forSession(viewer.sessionId)} />
            <button type="submit" class="secondary">
              Sign out
            </button>
          </form>
        </>
      )}
    </section>,
  );
}

/** The new-account form's CSRF token, bound to a nonce cookie (no session yet), like the sign-in form's. */
function claimFormToken(c: Context<DashboardEnv>, deps: DashboardDeps): string {
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
  return deps.csrf.forPublicForm(FORM, nonce);
}

const ClaimForm = ({ csrf, action, email }: { csrf: string; action: string; email: string }) => (
  <form method="post" action={action}>
    <h2>New to Hearth?</h2>
    <p>Choose a password to create the account {email}; nobody else sees it.</p>
    <input type="hidden" name={CSRF_FIELD} value={csrf} />
    <input type="text" name="username" value={email} autocomplete="username" hidden readonly />
    <NewPasswordFields label="Choose a password" />
    <button type="submit">Create account and join</button>
  </form>
);
