// The operator view's models page in the real Chromium against a real `hearth serve`: each model's state, Unload
// and Load buttons that change the server's engine (seen on /health), and a POST without the CSRF token refused.
// Saves docs/screenshots/operator-models.png.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, newContext, screenshot } from "../support/browser.js";
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

async function stateOnServer(): Promise<string | undefined> {
  const health = (await (await fetch(`${server.url}/health`)).json()) as {
    models: { id: string; state?: string }[];
  };
  return health.models.find((m) => m.id === MODEL)?.state;
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
    for (let i = 0; i < 300 && (await stateOnServer()) !== "ready"; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(await stateOnServer()).toBe("ready");
    await page.reload();
    await expect(row.getAttribute("data-state")).resolves.toBe("ready");

    // The same POST without the page's CSRF token changes nothing.
    const forged = await page.request.post(`${server.url}/dashboard/operator/models/unload`, {
      form: { model: MODEL },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);
    expect(await stateOnServer()).toBe("ready");
  });
});
