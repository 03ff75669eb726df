// /metrics behind a token (issue 12, item 9): with metrics.token set, a scrape must present it as a Bearer token;
// unset, /metrics stays open as before.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeEngine } from "../../test/support/fake-engine.js";
import { startTestApp, TEST_ADMIN_TOKEN, type TestApp } from "../../test/support/test-app.js";

const METRICS_TOKEN = "scrape-me-0123456789";

describe("/metrics with metrics.token set", () => {
  let harness: TestApp<FakeEngine>;
  beforeAll(async () => {
    harness = await startTestApp({ metricsToken: METRICS_TOKEN, bootstrap: false });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const scrape = (authorization?: string) =>
    harness.app.request("/metrics", authorization === undefined ? {} : { headers: { authorization } });

  it("answers 401 with OpenAI's error body without the token, with a wrong one, or with another secret", async () => {
    for (const authorization of [
      undefined,
      "Bearer wrong",
      `Bearer ${METRICS_TOKEN}x`,
      `Bearer ${TEST_ADMIN_TOKEN}`,
      `Basic ${Buffer.from(`metrics:${METRICS_TOKEN}`).toString("base64")}`,
    ]) {
      const res = await scrape(authorization);
      expect(res.status, authorization).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="metrics"');
      expect(await res.json()).toEqual({
        error: {
          message: "Missing or invalid metrics token.",
          type: "invalid_request_error",
          param: null,
          code: "invalid_metrics_token",
        },
      });
    }
  });

  it("serves the metrics to a scrape with the token", async () => {
    const res = await scrape(`Bearer ${METRICS_TOKEN}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await res.text()).toContain("hearth_");
  });
});

describe("/metrics without metrics.token", () => {
  it("stays open", async () => {
    const harness = await startTestApp({ bootstrap: false });
    try {
      expect((await harness.app.request("/metrics")).status).toBe(200);
    } finally {
      await harness.close();
    }
  });
});
