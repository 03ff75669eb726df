// The first-start key expires (issue 12, item 9): verified with a moved clock through the real key check.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeEngine } from "../../test/support/fake-engine.js";
import { startTestApp, type TestApp } from "../../test/support/test-app.js";
import { DEFAULT_OWNER_EMAIL } from "./bootstrap.js";

const DAY_MS = 24 * 60 * 60 * 1000;

describe("the bootstrap key", () => {
  let harness: TestApp<FakeEngine>;
  /** Added to the services' clock: expiry is tested by moving time, not by waiting. */
  let offset = 0;

  beforeAll(async () => {
    harness = await startTestApp({ bootstrap: false, tenancy: { now: () => Date.now() + offset } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it("works until its lifetime is over, then is refused like any expired key", async () => {
    const modelIds = harness.config.modelIds;
    const first = await harness.services.tenancy.bootstrap(modelIds, {
      ownerEmail: DEFAULT_OWNER_EMAIL,
      keyLifetimeMs: 7 * DAY_MS,
    });
    expect(first).not.toBeNull();
    const key = first?.key ?? "";
    const expiresAt = first?.keyExpiresAt?.getTime() ?? 0;
    expect(expiresAt - Date.now()).toBeGreaterThan(7 * DAY_MS - 60_000);
    expect(expiresAt - Date.now()).toBeLessThanOrEqual(7 * DAY_MS);
    const [listed] = await harness.services.tenancy.keys.list("default");
    expect(listed?.expiresAt?.getTime()).toBe(expiresAt);

    const body = { model: modelIds[0], messages: [{ role: "user", content: "hi" }] };
    expect((await harness.chat(body, key)).status).toBe(200);
    offset = 7 * DAY_MS - 60_000;
    expect((await harness.chat(body, key)).status).toBe(200);
    offset = 7 * DAY_MS + 1000;
    const refused = await harness.chat(body, key);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
  });
});
