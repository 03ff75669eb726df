// Wrong admin tokens are throttled per address (issue 12, item 3): counted before the comparison, so a burst of
// guesses gets at most the budget's worth of answers; one budget for the admin API and the operator sign-in.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeEngine } from "../../../test/support/fake-engine.js";
import { FormClient } from "../../../test/support/form-client.js";
import { startTestApp, TEST_ADMIN_TOKEN, type TestApp } from "../../../test/support/test-app.js";
import { OPERATOR_THROTTLE_RULES } from "../dashboard/operator/operator-session.js";

const BUDGET = OPERATOR_THROTTLE_RULES[0]?.failures ?? 0;

let harness: TestApp<FakeEngine>;

beforeAll(async () => {
  harness = await startTestApp({ bootstrap: false });
});
afterAll(async () => {
  await harness?.close();
});

const admin = (authorization?: string) =>
  harness.app.request("/admin/v1/orgs", authorization === undefined ? {} : { headers: { authorization } });

describe("wrong admin tokens", () => {
  it("are not counted when no token was presented at all", async () => {
    for (let i = 0; i < BUDGET * 2; i++) expect((await admin()).status).toBe(401);
    expect((await admin(`Bearer ${TEST_ADMIN_TOKEN}`)).status).toBe(200);
  });

  it("of a burst at once, at most the budget's worth are compared (401); the rest get 429 with retry-after", async () => {
    expect(BUDGET).toBe(5);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => admin(`Bearer hearth-admin-guess-${i}`)),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(BUDGET).fill(401), ...Array(20 - BUDGET).fill(429)]);
    for (const res of answers.filter((r) => r.status === 429)) {
      const body = (await res.json()) as { error: Record<string, unknown> & { message: string } };
      expect(body.error).toMatchObject({ code: "too_many_failed_attempts", type: "requests", param: null });
      expect(body.error.message).toMatch(
        /^Too many wrong admin tokens from your address\. Try again in 15 minutes\.$/,
      );
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(800);
      expect(Number(res.headers.get("retry-after-ms"))).toBeGreaterThan(800_000);
    }
  });

  it("then refuse even the right token, at the admin API and at the operator sign-in (one budget)", async () => {
    expect((await admin(`Bearer ${TEST_ADMIN_TOKEN}`)).status).toBe(429);
    const browser = new FormClient(harness.app);
    const csrf = await browser.csrf("/dashboard/operator/sign-in");
    const signIn = await browser.post("/dashboard/operator/sign-in", {
      _csrf: csrf,
      token: TEST_ADMIN_TOKEN,
    });
    expect(signIn.status).toBe(429);
  });
});
