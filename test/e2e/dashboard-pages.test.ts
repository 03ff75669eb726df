// Usage, Models, Limits and the operator view in the real Chromium against a real `hearth serve` on PostgreSQL with
// Redis limits: the operator signs in with the admin token, creates an org, grants a model and sets limits; the
// first owner's requests through the official openai client then show on Usage and Limits, and a request over
// the limit set in the page gets 429. Saves docs/screenshots/{operator,usage,models,limits}.png.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { APIError } from "openai";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, newContext, screenshot } from "../support/browser.js";
import { openaiClient, type ServerProcess, startServerProcess } from "../support/server-process.js";
import { type Backend, postgresBackend } from "../support/store-backends.js";

const MODEL = "smollm2-135m-instruct";
const REDIS_URL = process.env.HEARTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
let backend: Backend;
let server: ServerProcess;
let browser: Browser;
let adminToken: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  backend = await postgresBackend();
  server = await startServerProcess({
    env: { HEARTH_DATABASE_URL: backend.options.databaseUrl ?? "", HEARTH_REDIS_URL: REDIS_URL },
  });
  adminToken = readFileSync(join(server.dataDir, "admin-token"), "utf8").trim();
  browser = await launchBrowser();
});

afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  await browser?.close();
  await server?.stop();
  await backend?.cleanup();
});

async function freshPage(): Promise<Page> {
  const context = await newContext(browser);
  contexts.push(context);
  return context.newPage();
}

async function signIn(page: Page): Promise<void> {
  await page.goto(`${server.url}/dashboard`);
  await page.getByLabel("Email").fill(server.ownerEmail);
  await page.getByLabel("Password").fill(server.ownerPassword);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
}

async function operatorSignIn(page: Page, token: string): Promise<void> {
  await page.getByLabel("Admin token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
}

async function admin(method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${server.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

function chat(key: string, maxTokens: number, user?: string) {
  return openaiClient(server, key).chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "Name a colour." }],
    max_tokens: maxTokens,
    ...(user === undefined ? {} : { user }),
  });
}

/** The end user one of the Usage page's requests is sent for (the page's End user filter finds it). */
const END_USER = "end-user-5e1f";

const grouped = (n: number) => n.toLocaleString("en-US");

describe("operator view", () => {
  it("refuses a wrong token in words, then creates an org, grants a model and sets limits that the API enforces", async () => {
    const page = await freshPage();
    await page.goto(`${server.url}/dashboard/operator`);
    expect(new URL(page.url()).pathname).toBe("/dashboard/operator/sign-in");
    const outputBefore = server.output().length;

    await operatorSignIn(page, "hearth-admin-not-the-token");
    await page.getByRole("alert").filter({ hasText: "That is not this server's admin token." }).waitFor();
    // From the keyboard: the field has focus on arrival.
    await page.keyboard.type(adminToken);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Organizations" }).waitFor();
    expect(page.url()).not.toContain(adminToken);

    // Limits for the first owner's org (checked on its Limits page below).
    const defaults = page.getByRole("region", { name: "default", exact: true });
    await defaults.getByLabel("Requests per minute (RPM)").fill("100");
    await defaults.getByLabel("Tokens per minute (TPM)").fill("50000");
    await defaults.getByRole("button", { name: "Save limits" }).click();
    await page
      .getByText("Saved the limits of default: 100 requests per minute, 50,000 tokens per minute.")
      .waitFor();

    const create = page.getByRole("region", { name: "Create an organization" });
    await create.getByLabel("Name").fill("acme");
    await create.getByRole("button", { name: "Create organization" }).click();
    await page.getByText("Created the organization acme.").waitFor();
    const acme = page.getByRole("region", { name: "acme", exact: true });
    await acme.getByText("No models granted").waitFor();
    await acme.getByLabel("Model to grant to acme").selectOption(MODEL);
    await acme.getByRole("button", { name: "Grant" }).click();
    await page.getByText(`Granted ${MODEL} to acme`).waitFor();
    await acme.getByLabel("Requests per minute (RPM)").fill("1");
    await acme.getByRole("button", { name: "Save limits" }).click();
    await page
      .getByText("Saved the limits of acme: 1 request per minute, unlimited tokens per minute.")
      .waitFor();
    expect(await acme.getByRole("button", { name: "Revoke" }).count()).toBe(1);
    await page.evaluate("window.scrollTo(0, 0)");
    await screenshot(page, "operator");

    const audit = (await (await admin("GET", "/audit?org=acme")).json()) as {
      data: { action: string; actor: string }[];
    };
    expect(audit.data.map((e) => [e.action, e.actor])).toEqual([
      ["limits.set", "admin"],
      ["grant", "admin"],
      ["org.create", "admin"],
    ]);

    // The API enforces what the page set: the second request in the minute is refused.
    const key = (await (await admin("POST", "/orgs/acme/keys", { name: "limited" })).json()) as {
      key: string;
    };
    await chat(key.key, 2);
    const refused = await chat(key.key, 2).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(429);
    expect((refused as APIError).message).toContain("requests per min (RPM)");

    expect(server.output()).not.toContain(adminToken);
    expect(server.output().slice(outputBefore)).not.toContain("hearth-admin-not-the-token");
  });
});

describe("the first owner's Usage, Models and Limits pages", () => {
  const used = { requests: 0, prompt: 0, completion: 0 };
  /** The prompt and completion tokens of the one request sent with END_USER. */
  const byEndUser = { prompt: 0, completion: 0 };

  it("Limits shows the limits set by the operator and the requests just made", async () => {
    for (const maxTokens of [3, 5, 8]) {
      const completion = await chat(server.apiKey, maxTokens, maxTokens === 5 ? END_USER : undefined);
      used.requests += 1;
      used.prompt += completion.usage?.prompt_tokens ?? 0;
      used.completion += completion.usage?.completion_tokens ?? 0;
      if (maxTokens === 5) {
        byEndUser.prompt = completion.usage?.prompt_tokens ?? 0;
        byEndUser.completion = completion.usage?.completion_tokens ?? 0;
      }
    }
    expect(used.prompt).toBeGreaterThan(0);

    const page = await freshPage();
    await signIn(page);
    await page.getByRole("navigation").getByRole("link", { name: "Limits" }).click();
    await page.getByRole("heading", { name: "Limits" }).waitFor();
    const requests = page.getByRole("row", { name: /Requests per minute/ });
    const tokens = page.getByRole("row", { name: /Tokens per minute/ });
    await requests.getByRole("cell", { name: "100", exact: true }).waitFor();
    await tokens.getByRole("cell", { name: "50,000", exact: true }).waitFor();
    const usedRequests = Number(await requests.locator("[data-used]").getAttribute("data-used"));
    const usedTokens = Number(await tokens.locator("[data-used]").getAttribute("data-used"));
    // The window is a minute long: a slow machine may have opened a new one since, never with more than was sent.
    expect(usedRequests).toBeGreaterThan(0);
    expect(usedRequests).toBeLessThanOrEqual(used.requests);
    expect(usedTokens).toBeGreaterThan(0);
    expect(await requests.getByText(/Resets in \d+ (seconds?|minute)/).count()).toBe(1);
    await screenshot(page, "limits");
  });

  it("Usage shows the token totals the responses reported, a chart, and the key", async () => {
    const page = await freshPage();
    await signIn(page);
    await page.getByRole("navigation").getByRole("link", { name: "Usage" }).click();
    await page.getByRole("heading", { name: "Usage", exact: true }).waitFor();
    // Records are written within a quarter second of each request's end; reload until they are all in.
    const total = page.locator('[data-total="requests"]');
    for (let i = 0; i < 20 && (await total.textContent()) !== grouped(used.requests); i++) {
      await new Promise((r) => setTimeout(r, 250));
      await page.reload();
    }
    expect(await total.textContent()).toBe(grouped(used.requests));
    expect(await page.locator('[data-total="prompt_tokens"]').textContent()).toBe(grouped(used.prompt));
    expect(await page.locator('[data-total="completion_tokens"]').textContent()).toBe(
      grouped(used.completion),
    );
    expect(await page.locator('[data-total="total_tokens"]').textContent()).toBe(
      grouped(used.prompt + used.completion),
    );
    await page.getByRole("img", { name: "Tokens per day and model" }).waitFor();
    const keyRow = page.getByRole("row", { name: new RegExp(`bootstrap sk-…${server.apiKey.slice(-4)}`) });
    expect(await keyRow.getByRole("cell").nth(1).textContent()).toBe(grouped(used.requests));
    const modelRow = page.getByRole("row", { name: new RegExp(`^${MODEL}`) });
    expect(await modelRow.count()).toBe(1);

    // The period selector from the keyboard: last 30 days gives the same totals.
    await page.getByLabel("Period", { exact: true }).focus();
    await page.getByLabel("Period", { exact: true }).selectOption("30d");
    await page.getByRole("button", { name: "Show usage" }).focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(/period=30d/);
    expect(await page.locator('[data-total="prompt_tokens"]').textContent()).toBe(grouped(used.prompt));
    // The End user filter: only the request sent with that user.
    await page.getByLabel("End user", { exact: true }).fill(END_USER);
    await page.getByRole("button", { name: "Show usage" }).click();
    await page.waitForURL(new RegExp(`user=${END_USER}`));
    expect(await total.textContent()).toBe("1");
    expect(await page.locator('[data-total="completion_tokens"]').textContent()).toBe(
      grouped(byEndUser.completion),
    );
    expect(await page.locator('[data-total="total_tokens"]').textContent()).toBe(
      grouped(byEndUser.prompt + byEndUser.completion),
    );
    expect(await page.getByLabel("End user", { exact: true }).inputValue()).toBe(END_USER);
    // A wrong date is refused in words.
    await page.goto(`${server.url}/dashboard/usage?period=dates&since=2031-02-30`);
    await page.getByRole("alert").filter({ hasText: '"2031-02-30" is not a date' }).waitFor();
    await page.goto(`${server.url}/dashboard/usage`);
    await screenshot(page, "usage");
  });

  it("Models shows the model with its context length, as /v1/models reports it", async () => {
    const listed = await openaiClient(server).models.list();
    const model = listed.data.find((m) => m.id === MODEL) as { context_length?: number } | undefined;
    expect(model?.context_length).toBeGreaterThan(0);
    const page = await freshPage();
    await signIn(page);
    await page.getByRole("navigation").getByRole("link", { name: "Models" }).click();
    const row = page.getByRole("row", { name: new RegExp(`^${MODEL}`) });
    await row.getByRole("cell", { name: `${grouped(model?.context_length ?? 0)} tokens` }).waitFor();
    await screenshot(page, "models");
  });
});
