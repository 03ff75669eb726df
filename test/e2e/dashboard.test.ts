// The dashboard in the real Chromium against a real `hearth serve` on PostgreSQL: sign-in, keys used through the
// official openai client, revocation, reloads that re-submit nothing, invitations (no account pre-hijacking),
// password changes, org isolation, CSRF, session expiry and sign-in throttling.
// Saves docs/screenshots/*.png of each page.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { APIError } from "openai";
import pg from "pg";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, newContext, screenshot } from "../support/browser.js";
import { openaiClient, type ServerProcess, startServerProcess } from "../support/server-process.js";
import { type Backend, postgresBackend } from "../support/store-backends.js";

const MODEL = "smollm2-135m-instruct";
let backend: Backend;
let server: ServerProcess;
let browser: Browser;
const contexts: BrowserContext[] = [];
const secretsSeen: string[] = [];

beforeAll(async () => {
  backend = await postgresBackend();
  server = await startServerProcess({ env: { HEARTH_DATABASE_URL: backend.options.databaseUrl ?? "" } });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await backend?.cleanup();
});

async function freshPage(options: { javaScriptEnabled?: boolean } = {}): Promise<Page> {
  const context = await newContext(browser, options);
  contexts.push(context);
  return context.newPage();
}

async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.goto(`${server.url}/dashboard`);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
}

/** The admin API with the server's admin token (what `hearth orgs/users` use). */
async function admin(method: string, path: string, body?: unknown): Promise<Response> {
  const token = readFileSync(join(server.dataDir, "admin-token"), "utf8").trim();
  return fetch(`${server.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function createKeyInPage(page: Page, name: string): Promise<string> {
  await page.getByRole("button", { name: "Create API key" }).click();
  await page.getByLabel("Name").fill(name);
  await page.getByRole("button", { name: "Create", exact: true }).click();
  const secret = await page.getByLabel("Secret key").inputValue();
  secretsSeen.push(secret);
  return secret;
}

/** Invites `email` from the Members page; the link shown once. */
async function invite(page: Page, email: string): Promise<string> {
  await page.getByRole("navigation").getByRole("link", { name: "Members" }).click();
  await page.getByLabel("Email").fill(email);
  await page.getByRole("button", { name: "Add member" }).click();
  const link = await page.getByLabel("Invitation link").inputValue();
  secretsSeen.push(link.slice(link.lastIndexOf("/") + 1));
  return link;
}

/** On an invitation's page: a new account with `password`, signed in on its API keys. */
async function claim(page: Page, password: string): Promise<void> {
  await page.getByLabel("Choose a password").fill(password);
  await page.getByLabel("Repeat the password").fill(password);
  await page.getByRole("button", { name: "Create account and join" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
}

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (err) {
    if (err instanceof APIError && err.status !== undefined) return err.status;
    throw err;
  }
}

function chat(key: string) {
  return openaiClient(server, key).chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "Say hi" }],
    max_tokens: 4,
  });
}

describe("API keys in the browser", () => {
  it("sign in, create a key, use it through the openai client, revoke it in the page, then it is refused", async () => {
    const page = await freshPage();
    await page.goto(`${server.url}/dashboard`);
    expect(new URL(page.url()).pathname).toBe("/dashboard/sign-in");
    await screenshot(page, "sign-in");
    await signIn(page, server.ownerEmail, server.ownerPassword);
    for (const label of ["API keys", "Usage", "Models", "Limits", "Members"]) {
      await expect(page.getByRole("navigation").getByRole("link", { name: label }).count()).resolves.toBe(1);
    }

    const secret = await createKeyInPage(page, "browser test");
    expect(secret).toMatch(/^sk-[A-Za-z0-9]{43}$/);
    expect(await page.getByLabel("Secret key").getAttribute("readonly")).not.toBeNull();
    expect(await page.getByText("You won't see it again").count()).toBe(1);
    expect(page.url()).not.toContain(secret);
    await screenshot(page, "api-keys-created");

    const completion = await openaiClient(server, secret)
      .chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Say hi" }],
        max_tokens: 4,
      })
      .withResponse();
    expect(completion.response.status).toBe(200);

    const row = page.getByRole("row").filter({ hasText: "browser test" });
    await expect(row.getByRole("cell", { name: `sk-…${secret.slice(-4)}` }).count()).resolves.toBe(1);
    await row.getByRole("button", { name: "Revoke" }).click();
    const confirm = page.getByRole("dialog");
    await confirm.getByRole("button", { name: "Revoke key" }).waitFor();
    await screenshot(page, "revoke-confirmation");
    await confirm.getByRole("button", { name: "Revoke key" }).click();
    await page.getByText("Requests with it are now refused").waitFor();
    expect(await row.getByText("revoked").count()).toBe(1);
    expect(await statusOf(chat(secret))).toBe(401);
  });

  it("a reload after creating a key creates no second key and shows no secret", async () => {
    const page = await freshPage();
    await signIn(page, server.ownerEmail, server.ownerPassword);
    const secret = await createKeyInPage(page, "reload test");
    const rows = page.getByRole("row").filter({ hasText: "reload test" });
    expect(await rows.count()).toBe(1);
    await page.reload();
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    expect(await rows.count()).toBe(1);
    expect(await page.getByLabel("Secret key").count()).toBe(0);
    expect(await page.content()).not.toContain(secret);
    await page.goBack();
    await page.goForward();
    expect(await rows.count()).toBe(1);
    const keys = (await (await admin("GET", "/orgs/default/keys")).json()) as { data: { name: string }[] };
    expect(keys.data.filter((k) => k.name === "reload test")).toHaveLength(1);
  });

  it("works without JavaScript: a create page and a confirmation page instead of dialogs", async () => {
    const page = await freshPage({ javaScriptEnabled: false });
    await signIn(page, server.ownerEmail, server.ownerPassword);
    const secret = await createKeyInPage(page, "no js");
    expect(new URL(page.url()).pathname).toBe("/dashboard/keys");
    const row = page.getByRole("row").filter({ hasText: "no js" });
    await row.getByRole("button", { name: "Revoke" }).click();
    expect(new URL(page.url()).pathname).toMatch(/^\/dashboard\/keys\/key_\w+\/revoke$/);
    await page.getByRole("button", { name: "Revoke key" }).click();
    await page.getByText("Requests with it are now refused").waitFor();
    expect(await statusOf(chat(secret))).toBe(401);
  });

  it("can be driven from the keyboard", async () => {
    const page = await freshPage();
    await page.goto(`${server.url}/dashboard/sign-in`);
    // The Email field has focus on arrival (autofocus, which the browser applies at its next rendering step, after
    // the load event on a busy machine: wait for it rather than type into nothing).
    await page.waitForFunction(`document.activeElement?.id === "email"`, undefined, { timeout: 10_000 });
    await page.keyboard.type(server.ownerEmail);
    await page.keyboard.press("Tab");
    await page.keyboard.type(server.ownerPassword);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await page.keyboard.press("Tab");
    expect(await page.locator(":focus").textContent()).toBe("Skip to content");
  });
});

describe("members and organizations", () => {
  it("an owner invites a member, who claims the link with their own password and manages the org's keys", async () => {
    const page = await freshPage();
    await signIn(page, server.ownerEmail, server.ownerPassword);
    const link = await invite(page, "dev@example.test");
    await screenshot(page, "members");

    const dev = await freshPage();
    await dev.goto(link);
    await screenshot(dev, "join");
    await claim(dev, "dev password 1");
    const secret = await createKeyInPage(dev, "dev key");
    expect(await statusOf(chat(secret))).toBe(200);
    await dev.getByRole("navigation").getByRole("link", { name: "Members" }).click();
    await dev.getByText("Only owners of default can add members").waitFor();
    expect(await dev.getByRole("button", { name: "Add member" }).count()).toBe(0);
    // The link was single-use.
    await dev.goto(link);
    await dev.getByText("This invitation link is not valid").waitFor();
  });

  it("pre-hijacking: org A's owner invites (and even claims) the victim's email; org B's invitation still needs the victim", async () => {
    expect((await admin("POST", "/orgs", { name: "bravo", models: [MODEL] })).status).toBe(201);
    const bravo = { email: "owner@bravo.test", password: "bravo owner pw 1" };
    expect((await admin("POST", "/orgs/bravo/users", { ...bravo, role: "owner" })).status).toBe(201);
    const ownerA = await freshPage();
    await signIn(ownerA, server.ownerEmail, server.ownerPassword);
    const ownerB = await freshPage();
    await signIn(ownerB, bravo.email, bravo.password);

    // The same words for an email with an account (bravo's owner) and one without (the victim's).
    const existing = await invite(ownerA, bravo.email);
    const existingNotice = await ownerA.getByRole("status").first().textContent();
    const linkA = await invite(ownerA, "victim@mail.test");
    const newNotice = await ownerA.getByRole("status").first().textContent();
    expect(existingNotice?.replace(bravo.email, "E")).toBe(newNotice?.replace("victim@mail.test", "E"));
    expect(new URL(existing).pathname).toMatch(/^\/dashboard\/join\/[0-9A-Za-z]{43}$/);
    expect(new URL(linkA).pathname).toMatch(/^\/dashboard\/join\/[0-9A-Za-z]{43}$/);
    expect(await ownerA.getByLabel(/password/i).count()).toBe(0);
    const linkB = await invite(ownerB, "victim@mail.test");

    // Worst case: org A's owner claims their own link, so they hold an account for the victim's email.
    const squatter = await freshPage();
    await squatter.goto(linkA);
    await claim(squatter, "squatter pw 123");
    await squatter.getByRole("navigation").getByRole("link", { name: "Invitations" }).click();
    await squatter.getByRole("cell", { name: "bravo", exact: true }).waitFor();
    await screenshot(squatter, "invitations");
    expect(await squatter.getByRole("button", { name: /Accept/ }).count()).toBe(0);
    await squatter.goto(`${server.url}/dashboard/keys?org=bravo`);
    await squatter.getByText("You are not a member of the organization").waitFor();

    // The victim's link: it cannot be claimed over the squatted account, and org B gained no member.
    const victim = await freshPage();
    await victim.goto(linkB);
    await victim.getByLabel("Choose a password").fill("victim pw 1234");
    await victim.getByLabel("Repeat the password").fill("victim pw 1234");
    await victim.getByRole("button", { name: "Create account and join" }).click();
    await victim.getByText("There is already a Hearth account for victim@mail.test").waitFor();
    const members = (await (await admin("GET", "/orgs/bravo/users")).json()) as { data: { email: string }[] };
    expect(members.data.map((m) => m.email)).toEqual([bravo.email]);
  });

  it("an existing account joins a second org by accepting its link while signed in", async () => {
    const owner = await freshPage();
    await signIn(owner, server.ownerEmail, server.ownerPassword);
    const link = await invite(owner, "owner@bravo.test");
    const page = await freshPage();
    await page.goto(link);
    await page.getByRole("link", { name: "Sign in as owner@bravo.test" }).click();
    await page.getByLabel("Email").fill("owner@bravo.test");
    await page.getByLabel("Password").fill("bravo owner pw 1");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("button", { name: "Accept and join default" }).click();
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    expect(new URL(page.url()).searchParams.get("org")).toBe("default");
    expect(await page.getByLabel("Organization").inputValue()).toBe("default");
  });

  it("a member of another org sees none of default's keys and cannot revoke one with a forged form", async () => {
    expect((await admin("POST", "/orgs", { name: "other", models: [MODEL] })).status).toBe(201);
    const created = await admin("POST", "/orgs/other/users", {
      email: "eve@other.test",
      password: "eve password 1",
    });
    expect(created.status).toBe(201);
    const target = (await (await admin("POST", "/orgs/default/keys", { name: "target" })).json()) as {
      id: string;
      key: string;
    };
    secretsSeen.push(target.key);

    const page = await freshPage();
    await signIn(page, "eve@other.test", "eve password 1");
    expect(await page.content()).not.toContain(target.id);
    expect(await page.getByText("browser test").count()).toBe(0);
    const csrf = await page.locator('input[name="_csrf"]').first().inputValue();
    const request = page.context().request;
    const forged = await request.post(`${server.url}/dashboard/keys/${target.id}/revoke`, {
      form: { _csrf: csrf, org: "other" },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(404);
    expect(await forged.text()).toContain("There is no such API key in the organization");
    const foreign = await request.post(`${server.url}/dashboard/keys/${target.id}/revoke`, {
      form: { _csrf: csrf, org: "default" },
      maxRedirects: 0,
    });
    expect(foreign.status()).toBe(403);
    expect(await foreign.text()).toContain("You are not a member of the organization");
    expect(await statusOf(chat(target.key))).toBe(200);
  });
});

describe("protections", () => {
  it("refuses a change without or with a wrong CSRF token with a 403 in words", async () => {
    const page = await freshPage();
    await signIn(page, server.ownerEmail, server.ownerPassword);
    const request = page.context().request;
    for (const form of [{ name: "forged" }, { name: "forged", _csrf: "not-the-token" }]) {
      const res = await request.post(`${server.url}/dashboard/keys`, { form, maxRedirects: 0 });
      expect(res.status()).toBe(403);
      expect(await res.text()).toContain("its security token is missing or wrong. Nothing was changed.");
    }
    await page.reload();
    expect(await page.getByText("forged").count()).toBe(0);
  });

  it("ends a session whose time is up (expires_at moved into the past in PostgreSQL)", async () => {
    const page = await freshPage();
    await signIn(page, server.ownerEmail, server.ownerPassword);
    const db = new pg.Client({ connectionString: backend.options.databaseUrl });
    await db.connect();
    try {
      await db.query("update sessions set expires_at = now() - interval '1 second'");
    } finally {
      await db.end();
    }
    await page.reload();
    expect(new URL(page.url()).pathname).toBe("/dashboard/sign-in");
    await page.getByText("Your session has expired. Please sign in again.").waitFor();
  });

  it("throttles sign-in after too many wrong passwords, refusing even the right one", async () => {
    const email = "slow@example.test";
    const password = "right password 1";
    expect((await admin("POST", "/orgs/default/users", { email, password })).status).toBe(201);
    const page = await freshPage();
    await page.goto(`${server.url}/dashboard/sign-in`);
    for (let i = 0; i < 5; i++) {
      await page.getByLabel("Email").fill(email);
      await page.getByLabel("Password").fill(`wrong password ${i}`);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByText("Incorrect email or password.").waitFor();
    }
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("Too many failed sign-in attempts").waitFor();
    expect(new URL(page.url()).pathname).toBe("/dashboard/sign-in");
  });

  it("a signed-in user changes their password with the current one; the old one stops working", async () => {
    const email = "change@example.test";
    expect((await admin("POST", "/orgs/default/users", { email, password: "first password 1" })).status).toBe(
      201,
    );
    const page = await freshPage();
    await signIn(page, email, "first password 1");
    await page.getByRole("navigation").getByRole("link", { name: "Account" }).click();
    await screenshot(page, "account");
    await page.getByLabel("Current password").fill("first password 1");
    await page.getByLabel("New password").fill("second password 2");
    await page.getByLabel("Repeat the password").fill("second password 2");
    await page.getByRole("button", { name: "Change password" }).click();
    await page.getByText("Your password was changed.").waitFor();
    const again = await freshPage();
    await again.goto(`${server.url}/dashboard/sign-in`);
    await again.getByLabel("Email").fill(email);
    await again.getByLabel("Password").fill("first password 1");
    await again.getByRole("button", { name: "Sign in" }).click();
    await again.getByText("Incorrect email or password.").waitFor();
    await signIn(again, email, "second password 2");
  });

  it("never writes a secret, password or session cookie to the logs", async () => {
    const cookies = (await Promise.all(contexts.map((c) => c.cookies()))).flat().map((c) => c.value);
    const logs = server.output();
    for (const secret of [...secretsSeen, ...cookies]) {
      if (secret.length >= 16)
        expect(logs.includes(secret), `${secret.slice(0, 4)}… in the logs`).toBe(false);
    }
    expect(logs.split(server.ownerPassword)).toHaveLength(2); // printed once at first start, on purpose
  });
});
