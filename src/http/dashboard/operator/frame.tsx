// The operator view's frame inside the dashboard layout: who is signed in (the operator), sign-out, POST forms that
// carry the operator session's CSRF token, and refusals in words.
import type { Context } from "hono";
import type { Child, FC, PropsWithChildren } from "hono/jsx";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { CSRF_FIELD } from "../csrf.js";
import { ConfirmCard, ConfirmDialogOf, Notice, renderPage } from "../layout.js";
import type { DashboardEnv } from "../session.js";

/** What the frame needs of an operator session (operator-session.ts OperatorAuth). */
export interface OperatorFrameAuth {
  csrfToken: string;
  base: string;
}

/** A POST form to `<base>/operator<action>` with the CSRF token. */
export const OperatorForm: FC<
  PropsWithChildren<{ auth: OperatorFrameAuth; action: string; class?: string; "aria-label"?: string }>
> = ({ auth, action, children, ...rest }) => (
  <form method="post" action={`${auth.base}/operator${action}`} {...rest}>
    <input type="hidden" name={CSRF_FIELD} value={auth.csrfToken} />
    {children}
  </form>
);

/** The <dialog> a ConfirmTrigger opens in the operator view (layout.tsx ConfirmDialog, with this session's token). */
export const OperatorConfirmDialog: FC<
  PropsWithChildren<{ id: string; auth: OperatorFrameAuth; title: string; confirm: string }>
> = ({ auth, children, ...dialog }) => (
  <ConfirmDialogOf {...dialog} fields={<input type="hidden" name={CSRF_FIELD} value={auth.csrfToken} />}>
    {children}
  </ConfirmDialogOf>
);

/** The no-JS confirmation page of an operator ConfirmTrigger: a POST form to `<base>/operator<action>`. */
export function operatorConfirmPage(
  c: Context<DashboardEnv>,
  auth: OperatorFrameAuth,
  page: {
    title: string;
    question: Child;
    action: string;
    confirm: string;
    cancel: string;
  },
  consequence: Child,
): Promise<Response> {
  return operatorPage(
    c,
    { title: page.title, auth },
    <ConfirmCard
      {...page}
      action={`${auth.base}/operator${page.action}`}
      cancel={`${auth.base}/operator${page.cancel}`}
      fields={<input type="hidden" name={CSRF_FIELD} value={auth.csrfToken} />}
    >
      {consequence}
    </ConfirmCard>,
  );
}

/** An operator page: the heading bar with sign-out (when signed in), then `body`. */
export function operatorPage(
  c: Context<DashboardEnv>,
  options: { title: string; status?: ContentfulStatusCode; auth?: OperatorFrameAuth | undefined },
  body: Child,
): Promise<Response> {
  const { auth } = options;
  return renderPage(
    c,
    { title: `${options.title} · Operator`, status: options.status },
    <>
      {auth === undefined ? null : (
        <div class="head">
          <p class="hint">
            Operator view: signed in with the admin token. Changes are recorded in the audit log as{" "}
            <code>admin</code>.
          </p>
          <OperatorForm auth={auth} action="/sign-out" class="inline">
            <button type="submit" class="secondary">
              Sign out
            </button>
          </OperatorForm>
        </div>
      )}
      {body}
    </>,
  );
}

/** A refusal page in words, with the way back to the operator view. */
export function operatorErrorPage(
  c: Context<DashboardEnv>,
  status: ContentfulStatusCode,
  title: string,
  message: string,
): Promise<Response> {
  return operatorPage(
    c,
    { title, status },
    <section>
      <h1>{title}</h1>
      <Notice kind="error">{message}</Notice>
      <p>
        <a href={`${c.get("base")}/operator`}>Back to the operator view</a>
      </p>
    </section>,
  );
}
