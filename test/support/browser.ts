// The real Chromium of the machine (Debian's /usr/bin/chromium) driven by playwright-core, for dashboard tests.
// No browser is downloaded: CI installs the distribution package when `chromium` is missing (.ci/run).
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";

/** The tracked screenshots of docs/dashboard.md. */
export const DOCS_SCREENSHOT_DIR = join(import.meta.dirname, "..", "..", "docs", "screenshots");

/**
 * Where the tests' screenshots go: docs/screenshots/ only when HEARTH_UPDATE_SCREENSHOTS=1 asks to refresh the
 * tracked ones; else a folder of the temp dir (overwritten each run), so that `npm test` rewrites no tracked file.
 */
export function screenshotDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.HEARTH_UPDATE_SCREENSHOTS === "1" ? DOCS_SCREENSHOT_DIR : join(tmpdir(), "hearth-screenshots");
}

export const VIEWPORT = { width: 1280, height: 800 };

/** The Chromium binary: HEARTH_TEST_CHROMIUM, else `chromium` on PATH. */
export function chromiumPath(): string {
  const configured = process.env.HEARTH_TEST_CHROMIUM;
  if (configured !== undefined && configured !== "") return configured;
  try {
    return execFileSync("which", ["chromium"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error("Chromium is not installed: apt-get install -y chromium (or set HEARTH_TEST_CHROMIUM)");
  }
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
    ],
  });
}

/** A fresh profile (no cookies) at the screenshot size; `javaScriptEnabled: false` checks the no-JS paths. */
export function newContext(
  browser: Browser,
  options: { javaScriptEnabled?: boolean } = {},
): Promise<BrowserContext> {
  return browser.newContext({ viewport: VIEWPORT, ...options });
}

/** Saves <screenshotDir()>/<name>.png of the viewport (small files; the pages fit in 1280×800). */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = screenshotDir();
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`) });
}
