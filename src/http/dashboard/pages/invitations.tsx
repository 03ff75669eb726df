// The signed-in user's pending invitations to other orgs, with Decline. Accepting takes the invitation's link
// (join.tsx): an invitation is addressed to an email, and only the link proves that the person its owner meant
// is the one accepting, so an account that someone else claimed for that email cannot collect invitations to it.
import type { Hono } from "hono";
import { InvitationNotFoundError } from "../../../tenancy/errors.js";
import type { Invitation } from "../../../tenancy/invitations.js";
import { formatDate, link, MessageNotice, type PageMessage, PostForm, renderPage } from "../layout.js";
import type { DashboardAuth, DashboardDeps, DashboardEnv } from "../session.js";

const TITLE = "Invitations";

export function registerInvitations(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/invitations", async (c) => {
    const auth = c.get("auth");
    const notice: PageMessage | undefined =
      c.req.query("done") === "declined"
        ? { kind: "success", text: "The invitation was declined." }
        : undefined;
    const pending = await deps.tenancy.invitations.pendingFor(auth.user.email);
    return renderPage(
      c,
      { title: TITLE, active: "invitations" },
      <InvitationsBody auth={auth} pending={pending} notice={notice} />,
    );
  });

  app.post("/invitations/:id/decline", async (c) => {
    const auth = c.get("auth");
    try {
      await deps.tenancy.invitations.decline({ id: c.req.param("id") }, auth.user);
    } catch (err) {
      if (!(err instanceof InvitationNotFoundError)) throw err;
      const pending = await deps.tenancy.invitations.pendingFor(auth.user.email);
      const text = "There is no such pending invitation for you. Nothing was changed.";
      return renderPage(
        c,
        { title: TITLE, active: "invitations", status: 404 },
        <InvitationsBody auth={auth} pending={pending} notice={{ kind: "error", text }} />,
      );
    }
    return c.redirect(link(auth, "/invitations", { done: "declined" }), 303);
  });
}

const InvitationsBody = ({
  auth,
  pending,
  notice,
}: {
  auth: DashboardAuth;
  pending: Invitation[];
  notice: PageMessage | undefined;
}) => (
  <>
    <h1>{TITLE}</h1>
    <MessageNotice message={notice} />
    <p class="lead">
      Invitations for <strong>{auth.user.email}</strong> to join other organizations. To accept one, open the
      link its sender gave you while signed in: an invitation is accepted only through its link.
    </p>
    {pending.length === 0 ? (
      <p class="empty">You have no pending invitations.</p>
    ) : (
      <div class="table-wrap">
        <table>
          <caption class="hint">Pending invitations for {auth.user.email}</caption>
          <thead>
            <tr>
              <th scope="col">Organization</th>
              <th scope="col">Role</th>
              <th scope="col" class="opt">
                Invited by
              </th>
              <th scope="col">Expires</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {pending.map((invitation) => (
              <tr data-invitation-id={invitation.id}>
                <td>{invitation.orgName}</td>
                <td>{invitation.role}</td>
                <td class="opt">{invitation.invitedBy ?? "the operator"}</td>
                <td>{formatDate(invitation.expiresAt)}</td>
                <td>
                  <PostForm auth={auth} action={`/invitations/${invitation.id}/decline`} class="row-form">
                    <button type="submit" class="secondary">
                      Decline
                    </button>
                  </PostForm>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    )}
  </>
);
