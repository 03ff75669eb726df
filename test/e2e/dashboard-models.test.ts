// The operator view's models page in the real Chromium against a real `hearth serve`: each model's state, Unload
// and Load buttons that change the server's engine (seen on /health), a model added with the form and removed
// after a confirmation, bad entries refused in words, and POSTs without the CSRF token refused.
// Saves docs/screenshots/operator-models.png.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, newContext, screenshot } from "../support/browser.js";
import { pullModel, SMOLLM2_MODEL } from "../support/models.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
let server: ServerProcess;
let browser: Browser;

beforeAll(async () => {
  server = await startServerProcess({ args: ["--parallel", "2"] });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

async function stateOnServer(id = MODEL): Promise<string | undefined> {
  const health = (await (await fetch(`${server.url}/health`)).json()) as {
    models: { id: string; state?: string }[];
  };
  return health.models.find((m) => m.id === id)?.state;
}

async function operatorModels(page: Page): Promise<void> {
  await page.goto(`${server.url}/dashboard/operator`);
  await page.getByLabel("Admin token").fill(readFileSync(join(server.dataDir, "admin-token"), "utf8").trim());
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Organizations" }).waitFor();
  await page.getByRole("link", { name: "Models" }).click();
  await page.getByRole("heading", { name: "Models", level: 1 }).waitFor();
}

describe("operator models page", () => {
  it("unloads and loads a model with its buttons", async () => {
    const page = await (await newContext(browser)).newPage();
    await operatorModels(page);
    const row = page.locator(`tr[data-model="${MODEL}"]`);
    await expect(row.getAttribute("data-state")).resolves.toBe("ready");
    expect(await row.textContent()).toContain("Serving");

    await row.getByRole("button", { name: `Unload ${MODEL}` }).click();
    await page.getByText(`Unloaded ${MODEL}: a request loads it again.`).waitFor();
    expect(await stateOnServer()).toBe("unloaded");
    await expect(row.getAttribute("data-state")).resolves.toBe("unloaded");
    await screenshot(page, "operator-models");

    await row.getByRole("button", { name: `Load ${MODEL}` }).click();
    await page.getByText(`Loading ${MODEL} on every replica.`).waitFor();
    // The row follows the load by itself, without a reload.
    await page.locator(`tr[data-model="${MODEL}"][data-state="ready"]`).waitFor({ timeout: 60_000 });
    expect(await row.textContent()).toContain("Serving");
    expect(await stateOnServer()).toBe("ready");

    // The same POST without the page's CSRF token changes nothing.
    const forged = await page.request.post(`${server.url}/dashboard/operator/models/unload`, {
      form: { model: MODEL },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);
    expect(await stateOnServer()).toBe("ready");
  });
});

describe("adding and removing a model in the operator view", () => {
  const ADDED = "smol-form";

  it("adds a model with the form, shows it loading to ready, and removes it after a confirmation", async () => {
    // The default model's cached file as a local source: the same GGUF under a second id, nothing downloaded.
    const file = await pullModel(SMOLLM2_MODEL);
    const page = await (await newContext(browser)).newPage();
    await operatorModels(page);
    const form = page.getByRole("region", { name: "Add a model" });
    const addPost = () =>
      page.waitForResponse((r) => r.request().method() === "POST" && r.url().endsWith("/operator/models"));

    // A bad id: refused in words with a 400, the typed values kept, nothing added.
    await form.getByLabel("Id").fill("my model");
    await form.getByLabel("Source").fill(file);
    await form.getByLabel("Context size (optional)").fill("1024");
    const [refused] = await Promise.all([addPost(), form.getByRole("button", { name: "Add model" }).click()]);
    expect(refused.status()).toBe(400);
    await page
      .getByRole("alert")
      .getByText("The model was not added: id: use letters, digits and . _ : / -")
      .waitFor();
    await expect(form.getByLabel("Id").inputValue()).resolves.toBe("my model");
    await expect(form.getByLabel("Id").getAttribute("aria-invalid")).resolves.toBe("true");
    await expect(form.getByLabel("Source").inputValue()).resolves.toBe(file);
    expect(await stateOnServer("my model")).toBeUndefined();

    // No source (the browser's `required` stops a person; a script posting the form is refused in words) and a
    // context size the schema refuses: 400s with the field at fault, never a 500.
    const csrf = await page.locator('input[name="_csrf"]').first().inputValue();
    const post = (form: Record<string, string>) =>
      page.request.post(`${server.url}/dashboard/operator/models`, {
        form: { _csrf: csrf, ...form },
        maxRedirects: 0,
      });
    const noSource = await post({ id: ADDED, source: "" });
    expect(noSource.status()).toBe(400);
    expect(await noSource.text()).toContain("The model was not added: source:");
    const tiny = await post({ id: ADDED, source: file, contextSize: "5" });
    expect(tiny.status()).toBe(400);
    expect(await tiny.text()).toContain("The model was not added: contextSize:");
    const taken = await post({ id: MODEL, source: file });
    expect(taken.status()).toBe(409);
    expect(await taken.text()).toContain("The model was not added:");
    expect(await stateOnServer(ADDED)).toBeUndefined();

    // The good entry: added, then loading in the background until it serves.
    await form.getByLabel("Id").fill(ADDED);
    await form.getByLabel("Source").fill(file);
    await form.getByLabel("Context size (optional)").fill("1024");
    await form.getByLabel("Parallel (optional)").fill("1");
    await form.getByLabel("Keep alive (optional)").fill("10m");
    const [added] = await Promise.all([addPost(), form.getByRole("button", { name: "Add model" }).click()]);
    expect(added.status()).toBe(303);
    await page.getByText(`Added ${ADDED}: loading it on every replica.`).waitFor();
    const row = page.locator(`tr[data-model="${ADDED}"]`);
    expect(await row.textContent()).toContain("(added at run time)");
    // The row follows the load by itself, without a reload; its Remove button (swapped in) still asks first.
    await page.locator(`tr[data-model="${ADDED}"][data-state="ready"]`).waitFor({ timeout: 60_000 });
    expect(await row.textContent()).toContain("Serving");
    expect(await stateOnServer(ADDED)).toBe("ready");

    // Without the page's CSRF token, neither a remove nor an add changes anything.
    const removePath = `${server.url}/dashboard/operator/models/${ADDED}/remove`;
    const forgedRemove = await page.request.post(removePath, { form: {}, maxRedirects: 0 });
    expect(forgedRemove.status()).toBe(403);
    const forgedAdd = await page.request.post(`${server.url}/dashboard/operator/models`, {
      form: { id: "smol-forged", source: file },
      maxRedirects: 0,
    });
    expect(forgedAdd.status()).toBe(403);
    expect(await stateOnServer(ADDED)).toBe("ready");
    expect(await stateOnServer("smol-forged")).toBeUndefined();

    // Remove asks first: Cancel keeps the model, the dialog's button removes it.
    await row.getByRole("button", { name: `Remove ${ADDED}` }).click();
    const dialog = page.getByRole("dialog", { name: "Remove model" });
    await dialog.getByText(`Remove ${ADDED}?`).waitFor();
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "hidden" });
    expect(await stateOnServer(ADDED)).toBe("ready");
    await row.getByRole("button", { name: `Remove ${ADDED}` }).click();
    await dialog.getByRole("button", { name: "Remove model" }).click();
    await page.getByText(`Removed ${ADDED} from every replica.`).waitFor();
    await expect(row.count()).resolves.toBe(0);
    expect(await stateOnServer(ADDED)).toBeUndefined();
    expect(await stateOnServer()).toBe("ready");
  });

  it("asks on a confirmation page without JavaScript", async () => {
    const page = await (await newContext(browser, { javaScriptEnabled: false })).newPage();
    await operatorModels(page);
    await page
      .locator(`tr[data-model="${MODEL}"]`)
      .getByRole("button", { name: `Remove ${MODEL}` })
      .click();
    await page.getByRole("heading", { name: "Remove model", level: 1 }).waitFor();
    await page.getByText(`Remove ${MODEL}?`).waitFor();
    // Cancel leads back to the list with nothing changed.
    await page.getByRole("link", { name: "Cancel" }).click();
    await page.getByRole("heading", { name: "Models", level: 1 }).waitFor();
    expect(await stateOnServer()).toBe("ready");
  });
});
