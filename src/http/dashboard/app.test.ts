// The dashboard in memory (app.request on the whole app, PGlite): sign-in, cookies, CSRF, throttling, session
// expiry, keys and members rules, org isolation. The same flows run in a real browser against a real server in
// test/e2e.
import { eq } from "drizzle-orm";
import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeEngine } from "../../../test/support/fake-engine.js";
import { FormClient, pageText } from "../../../test/support/form-client.js";
import { startTestApp, type TestApp } from "../../../test/support/test-app.js";
import type { Store } from "../../store/open-store.js";
import { apiKeys, auditLog, sessions } from "../../store/schema.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import type { AppEnv } from "../env.js";
import { createSignInThrottle } from "./sign-in-throttle.js";

const HOUR = 3_600_000;

let harness: TestApp<FakeEngine>;
let store: Store;
let tenancy: Tenancy;
let clock = Date.parse("2031-05-01T00:00:00Z");
let app: Hono<AppEnv>;
let owner: { email: string; password: string };
const memberPassword = "member password 1";
const otherPassword = "other password 1";

beforeAll(async () => {
  harness = await startTestApp({
    models: [{ id: "tiny" }],
    tenancy: { now: () => clock },
    app: {
      dashboard: {
        sessionIdleMs: HOUR,
        sessionLifetimeMs: 4 * HOUR,
        throttle: createSignInThrottle([{ per: "account-and-address", failures: 3, windowSeconds: 1 }]),
      },
    },
    bootstrap: false,
  });
  ({ store, app } = harness);
  tenancy = harness.services.tenancy;
  const boot = await tenancy.bootstrap(["tiny"], { ownerEmail: "owner@hearth.localhost" });
  owner = boot?.owner ?? { email: "", password: "" };
  await tenancy.users.create({ orgName: "default", email: "member@acme.test", password: memberPassword });
  await tenancy.orgs.create("other");
  await tenancy.users.create({
    orgName: "other",
    email: "other@other.test",
    password: otherPassword,
    role: "owner",
  });
});

afterAll(async () => {
  await harness?.close();
});

/** The dashboard in memory, with the sign-in form filled in. */
class Client extends FormClient {
  constructor() {
    super(app);
  }

  async signIn(email: string, password: string, headers: Record<string, string> = {}): Promise<Response> {
    const _csrf = await this.csrf("/dashboard/sign-in");
    return this.post("/dashboard/sign-in", { _csrf, email, password }, headers);
  }
}

async function signedIn(email: string, password: string): Promise<Client> {
  const client = new Client();
  const res = await client.signIn(email, password);
  expect(res.status).toBe(303);
  return client;
}

describe("sign-in", () => {
  it("has labelled fields, sets an httpOnly SameSite=Lax session cookie, Secure behind https", async () => {
    const client = new Client();
    const page = await (await client.get("/dashboard/sign-in")).text();
    expect(page).toContain('<label for="email">Email</label>');
    expect(page).toContain('<label for="password">Password</label>');
    expect(page).toContain("Sign in</button>");
    const res = await client.signIn(owner.email, owner.password);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/dashboard/keys");
    const cookie = client.setCookies.find((c) => c.startsWith("hearth_session="));
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    expect(cookie).toMatch(/Path=\/dashboard/);
    expect(cookie).not.toMatch(/Secure/);
    const https = new Client();
    await https.signIn(owner.email, owner.password, { "x-forwarded-proto": "https" });
    expect(https.setCookies.find((c) => c.startsWith("hearth_session="))).toMatch(/Secure/);
  });

  it("stores only the SHA-256 of the session token", async () => {
    const client = await signedIn(owner.email, owner.password);
    const token = client.cookies.get("hearth_session") ?? "";
    const rows = await store.db.select().from(sessions);
    expect(JSON.stringify(rows)).not.toContain(token);
  });

  it("refuses a wrong password in words, then throttles even the right one until the window passes", async () => {
    const client = new Client();
    for (let i = 0; i < 3; i++) {
      const res = await client.signIn("member@acme.test", "wrong password");
      expect(res.status).toBe(401);
      expect(await res.text()).toContain("Incorrect email or password.");
    }
    const refused = await client.signIn("member@acme.test", memberPassword);
    expect(refused.status).toBe(429);
    expect(await refused.text()).toContain("Too many failed sign-in attempts");
    await new Promise((r) => setTimeout(r, 1100));
    expect((await client.signIn("member@acme.test", memberPassword)).status).toBe(303);
  });

  it("refuses a sign-in post without the form's token (login CSRF)", async () => {
    const client = new Client();
    const res = await client.post("/dashboard/sign-in", { email: owner.email, password: owner.password });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("did not come from this dashboard");
  });

  it("redirects to sign-in without a session, keeping where the user was going", async () => {
    const res = await new Client().get("/dashboard/members");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/dashboard/sign-in?next=%2Fdashboard%2Fmembers");
  });
});

describe("sessions", () => {
  it("end after the idle limit and after the absolute lifetime, saying so", async () => {
    const idle = await signedIn(owner.email, owner.password);
    clock += HOUR - 1000;
    expect((await idle.get("/dashboard/keys")).status).toBe(200);
    clock += HOUR - 1000; // touched a moment ago (more than a minute after sign-in), so still alive
    expect((await idle.get("/dashboard/keys")).status).toBe(200);
    clock += HOUR + 1;
    const expired = await idle.get("/dashboard/keys");
    expect(expired.status).toBe(303);
    expect(expired.headers.get("location")).toContain("expired=1");
    const page = await (await idle.get(expired.headers.get("location") ?? "")).text();
    expect(page).toContain("Your session has expired");

    const busy = await signedIn(owner.email, owner.password);
    for (let i = 0; i < 4; i++) {
      expect((await busy.get("/dashboard/keys")).status).toBe(200);
      clock += HOUR - 60_000;
    }
    clock += 4 * 60_000; // active all along, but 4 h after sign-in
    expect((await busy.get("/dashboard/keys")).status).toBe(303);
  });

  it("sign-out deletes the session", async () => {
    const client = await signedIn(owner.email, owner.password);
    const token = client.cookies.get("hearth_session") ?? "";
    const before = await store.db.select().from(sessions);
    const _csrf = await client.csrf("/dashboard/keys");
    const res = await client.post("/dashboard/sign-out", { _csrf });
    expect(res.headers.get("location")).toBe("/dashboard/sign-in?signed_out=1");
    expect((await store.db.select().from(sessions)).length).toBe(before.length - 1);
    const replay = new Client();
    replay.cookies.set("hearth_session", token);
    expect((await replay.get("/dashboard/keys")).status).toBe(303);
  });
});

describe("API keys", () => {
  it("creates with Post/Redirect/Get: the secret shows once after the redirect, never in a URL; audited", async () => {
    const client = await signedIn("member@acme.test", memberPassword);
    const _csrf = await client.csrf("/dashboard/keys");
    const before = (await tenancy.keys.list("default")).length;
    const res = await client.post("/dashboard/keys", { _csrf, org: "default", name: "ci" });
    expect(res.status).toBe(303);
    const location = res.headers.get("location") ?? "";
    expect(location).toMatch(/^\/dashboard\/keys\?flash=flash_\w+$/);
    const shown = await client.get(location);
    expect(shown.headers.get("cache-control")).toBe("no-store");
    const html = await pageText(shown);
    const secret = /id="secret-key" type="text" readonly="" value="(sk-[A-Za-z0-9]+)"/.exec(html)?.[1] ?? "";
    expect(await tenancy.keys.verify(secret)).not.toBeNull();
    expect(location).not.toContain(secret);
    expect(html).toContain("You won't see it again");
    expect(html).toContain(`sk-…${secret.slice(-4)}`);
    // A reload of the page that showed the secret: the list, no secret, and no second key.
    const reloaded = await pageText(await client.get(location));
    expect(reloaded).not.toContain(secret);
    expect(reloaded).not.toContain('id="secret-key"');
    expect(reloaded).toContain(`sk-…${secret.slice(-4)}`);
    expect(await tenancy.keys.list("default")).toHaveLength(before + 1);
    // Another session cannot read the flash by its id either.
    const other = await signedIn(owner.email, owner.password);
    expect(await (await other.get(location)).text()).not.toContain("secret-key");
    const [row] = await store.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.action, "key.create"))
      .orderBy(auditLog.id);
    expect(row).toBeDefined();
    const audits = await tenancy.audit.list({ orgName: "default", limit: 5 });
    expect(audits[0]).toMatchObject({ action: "key.create" });
    expect(audits[0]?.actor).toMatch(/^user_/);
  });

  it("refuses a change without or with a wrong CSRF token, in words, changing nothing", async () => {
    const client = await signedIn(owner.email, owner.password);
    const before = (await tenancy.keys.list("default")).length;
    for (const form of [
      { org: "default", name: "x" },
      { org: "default", name: "x", _csrf: "forged" },
    ]) {
      const res = await client.post("/dashboard/keys", form);
      expect(res.status).toBe(403);
      expect(await res.text()).toContain("security token is missing or wrong");
    }
    expect(await tenancy.keys.list("default")).toHaveLength(before);
  });

  it("keeps orgs apart: no listing, no revoking another org's key by a forged post", async () => {
    const target = await tenancy.keys.create("default", { name: "victim" });
    const intruder = await signedIn("other@other.test", otherPassword);
    const page = await (await intruder.get("/dashboard/keys")).text();
    expect(page).not.toContain(target.id);
    expect(page).not.toContain("victim");
    expect((await intruder.get("/dashboard/keys?org=default")).status).toBe(403);
    const _csrf = await intruder.csrf("/dashboard/keys");
    const own = await intruder.post(`/dashboard/keys/${target.id}/revoke`, { _csrf, org: "other" });
    expect(own.status).toBe(404);
    expect(await own.text()).toContain("There is no such API key");
    const foreign = await intruder.post(`/dashboard/keys/${target.id}/revoke`, { _csrf, org: "default" });
    expect(foreign.status).toBe(403);
    expect(await foreign.text()).toContain("You are not a member of the organization");
    expect(await tenancy.keys.verify(target.key)).not.toBeNull();
  });

  it("revokes with a confirmation page (no JS) and a redirect that names the key", async () => {
    const key = await tenancy.keys.create("default", { name: "old" });
    const client = await signedIn(owner.email, owner.password);
    const confirm = await (await client.get(`/dashboard/keys/${key.id}/revoke`)).text();
    expect(confirm).toContain("Revoke key</button>");
    const _csrf = /name="_csrf" value="([^"]+)"/.exec(confirm)?.[1] ?? "";
    const res = await client.post(`/dashboard/keys/${key.id}/revoke`, { _csrf, org: "default" });
    expect(res.status).toBe(303);
    const page = await pageText(await client.get(res.headers.get("location") ?? ""));
    expect(page).toContain(`Revoked "old" (sk-…${key.key.slice(-4)})`);
    expect(await tenancy.keys.verify(key.key)).toBeNull();
  });
});

describe("members", () => {
  it("are managed by owners only", async () => {
    const member = await signedIn("member@acme.test", memberPassword);
    const page = await (await member.get("/dashboard/members")).text();
    expect(page).toContain("Only owners of default can add members");
    const _csrf = await member.csrf("/dashboard/members");
    const res = await member.post("/dashboard/members", { _csrf, org: "default", email: "x@acme.test" });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("Only owners of");
  });

  it("are invited with a link shown once (no password), claimed by the person, promoted, demoted and removed", async () => {
    const client = await signedIn(owner.email, owner.password);
    const _csrf = await client.csrf("/dashboard/members");
    const added = await client.post("/dashboard/members", {
      _csrf,
      org: "default",
      email: "New@Acme.test",
      role: "member",
    });
    expect(added.status).toBe(303);
    const location = added.headers.get("location") ?? "";
    const html = await pageText(await client.get(location));
    expect(html).toContain("Invitation created for new@acme.test as member: send this link to the person.");
    expect(html).not.toMatch(/password" type="text"/);
    const joinLink = /id="invitation-link" type="text" readonly="" value="([^"]+)"/.exec(html)?.[1] ?? "";
    expect(joinLink).toMatch(/^http:\/\/localhost\/dashboard\/join\/[0-9A-Za-z]{43}$/);
    expect(await (await client.get(location)).text()).not.toContain(joinLink);
    // No account exists until the person claims the link with a password of their own.
    expect((await tenancy.users.list("default")).map((u) => u.email)).not.toContain("new@acme.test");
    const person = new Client();
    const joinPath = new URL(joinLink).pathname;
    const joinPage = await person.get(joinPath);
    const joinCsrf = /name="_csrf" value="([^"]+)"/.exec(await joinPage.text())?.[1] ?? "";
    const claimed = await person.post(joinPath, {
      _csrf: joinCsrf,
      password: "my own password",
      confirm: "my own password",
    });
    expect(claimed.status).toBe(303);
    expect(claimed.headers.get("location")).toBe("/dashboard/keys?org=default");
    expect((await person.get("/dashboard/keys")).status).toBe(200);
    expect(await tenancy.members.authenticate("new@acme.test", "my own password")).not.toBeNull();
    expect((await person.get(joinPath)).status).toBe(404);

    const users = await tenancy.users.list("default");
    const ownerId = users.find((u) => u.email === owner.email)?.id ?? "";
    const newId = users.find((u) => u.email === "new@acme.test")?.id ?? "";
    const demoteSelf = await client.post(`/dashboard/members/${ownerId}/role`, {
      _csrf,
      org: "default",
      role: "member",
    });
    expect(demoteSelf.status).toBe(409);
    expect(await demoteSelf.text()).toContain("needs at least one owner");

    const promote = await client.post(`/dashboard/members/${newId}/role`, {
      _csrf,
      org: "default",
      role: "owner",
    });
    expect(promote.status).toBe(303);
    expect((await tenancy.users.list("default")).find((u) => u.id === newId)?.role).toBe("owner");

    const remove = await client.post(`/dashboard/members/${newId}/remove`, { _csrf, org: "default" });
    expect(remove.status).toBe(303);
    expect((await tenancy.users.list("default")).map((u) => u.id)).not.toContain(newId);
    expect(await tenancy.members.authenticate("new@acme.test", "my own password")).toBeNull();
    const actions = (await tenancy.audit.list({ orgName: "default", limit: 4 })).map((e) => e.action);
    expect(actions).toEqual(["member.remove", "member.role", "invitation.claim", "invitation.create"]);
  });

  it("answer an existing and a new email alike; the existing account joins only by accepting with the link", async () => {
    const client = await signedIn(owner.email, owner.password);
    const _csrf = await client.csrf("/dashboard/members");
    const answer = async (email: string) => {
      const res = await client.post("/dashboard/members", { _csrf, org: "default", email });
      expect(res.status).toBe(303);
      const html = await pageText(await client.get(res.headers.get("location") ?? ""));
      const joinLink = /id="invitation-link" type="text" readonly="" value="([^"]+)"/.exec(html)?.[1] ?? "";
      const main = /<main[^>]*>([\s\S]*?)<table>/.exec(html)?.[1] ?? "";
      return { joinLink, text: main.replaceAll(joinLink, "LINK").replaceAll(email, "EMAIL") };
    };
    const existing = await answer("other@other.test");
    const fresh = await answer("nobody-yet@other.test");
    expect(existing.text).toContain("Invitation created for EMAIL as member");
    expect(existing.text).toEqual(fresh.text);
    expect(new URL(existing.joinLink).pathname).toMatch(/^\/dashboard\/join\/[0-9A-Za-z]{43}$/);
    // Nothing changed for the existing account until its holder accepts.
    const other = await signedIn("other@other.test", otherPassword);
    expect((await other.get("/dashboard/keys?org=default")).status).toBe(403);
    const listed = await pageText(await other.get("/dashboard/invitations"));
    expect(listed).toContain("<td>default</td>");
    expect(listed).toContain("accepted only through its link");
    const joinPath = new URL(existing.joinLink).pathname;
    const page = await pageText(await other.get(joinPath));
    expect(page).toContain("Accept and join default");
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
    const accepted = await other.post(`${joinPath}/accept`, { _csrf: csrf });
    expect(accepted.headers.get("location")).toBe("/dashboard/keys?org=default");
    const keys = await (await other.get("/dashboard/keys?org=default")).text();
    expect(keys).toContain("API keys of default");
    expect(keys).toContain('<option value="other">other</option>');
    expect((await other.post(`${joinPath}/accept`, { _csrf: csrf })).status).toBe(404);
    const stored = await store.db.select().from(apiKeys).where(eq(apiKeys.orgId, "nope"));
    expect(stored).toEqual([]);
  });
});

describe("account", () => {
  it("changes the password with the current one; a wrong one changes nothing; other sessions end", async () => {
    await tenancy.users.create({ orgName: "other", email: "pw@other.test", password: "first password" });
    const client = await signedIn("pw@other.test", "first password");
    const elsewhere = await signedIn("pw@other.test", "first password");
    const _csrf = await client.csrf("/dashboard/account");
    const form = {
      _csrf,
      current: "wrong password",
      password: "second password",
      confirm: "second password",
    };
    const wrong = await client.post("/dashboard/account/password", form);
    expect(wrong.status).toBe(400);
    expect(await wrong.text()).toContain("The current password is not correct. Nothing was changed.");
    const mismatch = await client.post("/dashboard/account/password", {
      ...form,
      current: "first password",
      confirm: "x",
    });
    expect(mismatch.status).toBe(400);
    const done = await client.post("/dashboard/account/password", { ...form, current: "first password" });
    expect(done.status).toBe(303);
    expect(await pageText(await client.get(done.headers.get("location") ?? ""))).toContain(
      "Your password was changed.",
    );
    expect((await elsewhere.get("/dashboard/keys")).status).toBe(303);
    expect(await tenancy.members.authenticate("pw@other.test", "first password")).toBeNull();
    expect(await tenancy.members.authenticate("pw@other.test", "second password")).not.toBeNull();
  });
});

describe("security headers", () => {
  const CSP =
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; " +
    "form-action 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'";

  it("sends the same policy on pages, redirects and assets; pages are never cached", async () => {
    const client = new Client();
    const responses = {
      page: await client.get("/dashboard/sign-in"),
      redirect: await client.get("/dashboard/keys"),
      asset: await client.get("/dashboard/assets/dashboard.css"),
    };
    for (const [name, res] of Object.entries(responses)) {
      expect(res.headers.get("content-security-policy"), name).toBe(CSP);
      expect(res.headers.get("x-frame-options"), name).toBe("DENY");
      expect(res.headers.get("x-content-type-options"), name).toBe("nosniff");
      expect(res.headers.get("referrer-policy"), name).toBe("no-referrer");
      // HTTPS-only is the TLS proxy's decision, not the dashboard's.
      expect(res.headers.get("strict-transport-security"), name).toBeNull();
    }
    expect(responses.page.headers.get("cache-control")).toBe("no-store");
    expect(responses.asset.headers.get("cache-control")).toBe("public, max-age=3600");
  });
});
