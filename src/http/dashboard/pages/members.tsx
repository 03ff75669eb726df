// Members of the active org. Everyone sees the list; only owners invite people (a single-use link shown once,
// through a flash: the same answer whether or not the email has an account), withdraw invitations, change roles
// and remove members. An org always keeps at least one owner.
import type { Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { MemberNotFoundError } from "../../../tenancy/errors.js";
import type { Invitation } from "../../../tenancy/invitations.js";
import { MEMBERSHIP_ROLES, type MembershipRole, type OrgUser } from "../../../tenancy/types.js";
import { domainApiError } from "../../errors/domain-errors.js";
import type { ErrorCode } from "../../errors/error-codes.js";
import { type FlashOf, redirectWithFlash, takeFlash } from "../flash.js";
import {
  ConfirmDialog,
  ConfirmTrigger,
  confirmPage,
  formatDate,
  link,
  MessageNotice,
  Notice,
  type PageMessage,
  PostForm,
  renderPage,
  SecretField,
  TextField,
} from "../layout.js";
import { type DashboardAuth, type DashboardDeps, type DashboardEnv, requireOwner } from "../session.js";

const TITLE = "Members";

interface MembersView {
  invited?: FlashOf<"invitation"> | undefined;
  notice?: PageMessage | undefined;
  email?: string | undefined;
}

const NOTICES: Record<string, string> = {
  role: "The role was changed.",
  removed: "The member was removed.",
  withdrawn: "The invitation was withdrawn: its link no longer works.",
};

export function registerMembers(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/members", async (c) => {
    const done = NOTICES[c.req.query("done") ?? ""];
    return membersPage(c, deps, {
      notice: done === undefined ? undefined : { kind: "success", text: done },
      invited: await takeFlash(c, deps, "invitation"),
    });
  });

  app.post("/members", async (c) => {
    const refused = requireOwner(c, "add members");
    if (refused !== null) return refused;
    const auth = c.get("auth");
    const form = await c.req.parseBody();
    const email = typeof form.email === "string" ? form.email : "";
    const role = parseRole(form.role);
    let invitation: Awaited<ReturnType<typeof deps.tenancy.invitations.create>>;
    try {
      invitation = await deps.tenancy.invitations.create({
        orgName: auth.org.orgName,
        email,
        role,
        actor: auth.user.id,
      });
    } catch (err) {
      return memberError(c, deps, err, { email });
    }
    // The same link and words whether or not the email has an account: the link's page sorts that out for
    // whoever holds it. Redirected with a flash, so a reload neither re-invites nor shows the link again.
    return redirectWithFlash(c, deps, "/members", {
      kind: "invitation",
      email: invitation.email,
      role: invitation.role,
      link: `${new URL(c.req.url).origin}${auth.base}/join/${invitation.token}`,
      expiresAt: invitation.expiresAt.toISOString(),
    });
  });

  app.post("/members/invitations/:id/withdraw", async (c) => {
    const refused = requireOwner(c, "withdraw invitations");
    if (refused !== null) return refused;
    const auth = c.get("auth");
    try {
      await deps.tenancy.invitations.withdraw(auth.org.orgName, c.req.param("id"), auth.user.id);
    } catch (err) {
      return memberError(c, deps, err);
    }
    return c.redirect(link(auth, "/members", { done: "withdrawn" }), 303);
  });

  app.post("/members/:userId/role", async (c) => {
    const refused = requireOwner(c, "change roles");
    if (refused !== null) return refused;
    const auth = c.get("auth");
    const form = await c.req.parseBody();
    try {
      await deps.tenancy.members.setRole(
        auth.org.orgName,
        c.req.param("userId"),
        parseRole(form.role),
        auth.user.id,
      );
    } catch (err) {
      return memberError(c, deps, err);
    }
    return c.redirect(link(auth, "/members", { done: "role" }), 303);
  });

  app.get("/members/:userId/remove", async (c) => {
    const refused = requireOwner(c, "remove members");
    if (refused !== null) return refused;
    const auth = c.get("auth");
    const member = (await deps.tenancy.users.list(auth.org.orgName)).find(
      (m) => m.id === c.req.param("userId"),
    );
    if (member === undefined) return memberError(c, deps, new MemberNotFoundError(auth.org.orgName, ""));
    return confirmPage(
      c,
      {
        title: "Remove member",
        active: "members",
        question: (
          <>
            Remove <strong>{member.email}</strong> from {auth.org.orgName}?
          </>
        ),
        action: `/members/${member.id}/remove`,
        confirm: "Remove member",
        cancel: "/members",
      },
      <RemoveConsequence />,
    );
  });

  app.post("/members/:userId/remove", async (c) => {
    const refused = requireOwner(c, "remove members");
    if (refused !== null) return refused;
    const auth = c.get("auth");
    const userId = c.req.param("userId");
    try {
      await deps.tenancy.members.remove(auth.org.orgName, userId, auth.user.id);
    } catch (err) {
      return memberError(c, deps, err);
    }
    // Removing yourself ends your access to this org: go wherever you still belong.
    if (userId === auth.user.id) return c.redirect(`${auth.base}/keys`, 303);
    return c.redirect(link(auth, "/members", { done: "removed" }), 303);
  });
}

function parseRole(value: unknown): MembershipRole {
  return value === "owner" ? "owner" : "member";
}

/** The failures a member change expects (a duplicate membership is `conflict`, a bad email or role a 400). */
const MEMBER_FAILURES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "last_owner",
  "not_found",
  "conflict",
  "member_not_found",
  "invalid_request_error",
]);

/** Expected member failures as the page with the reason in words; anything else is a bug and goes up. */
function memberError(
  c: Context<DashboardEnv>,
  deps: DashboardDeps,
  err: unknown,
  view: MembersView = {},
): Promise<Response> {
  const refused = domainApiError(err);
  if (refused === undefined || refused.code === null || !MEMBER_FAILURES.has(refused.code)) throw err;
  const text =
    refused.code === "member_not_found"
      ? `There is no such member in "${c.get("auth").org.orgName}". Nothing was changed.`
      : refused.code === "not_found"
        ? `There is no such pending invitation in "${c.get("auth").org.orgName}". Nothing was changed.`
        : `Nothing was changed: ${refused.message}`;
  const status = refused.status as ContentfulStatusCode;
  return membersPage(c, deps, { ...view, notice: { kind: "error", text } }, status);
}

async function membersPage(
  c: Context<DashboardEnv>,
  deps: DashboardDeps,
  view: MembersView,
  status: ContentfulStatusCode = 200,
): Promise<Response> {
  const auth = c.get("auth");
  const members = await deps.tenancy.users.list(auth.org.orgName);
  const isOwner = auth.org.role === "owner";
  const pending = isOwner ? await deps.tenancy.invitations.pendingOf(auth.org.orgName) : [];
  return renderPage(
    c,
    { title: TITLE, active: "members", status },
    <>
      <h1>{TITLE}</h1>
      <MessageNotice message={view.notice} />
      {view.invited === undefined ? null : <Invited invited={view.invited} orgName={auth.org.orgName} />}
      {isOwner ? null : (
        <Notice kind="info">
          Only owners of {auth.org.orgName} can add members, change roles or remove members.
        </Notice>
      )}
      <div class="table-wrap">
        <table>
          <caption class="hint">Members of {auth.org.orgName}</caption>
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col" class="opt">
                Added
              </th>
              {isOwner ? (
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              ) : null}
            </tr>
          </thead>
          <tbody>
            {members.map((m) => (
              <tr data-user-id={m.id}>
                <td>
                  {m.email}
                  {m.id === auth.user.id ? " (you)" : ""}
                </td>
                <td>{isOwner ? <RoleForm auth={auth} member={m} /> : m.role}</td>
                <td class="opt">{formatDate(m.createdAt)}</td>
                {isOwner ? (
                  <td>
                    <ConfirmTrigger
                      href={link(auth, `/members/${m.id}/remove`)}
                      dialog="remove-dialog"
                      post={`${auth.base}/members/${m.id}/remove`}
                      subject={m.email}
                      label="Remove"
                    />
                  </td>
                ) : null}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {pending.length === 0 ? null : <PendingInvitations auth={auth} pending={pending} />}
      {isOwner ? <AddMemberForm auth={auth} email={view.email} /> : null}
      {isOwner ? (
        <ConfirmDialog id="remove-dialog" auth={auth} title="Remove member" confirm="Remove member">
          <p>
            Remove <strong data-subject-slot /> from {auth.org.orgName}?
          </p>
          <RemoveConsequence />
        </ConfirmDialog>
      ) : null}
    </>,
  );
}

const Invited = ({ invited, orgName }: { invited: FlashOf<"invitation">; orgName: string }) => (
  <div>
    <Notice kind="success">
      Invitation created for {invited.email} as {invited.role}: send this link to the person.
    </Notice>
    <SecretField id="invitation-link" label="Invitation link" value={invited.link}>
      Send it to {invited.email} over a channel you trust: whoever opens it can join {orgName}. It works once,
      until {formatDate(new Date(invited.expiresAt))}. You won't see it again; invite the same email again for
      a new link.
    </SecretField>
  </div>
);

const PendingInvitations = ({ auth, pending }: { auth: DashboardAuth; pending: Invitation[] }) => (
  <div class="table-wrap">
    <table>
      <caption class="hint">Pending invitations to {auth.org.orgName}</caption>
      <thead>
        <tr>
          <th scope="col">Email</th>
          <th scope="col">Role</th>
          <th scope="col" class="opt">
            Expires
          </th>
          <th scope="col">
            <span class="visually-hidden">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {pending.map((invitation) => (
          <tr data-invitation-id={invitation.id}>
            <td>{invitation.email}</td>
            <td>{invitation.role}</td>
            <td class="opt">{formatDate(invitation.expiresAt)}</td>
            <td>
              <PostForm
                auth={auth}
                action={`/members/invitations/${invitation.id}/withdraw`}
                class="row-form"
              >
                <button type="submit" class="secondary">
                  Withdraw
                </button>
              </PostForm>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);

const RoleForm = ({ auth, member }: { auth: DashboardAuth; member: OrgUser }) => (
  <PostForm auth={auth} action={`/members/${member.id}/role`} class="row-form">
    <label class="visually-hidden" for={`role-${member.id}`}>
      Role of {member.email}
    </label>
    <select id={`role-${member.id}`} name="role">
      {MEMBERSHIP_ROLES.map((role) => (
        <option value={role} selected={role === member.role}>
          {role}
        </option>
      ))}
    </select>
    <button type="submit" class="secondary">
      Change role
    </button>
  </PostForm>
);

const AddMemberForm = ({ auth, email }: { auth: DashboardAuth; email?: string | undefined }) => (
  <section class="card">
    <h2>Invite a member</h2>
    <PostForm auth={auth} action="/members">
      <TextField
        id="member-email"
        label="Email"
        name="email"
        type="email"
        required
        autocomplete="off"
        value={email ?? ""}
      />
      <div class="field">
        <label for="member-role">Role</label>
        <select id="member-role" name="role">
          <option value="member">member: manages API keys</option>
          <option value="owner">owner: also manages members</option>
        </select>
      </div>
      <p class="hint">
        You get a single-use link to send them. They choose their own password, or accept with the account
        they have; nobody else learns it.
      </p>
      <button type="submit">Add member</button>
    </PostForm>
  </section>
);

const RemoveConsequence = () => (
  <p>
    They lose access to this organization at once. Their API keys stay; revoke them on the API keys page if
    needed.
  </p>
);
