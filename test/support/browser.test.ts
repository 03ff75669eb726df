// The browser tests' screenshots stay out of the tracked docs/screenshots/ unless HEARTH_UPDATE_SCREENSHOTS=1.
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { DOCS_SCREENSHOT_DIR, screenshotDir } from "./browser.js";

const REPO = join(import.meta.dirname, "..", "..");

describe("screenshotDir", () => {
  it("is outside the repository by default, so a test run rewrites no tracked file", () => {
    expect(relative(REPO, screenshotDir({})).startsWith("..")).toBe(true);
    expect(relative(REPO, screenshotDir({ HEARTH_UPDATE_SCREENSHOTS: "0" })).startsWith("..")).toBe(true);
  });

  it("is docs/screenshots/ when HEARTH_UPDATE_SCREENSHOTS=1 asks to refresh the tracked ones", () => {
    expect(screenshotDir({ HEARTH_UPDATE_SCREENSHOTS: "1" })).toBe(DOCS_SCREENSHOT_DIR);
    expect(relative(REPO, DOCS_SCREENSHOT_DIR)).toBe(join("docs", "screenshots"));
  });
});
