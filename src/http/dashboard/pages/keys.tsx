// API keys of the active org: list, create (Post/Redirect/Get: the secret is shown once, from a one-time flash, so
// a reload creates nothing and shows no secret), revoke with a confirmation (a <dialog> with JS, a confirmation
// page without). Owners and members alike manage their org's keys.
import type { Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { KeyInfo } from "../../../tenancy/types.js";
import { domainApiError } from "../../errors/domain-errors.js";
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
import type { DashboardAuth, DashboardDeps, DashboardEnv } from "../session.js";

const TITLE = "API keys";

interface KeysView {
  created?: FlashOf<"key"> | undefined;
  notice?: PageMessage | undefined;
  /** What the create form was given, when it is shown again with an error. */
  name?: string | undefined;
}

export function registerKeys(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/keys", async (c) => {
    const auth = c.get("auth");
    const revokedId = c.req.query("revoked");
    const keys = await deps.tenancy.keys.list(auth.org.orgName);
    const revoked = keys.find((k) => k.id === revokedId);
    const notice =
      revoked === undefined
        ? undefined
        : {
            kind: "success" as const,
            text: `Revoked ${keyLabel(revoked)}. Requests with it are now refused.`,
          };
    return keysPage(c, keys, { notice, created: await takeFlash(c, deps, "key") });
  });

  // Without JS, "Create API key" leads here; with JS the same form opens in a dialog on the list.
  app.get("/keys/new", (c) => {
    const auth = c.get("auth");
    return renderPage(
      c,
      { title: "Create API key", active: "keys" },
      <section class="card narrow">
        <h1>Create API key</h1>
        <CreateKeyForm auth={auth} />
        <p>
          <a href={link(auth, "/keys")}>Cancel</a>
        </p>
      </section>,
    );
  });

  app.post("/keys", async (c) => {
    const auth = c.get("auth");
    const form = await c.req.parseBody();
    const name = typeof form.name === "string" ? form.name.trim() : "";
    try {
      const created = await deps.tenancy.keys.create(auth.org.orgName, {
        name: name === "" ? undefined : name,
        actor: auth.user.id,
      });
      // Redirected, so a reload cannot create a second key; the secret rides in a sealed flash, never the URL.
      return redirectWithFlash(c, deps, "/keys", {
        kind: "key",
        name: created.name,
        key: created.key,
        last4: created.last4,
      });
    } catch (err) {
      // A name or expiry the service refuses; anything else is a bug and goes up.
      const refused = domainApiError(err);
      if (refused?.code !== "invalid_request_error") throw err;
      return keysPage(
        c,
        await deps.tenancy.keys.list(auth.org.orgName),
        { name, notice: { kind: "error", text: `The key was not created: ${refused.message}` } },
        refused.status as ContentfulStatusCode,
      );
    }
  });

  app.get("/keys/:id/revoke", async (c) => {
    const auth = c.get("auth");
    const key = (await deps.tenancy.keys.list(auth.org.orgName)).find((k) => k.id === c.req.param("id"));
    if (key === undefined) return keyNotFound(c, deps);
    return confirmPage(
      c,
      {
        title: "Revoke API key",
        active: "keys",
        question: (
          <>
            Revoke <strong>{keyLabel(key)}</strong>?
          </>
        ),
        action: `/keys/${key.id}/revoke`,
        confirm: "Revoke key",
        cancel: "/keys",
      },
      <RevokeConsequence />,
    );
  });

  app.post("/keys/:id/revoke", async (c) => {
    const auth = c.get("auth");
    const id = c.req.param("id");
    try {
      // Scoped to the active org: another org's key id is "not found", whatever the form says.
      await deps.tenancy.keys.revoke(id, auth.user.id, { orgName: auth.org.orgName });
    } catch (err) {
      if (domainApiError(err)?.code === "key_not_found") return keyNotFound(c, deps);
      throw err;
    }
    return c.redirect(link(auth, "/keys", { revoked: id }), 303);
  });
}

// The same answer for an unknown id and another org's key: nothing tells them apart.
async function keyNotFound(c: Context<DashboardEnv>, deps: DashboardDeps): Promise<Response> {
  const { org } = c.get("auth");
  const text = `There is no such API key in the organization "${org.orgName}". Nothing was changed.`;
  return keysPage(c, await deps.tenancy.keys.list(org.orgName), { notice: { kind: "error", text } }, 404);
}

function keysPage(
  c: Context<DashboardEnv>,
  keys: KeyInfo[],
  view: KeysView,
  status: ContentfulStatusCode = 200,
): Promise<Response> {
  const auth = c.get("auth");
  const now = Date.now();
  return renderPage(
    c,
    { title: TITLE, active: "keys", status },
    <>
      <div class="head">
        <h1>{TITLE}</h1>
        <form method="get" action={`${auth.base}/keys/new`} data-dialog="create-key-dialog">
          {auth.memberships.length > 1 ? <input type="hidden" name="org" value={auth.org.orgName} /> : null}
          <button type="submit">Create API key</button>
        </form>
      </div>
      <p class="lead">
        Keys of <strong>{auth.org.orgName}</strong> authenticate requests to <code>/v1</code> with{" "}
        <code>Authorization: Bearer &lt;key&gt;</code>. Keep them out of client-side code and version control.
      </p>
      <MessageNotice message={view.notice} />
      {view.created === undefined ? null : (
        <div>
          <Notice kind="success">Created {keyLabel(view.created)}.</Notice>
          <SecretField id="secret-key" label="Secret key" value={view.created.key}>
            Copy this secret key now and keep it somewhere safe. You won't see it again: Hearth stores only a
            hash of it.
          </SecretField>
        </div>
      )}
      <KeyTable auth={auth} keys={keys} now={now} />
      <dialog id="create-key-dialog" aria-labelledby="create-key-title">
        <h2 id="create-key-title">Create API key</h2>
        <CreateKeyForm auth={auth} name={view.name} cancel />
      </dialog>
      <ConfirmDialog id="revoke-dialog" auth={auth} title="Revoke API key" confirm="Revoke key">
        <p>
          Revoke <strong data-subject-slot />?
        </p>
        <RevokeConsequence />
      </ConfirmDialog>
    </>,
  );
}

const KeyTable = ({ auth, keys, now }: { auth: DashboardAuth; keys: KeyInfo[]; now: number }) =>
  keys.length === 0 ? (
    <p class="empty">This organization has no API keys yet.</p>
  ) : (
    <div class="table-wrap">
      <table>
        <caption class="hint">API keys of {auth.org.orgName}</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Key</th>
            <th scope="col" class="opt">
              Created
            </th>
            <th scope="col">Last used</th>
            <th scope="col">Status</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {keys.map((key) => {
            const status = keyStatus(key, now);
            return (
              <tr data-key-id={key.id}>
                <td>{key.name ?? <span class="empty">(no name)</span>}</td>
                <td class="key">{shortKey(key)}</td>
                <td class="opt">{formatDate(key.createdAt)}</td>
                <td>{formatDate(key.lastUsedAt)}</td>
                <td>
                  <span class={`status ${status}`}>{status}</span>
                </td>
                <td>
                  {status === "revoked" ? null : (
                    <ConfirmTrigger
                      href={link(auth, `/keys/${key.id}/revoke`)}
                      dialog="revoke-dialog"
                      post={`${auth.base}/keys/${key.id}/revoke`}
                      subject={keyLabel(key)}
                      label="Revoke"
                    />
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );

const CreateKeyForm = ({
  auth,
  name,
  cancel,
}: {
  auth: DashboardAuth;
  name?: string | undefined;
  cancel?: boolean;
}) => (
  <PostForm auth={auth} action="/keys">
    <TextField
      id={cancel ? "dialog-key-name" : "key-name"}
      label="Name"
      name="name"
      maxlength={128}
      value={name ?? ""}
      autofocus
      hint="Something to recognise it by, e.g. the app or person using it."
    />
    <div class="actions">
      <button type="submit">Create</button>
      {cancel ? (
        <button type="button" class="secondary" data-close>
          Cancel
        </button>
      ) : null}
    </div>
  </PostForm>
);

const RevokeConsequence = () => (
  <p>
    Requests with this key will be refused at once. This cannot be undone; create a new key if you need one.
  </p>
);

function keyStatus(key: KeyInfo, now: number): "active" | "revoked" | "expired" {
  if (key.revokedAt !== null) return "revoked";
  if (key.expiresAt !== null && key.expiresAt.getTime() <= now) return "expired";
  return "active";
}

/** "sk-…abcd": enough to recognise a key, useless to anyone else. */
function shortKey(key: Pick<KeyInfo, "last4">): string {
  return `sk-…${key.last4}`;
}

function keyLabel(key: Pick<KeyInfo, "name" | "last4">): string {
  return key.name === null ? shortKey(key) : `"${key.name}" (${shortKey(key)})`;
}
