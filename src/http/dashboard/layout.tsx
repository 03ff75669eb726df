// The dashboard's page frame and shared pieces: layout with the navigation, forms that carry the CSRF token and
// the active org, notices, confirmation dialogs, and the one function that sends a page.
//
// Reuse for a new page (see pages/keys.tsx for a full example):
//   app.get("/usage", (c) => renderPage(c, { title: "Usage", active: "usage" }, <UsageBody auth={c.var.auth} />));
// - `c.var.auth` (session.ts) is the signed-in user, their memberships and the active org, already checked.
// - Links: `link(auth, "/usage")` keeps the active org (`?org=`) for users of several orgs.
// - POST forms: <PostForm auth={auth} action="/usage/export">…</PostForm> adds `_csrf` and `org`; the session
//   middleware has verified both before the handler runs.
// - Errors: renderPage(c, {…, status: 400}, <Notice kind="error">words</Notice>) or errorPage(c, 403, …).
// - Confirmation: a <ConfirmTrigger> (GET form to a no-JS confirmation page) opens a <ConfirmDialog> with JS.
import type { Context } from "hono";
import type { Child, FC, PropsWithChildren } from "hono/jsx";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { CSRF_FIELD } from "./csrf.js";
import type { DashboardAuth, DashboardEnv } from "./env.js";

/** The navigation, in order. Every page is one route at `path` below the dashboard's base. */
export const NAV_ITEMS = Object.freeze([
  { id: "keys", label: "API keys", path: "/keys" },
  { id: "usage", label: "Usage", path: "/usage" },
  { id: "models", label: "Models", path: "/models" },
  { id: "limits", label: "Limits", path: "/limits" },
  { id: "members", label: "Members", path: "/members" },
  { id: "invitations", label: "Invitations", path: "/invitations" },
  { id: "account", label: "Account", path: "/account" },
] as const);
export type NavId = (typeof NAV_ITEMS)[number]["id"];

/** URL of a dashboard page for the active org: `?org=` is added only for users of several orgs. */
export function link(auth: DashboardAuth, path: string, params: Record<string, string> = {}): string {
  const query = new URLSearchParams(params);
  if (auth.memberships.length > 1) query.set("org", auth.org.orgName);
  const text = query.toString();
  return `${auth.base}${path}${text === "" ? "" : `?${text}`}`;
}

export interface PageOptions {
  title: string;
  active?: NavId | undefined;
  status?: ContentfulStatusCode | undefined;
  /** The signed-in user; defaults to `c.var.auth` (absent on the sign-in page). */
  auth?: DashboardAuth | undefined;
}

/** Sends a whole HTML page (never cached: pages can carry a secret shown once). */
export async function renderPage(
  c: Context<DashboardEnv>,
  options: PageOptions,
  body: Child,
): Promise<Response> {
  const auth = options.auth ?? c.get("auth");
  const base = auth?.base ?? c.get("base");
  const page = (
    <Layout title={options.title} auth={auth} active={options.active} base={base}>
      {body}
    </Layout>
  );
  return c.html(`<!DOCTYPE html>${await page}`, options.status ?? 200);
}

/** A page that says, in words, why a request was refused. */
export function errorPage(
  c: Context<DashboardEnv>,
  status: ContentfulStatusCode,
  title: string,
  message: string,
  auth?: DashboardAuth,
): Promise<Response> {
  const home = auth === undefined ? `${c.get("base")}/sign-in` : link(auth, "/keys");
  return renderPage(
    c,
    { title, status, auth },
    <section>
      <h1>{title}</h1>
      <Notice kind="error">{message}</Notice>
      <p>
        <a href={home}>{auth === undefined ? "Go to sign-in" : "Back to API keys"}</a>
      </p>
    </section>,
  );
}

interface LayoutProps {
  title: string;
  auth: DashboardAuth | undefined;
  active: NavId | undefined;
  base: string;
}

const Layout: FC<PropsWithChildren<LayoutProps>> = ({ title, auth, active, base, children }) => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <title>{`${title} · Hearth`}</title>
      <link rel="stylesheet" href={`${base}/assets/dashboard.css`} />
      <script src={`${base}/assets/dashboard.js`} defer />
    </head>
    <body>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={auth === undefined ? `${base}/sign-in` : link(auth, "/keys")}>
          Hearth
        </a>
        {auth === undefined ? null : <Account auth={auth} />}
      </header>
      {auth === undefined ? null : (
        <nav class="nav" aria-label="Dashboard">
          <ul>
            {NAV_ITEMS.map((item) => (
              <li>
                <a href={link(auth, item.path)} aria-current={item.id === active ? "page" : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <main id="main" tabindex={-1}>
        {children}
      </main>
    </body>
  </html>
);

/** Org switcher (several orgs only), who is signed in, and sign-out. */
const Account: FC<{ auth: DashboardAuth }> = ({ auth }) => (
  <div class="account">
    {auth.memberships.length > 1 ? (
      <form method="get" action={`${auth.base}/keys`} class="org-switch">
        <label for="org-switch">Organization</label>
        <select id="org-switch" name="org">
          {auth.memberships.map((m) => (
            <option value={m.orgName} selected={m.orgName === auth.org.orgName}>
              {m.orgName}
            </option>
          ))}
        </select>
        <button type="submit" class="secondary">
          Switch
        </button>
      </form>
    ) : (
      <span class="org">
        Organization <strong>{auth.org.orgName}</strong>
      </span>
    )}
    <span class="who">
      {auth.user.email} <span class="role">({auth.org.role})</span>
    </span>
    <PostForm auth={auth} action="/sign-out" class="inline">
      <button type="submit" class="secondary">
        Sign out
      </button>
    </PostForm>
  </div>
);

/** The hidden fields every dashboard POST needs: the CSRF token and the active org. */
export const FormFields: FC<{ auth: DashboardAuth }> = ({ auth }) => (
  <>
    <input type="hidden" name={CSRF_FIELD} value={auth.csrfToken} />
    <input type="hidden" name="org" value={auth.org.orgName} />
  </>
);

/** A POST form to `action` (relative to the dashboard base) carrying FormFields. */
export const PostForm: FC<
  PropsWithChildren<{ auth: DashboardAuth; action: string; class?: string; id?: string }>
> = ({ auth, action, children, ...rest }) => (
  <form method="post" action={`${auth.base}${action}`} {...rest}>
    <FormFields auth={auth} />
    {children}
  </form>
);

export const Notice: FC<PropsWithChildren<{ kind: "error" | "success" | "info" }>> = ({ kind, children }) => (
  <div class={`notice ${kind}`} role={kind === "error" ? "alert" : "status"}>
    {children}
  </div>
);

/** A page's one-line outcome ("The key was revoked.", "Nothing was changed: …"), shown above its content. */
export interface PageMessage {
  kind: "error" | "success" | "info";
  text: string;
}

/** The page's message as a notice; nothing when there is none. */
export const MessageNotice: FC<{ message: PageMessage | undefined }> = ({ message }) =>
  message === undefined ? null : <Notice kind={message.kind}>{message.text}</Notice>;

/**
 * A button that asks for confirmation: without JS it is a GET form to `href` (a confirmation page); with JS it
 * opens the <ConfirmDialog id={dialog}>, whose form then posts to `post` and shows `subject`.
 */
export const ConfirmTrigger: FC<{
  href: string;
  dialog: string;
  post: string;
  subject: string;
  label: Child;
}> = (props) => {
  const url = new URL(props.href, "http://x");
  return (
    <form
      method="get"
      action={url.pathname}
      data-dialog={props.dialog}
      data-post={props.post}
      data-subject={props.subject}
    >
      {[...url.searchParams].map(([name, value]) => (
        <input type="hidden" name={name} value={value} />
      ))}
      <button type="submit" class="danger-outline">
        {props.label}
      </button>
    </form>
  );
};

/** The <dialog> a ConfirmTrigger opens; `children` explain the consequence, `slot` elements show the subject. */
export const ConfirmDialog: FC<
  PropsWithChildren<{ id: string; auth: DashboardAuth; title: string; confirm: string }>
> = ({ auth, children, ...dialog }) => (
  <ConfirmDialogOf {...dialog} fields={<FormFields auth={auth} />}>
    {children}
  </ConfirmDialogOf>
);

/** A ConfirmDialog whose form carries `fields` (the operator view's forms carry their own CSRF token). */
export const ConfirmDialogOf: FC<
  PropsWithChildren<{ id: string; title: string; confirm: string; fields: Child }>
> = ({ id, title, confirm, fields, children }) => (
  <dialog id={id} aria-labelledby={`${id}-title`}>
    <form method="post" action="" data-dialog-form>
      {fields}
      <h2 id={`${id}-title`}>{title}</h2>
      {children}
      <div class="actions">
        <button type="submit" class="danger">
          {confirm}
        </button>
        <button type="button" class="secondary" data-close>
          Cancel
        </button>
      </div>
    </form>
  </dialog>
);

/**
 * The no-JS confirmation page of a ConfirmTrigger: `question` and the consequence (children), a POST form to
 * `action` with the `confirm` button, and a way back to `cancel`.
 */
export function confirmPage(
  c: Context<DashboardEnv>,
  page: { title: string; active: NavId; question: Child; action: string; confirm: string; cancel: string },
  consequence: Child,
): Promise<Response> {
  const auth = c.get("auth");
  return renderPage(
    c,
    { title: page.title, active: page.active },
    <ConfirmCard
      {...page}
      action={`${auth.base}${page.action}`}
      cancel={link(auth, page.cancel)}
      fields={<FormFields auth={auth} />}
    >
      {consequence}
    </ConfirmCard>,
  );
}

/** The body of a confirmation page: a POST form to the URL `action` with `fields`, and a link back to `cancel`. */
export const ConfirmCard: FC<
  PropsWithChildren<{
    title: string;
    question: Child;
    action: string;
    confirm: string;
    cancel: string;
    fields: Child;
  }>
> = (page) => (
  <section class="card narrow">
    <h1>{page.title}</h1>
    <p>{page.question}</p>
    {page.children}
    <form method="post" action={page.action}>
      {page.fields}
      <div class="actions">
        <button type="submit" class="danger">
          {page.confirm}
        </button>
        <a href={page.cancel}>Cancel</a>
      </div>
    </form>
  </section>
);

/** A labelled input with an optional hint below it. */
export const TextField: FC<{
  id: string;
  label: string;
  name: string;
  type?: "text" | "email" | "password";
  value?: string | undefined;
  hint?: string;
  autocomplete?: string;
  required?: boolean;
  autofocus?: boolean;
  maxlength?: number;
}> = ({ label, hint, type, ...input }) => (
  <div class="field">
    <label for={input.id}>{label}</label>
    <input type={type ?? "text"} {...input} />
    {hint === undefined ? null : <p class="hint">{hint}</p>}
  </div>
);

/** A new password and its repetition (fields `password` and `confirm`), marked for password managers. */
export const NewPasswordFields: FC<{ label: string }> = ({ label }) => (
  <>
    <TextField
      id="new-password"
      label={label}
      name="password"
      type="password"
      autocomplete="new-password"
      required
      hint="At least 8 characters."
    />
    <TextField
      id="confirm-password"
      label="Repeat the password"
      name="confirm"
      type="password"
      autocomplete="new-password"
      required
    />
  </>
);

/** A secret shown once (a new API key, a generated password), with a copy button (JS) and the warning. */
export const SecretField: FC<PropsWithChildren<{ id: string; label: string; value: string }>> = ({
  id,
  label,
  value,
  children,
}) => (
  <div class="secret">
    <label for={id}>{label}</label>
    <div class="secret-row">
      <input id={id} type="text" readonly value={value} autocomplete="off" spellcheck={false} data-select />
      <button type="button" class="secondary" data-copy={id} hidden>
        Copy
      </button>
    </div>
    <p class="warning">{children}</p>
  </div>
);

/** Dates as people read them, in UTC so every viewer sees the same text. */
export function formatDate(date: Date | null, empty = "never"): string {
  if (date === null) return empty;
  return `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}
