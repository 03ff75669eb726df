// Usage, Models, Limits and the operator view in memory (app.request on the whole app, PGlite, the in-memory rate
// limiter): what each page shows, periods and errors in words, org isolation, the operator's sign-in, CSRF and
// audited changes. The same flows run in the real browser against a real server in test/e2e/dashboard-pages.test.ts.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeEngine } from "../../../test/support/fake-engine.js";
import { FormClient, pageText, type RequestTarget } from "../../../test/support/form-client.js";
import { startTestApp, type TestApp } from "../../../test/support/test-app.js";
import type { RateLimiter } from "../../limits/types.js";
import type { Store } from "../../store/open-store.js";
import { sessions, usageRecords } from "../../store/schema.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import type { UsageQueries } from "../../usage/queries.js";
import { createDashboardApp } from "./app.js";
import { createOperatorThrottle } from "./operator/operator-session.js";
import { parseLimit } from "./operator/orgs.js";
import { durationInWords } from "./pages/limits.js";
import { loadUsageReport, parseUsagePeriod } from "./pages/usage-report.js";

const ADMIN_TOKEN = "hearth-admin-test-token-0123456789";
const MODELS = [
  { id: "tiny", contextSize: 2048, created: 0 },
  { id: "small", contextSize: 8192, created: 0 },
  { id: "unused", contextSize: 512, created: 0 },
];
const DAY = 86_400_000;

let harness: TestApp<FakeEngine>;
let store: Store;
let tenancy: Tenancy;
let limiter: RateLimiter;
let usage: UsageQueries;
let app: RequestTarget;
const noOperatorApp = new Hono();
let owner: { email: string; password: string };
let defaultOrgId: string;
const keyIds: { ci: string; web: string; ciLast4: string; webLast4: string } = {
  ci: "",
  web: "",
  ciLast4: "",
  webLast4: "",
};
const now = Date.now();

beforeAll(async () => {
  // The whole app; the fake engine reports the models (ids and context sizes) to the Models page.
  harness = await startTestApp({
    models: MODELS.map(({ id, contextSize }) => ({ id, contextSize })),
    adminToken: ADMIN_TOKEN,
    app: {
      dashboard: {
        operatorThrottle: createOperatorThrottle([{ per: "address", failures: 3, windowSeconds: 1 }]),
      },
    },
    bootstrap: false,
  });
  ({ store, app } = harness);
  ({ tenancy, limiter, usageQueries: usage } = harness.services);
  const boot = await tenancy.bootstrap(["tiny", "small"], { ownerEmail: "owner@hearth.localhost" });
  owner = boot?.owner ?? { email: "", password: "" };
  defaultOrgId = (await tenancy.orgs.getByName("default"))?.id ?? "";
  const ci = await tenancy.keys.create("default", { name: "ci" });
  const web = await tenancy.keys.create("default", { name: "web" });
  Object.assign(keyIds, { ci: ci.id, web: web.id, ciLast4: ci.last4, webLast4: web.last4 });
  await tenancy.orgs.create("other", ["tiny"]);
  const otherId = (await tenancy.orgs.getByName("other"))?.id ?? "";
  const record = (
    at: number,
    orgId: string,
    keyId: string,
    model: string,
    prompt: number,
    completion: number,
    user: string | null = null,
  ) => ({
    user,
    at: new Date(at),
    orgId,
    keyId,
    model,
    requestId: `req_${randomBytes(6).toString("hex")}`,
    promptTokens: prompt,
    completionTokens: completion,
    reasoningTokens: 0,
    cachedTokens: 0,
    status: "completed",
    latencyMs: 5,
  });
  await store.db
    .insert(usageRecords)
    .values([
      record(now - 60_000, defaultOrgId, ci.id, "tiny", 10, 5, "end-user-9"),
      record(now - 120_000, defaultOrgId, web.id, "small", 20, 7),
      record(now - DAY - 60_000, defaultOrgId, ci.id, "tiny", 30, 11, "end-user-9"),
      record(now - 40 * DAY, defaultOrgId, ci.id, "tiny", 1000, 1000, "end-user-9"),
      record(now - 60_000, otherId, "key_other", "tiny", 777, 333, "end-user-9"),
    ]);
  // The dashboard alone, without usage, limiter, models or admin token (no server builds it so, but the pages must
  // not break): each page says what it cannot show.
  noOperatorApp.route("/dashboard", createDashboardApp({ tenancy }));
});

afterAll(async () => {
  await harness?.close();
});

class Client extends FormClient {
  constructor(target: RequestTarget = app) {
    super(target);
  }
}

async function member(): Promise<Client> {
  const client = new Client();
  const _csrf = await client.csrf("/dashboard/sign-in");
  const res = await client.post("/dashboard/sign-in", {
    _csrf,
    email: owner.email,
    password: owner.password,
  });
  expect(res.status).toBe(303);
  return client;
}

async function operator(target: RequestTarget = app): Promise<Client> {
  const client = new Client(target);
  const _csrf = await client.csrf("/dashboard/operator/sign-in");
  const res = await client.post("/dashboard/operator/sign-in", { _csrf, token: ADMIN_TOKEN });
  expect(res.status).toBe(303);
  expect(res.headers.get("location")).toBe("/dashboard/operator");
  return client;
}

describe("usage periods", () => {
  const at = Date.parse("2031-05-10T15:00:00Z");

  it("resolve presets to a rolling window and the UTC days it touches", () => {
    const parsed = parseUsagePeriod({}, at);
    if (!parsed.ok) throw new Error(parsed.message);
    expect(parsed.period.id).toBe("7d");
    expect(parsed.period.since.toISOString()).toBe("2031-05-03T15:00:00.000Z");
    expect(parsed.period.until).toBeUndefined();
    expect(parsed.period.days).toEqual([
      "2031-05-03",
      "2031-05-04",
      "2031-05-05",
      "2031-05-06",
      "2031-05-07",
      "2031-05-08",
      "2031-05-09",
      "2031-05-10",
    ]);
    const day = parseUsagePeriod({ period: "24h" }, at);
    expect(day.ok && day.period.days).toEqual(["2031-05-09", "2031-05-10"]);
  });

  it("take dates as whole UTC days, both included; From alone runs to today", () => {
    const parsed = parseUsagePeriod({ period: "dates", since: "2031-02-27", until: "2031-03-01" }, at);
    if (!parsed.ok) throw new Error(parsed.message);
    expect(parsed.period.since.toISOString()).toBe("2031-02-27T00:00:00.000Z");
    expect(parsed.period.until?.toISOString()).toBe("2031-03-02T00:00:00.000Z");
    expect(parsed.period.days).toEqual(["2031-02-27", "2031-02-28", "2031-03-01"]);
    const open = parseUsagePeriod({ since: "2031-05-09" }, at);
    expect(open.ok && open.period.days).toEqual(["2031-05-09", "2031-05-10"]);
  });

  it("refuse what is not a period in words", () => {
    const cases: [Record<string, string>, string][] = [
      [{ period: "year" }, 'Unknown period "year"'],
      [{ period: "dates" }, "Give the first day of the period"],
      [{ since: "2031-02-30" }, '"2031-02-30" is not a date'],
      [{ since: "05/01/2031" }, "write it as year-month-day"],
      [{ since: "2031-05-02", until: "2031-05-01" }, "The period ends before it starts"],
      [{ since: "2029-01-01", until: "2031-01-01" }, "choose at most 366 days"],
    ];
    for (const [query, message] of cases) {
      const parsed = parseUsagePeriod(query, at);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.message).toContain(message);
    }
  });
});

describe("Usage page", () => {
  it("shows totals, the chart with its data table, and usage per model and per key of the org only", async () => {
    const client = await member();
    const res = await client.get("/dashboard/usage?period=30d");
    expect(res.status).toBe(200);
    const page = await pageText(res);
    expect(page).toContain('aria-current="page">Usage</a>');
    // 3 requests in the last 30 days; the one 40 days ago and the other org's are not counted.
    expect(page).toContain('<td data-total="requests">3</td>');
    expect(page).toContain('<td data-total="prompt_tokens">60</td>');
    expect(page).toContain('<td data-total="completion_tokens">23</td>');
    expect(page).toContain('<td data-total="total_tokens">83</td>');
    expect(page).not.toContain("777");
    expect(page).toMatch(/<svg [^>]*role="img" aria-labelledby="usage-chart-title usage-chart-desc"/);
    expect(page).toContain("83 tokens in 3 requests");
    // Per key: names and short keys, never the secret.
    expect(page).toContain(`ci <code>sk-…${keyIds.ciLast4}</code>`);
    expect(page).toContain(`web <code>sk-…${keyIds.webLast4}</code>`);
    // The chart's table: today has both models.
    const today = new Date(now - 60_000).toISOString().slice(0, 10);
    const cell = (model: string) =>
      new RegExp(`<tr data-day="${today}" data-model="${model}">.*?<td>([\\d,]+)</td></tr>`).exec(page)?.[1];
    expect([cell("small"), cell("tiny")]).toEqual(["27", "15"]);
  });

  it("splits each day by model with the day clipped to the period", async () => {
    const parsed = parseUsagePeriod({ period: "24h" }, now);
    if (!parsed.ok) throw new Error(parsed.message);
    const report = await loadUsageReport(usage, defaultOrgId, parsed.period);
    expect(report.totals.requests).toBe(2);
    const sum = report.tokensByModelAndDay.flatMap((s) => s.values).reduce((a, b) => a + b, 0);
    expect(sum).toBe(report.totals.total_tokens);
    expect(report.tokensByModelAndDay.map((s) => s.model)).toEqual(["small", "tiny"]);
  });

  it("filters by end user (the requests' user), within the period and the org, and keeps it in the form", async () => {
    const client = await member();
    const res = await client.get("/dashboard/usage?period=30d&user=end-user-9");
    expect(res.status).toBe(200);
    const page = await pageText(res);
    // Two of the three requests in 30 days sent it; the one 40 days ago and the other org's are not counted.
    expect(page).toContain('<td data-total="requests">2</td>');
    expect(page).toContain('<td data-total="total_tokens">56</td>');
    expect(page).toContain("sent with the end user <code>end-user-9</code>");
    expect(page).toMatch(/<input id="usage-user" name="user" type="text" value="end-user-9"/);
    expect(page).not.toContain(`web <code>sk-…${keyIds.webLast4}</code>`);
    const nobody = await pageText(await client.get("/dashboard/usage?period=30d&user=end-user"));
    expect(nobody).toContain('<td data-total="requests">0</td>');
  });

  it("refuses an end user id no request can have sent, keeping the form", async () => {
    const client = await member();
    const res = await client.get(`/dashboard/usage?period=7d&user=${"u".repeat(65)}`);
    expect(res.status).toBe(400);
    const page = await pageText(res);
    expect(page).toContain("An end user id is at most 64 characters");
    expect(page).toContain(`value="${"u".repeat(65)}"`);
    expect(page).toContain('role="alert"');
  });

  it("refuses a wrong period in words, keeping the form", async () => {
    const client = await member();
    const res = await client.get("/dashboard/usage?period=dates&since=2031-13-01");
    expect(res.status).toBe(400);
    const page = await pageText(res);
    expect(page).toContain('"2031-13-01" is not a date');
    expect(page).toContain('value="2031-13-01"');
    expect(page).toContain('role="alert"');
  });

  it("says so when the server records no usage", async () => {
    const client = new Client(noOperatorApp);
    const _csrf = await client.csrf("/dashboard/sign-in");
    await client.post("/dashboard/sign-in", { _csrf, email: owner.email, password: owner.password });
    const res = await client.get("/dashboard/usage");
    expect(res.status).toBe(503);
    expect(await pageText(res)).toContain("Usage is not recorded by this server");
  });
});

describe("Models page", () => {
  it("lists the configured models the org was granted, with context length and the id to call", async () => {
    const client = await member();
    const page = await pageText(await client.get("/dashboard/models"));
    expect(page).toContain('<tr data-model="tiny"><td><code>tiny</code></td><td>2,048 tokens</td>');
    expect(page).toContain('<tr data-model="small"><td><code>small</code></td><td>8,192 tokens</td>');
    expect(page).not.toContain('data-model="unused"');
    expect(page).toContain('model: "tiny"');
  });
});

describe("Limits page", () => {
  it("says unlimited when no limit is set", async () => {
    await tenancy.orgs.setLimits("default", { rpm: null, tpm: null });
    const page = await pageText(await (await member()).get("/dashboard/limits"));
    expect(page).toContain("<td>Unlimited</td>");
    expect(page).toContain("Not counted: requests are not limited.");
  });

  it("shows the limits and the current window's consumption with its reset in words", async () => {
    const org = await tenancy.orgs.setLimits("default", { rpm: 60, tpm: 10_000 });
    const subject = { orgId: org.id, orgName: org.name, rpm: org.rpm, tpm: org.tpm };
    const admission = await limiter.admit(subject, 500);
    await admission.settle(120);
    const page = await pageText(await (await member()).get("/dashboard/limits"));
    expect(page).toMatch(
      /<tr data-limit="requests"><th scope="row">Requests per minute \(RPM\)<\/th><td>60<\/td>/,
    );
    expect(page).toContain('<td data-used="1">1 request (2%)</td>');
    expect(page).toContain('<td data-used="120">120 tokens (1%)</td>');
    expect(page).toMatch(/Resets in (\d+ seconds?|1 minute)\./);
    await tenancy.orgs.setLimits("default", { rpm: null, tpm: null });
  });

  it("words durations", () => {
    expect(durationInWords(950)).toBe("1 second");
    expect(durationInWords(42_300)).toBe("43 seconds");
    expect(durationInWords(60_000)).toBe("1 minute");
    expect(durationInWords(90_000)).toBe("1 minute 30 seconds");
  });
});

describe("operator sign-in", () => {
  it("asks for the admin token in a labelled password field; a member's session does not open it", async () => {
    const res = await new Client().get("/dashboard/operator");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/dashboard/operator/sign-in");
    const page = await pageText(await new Client().get("/dashboard/operator/sign-in"));
    expect(page).toContain('<label for="admin-token">Admin token</label>');
    expect(page).toMatch(/<input id="admin-token" name="token" type="password"/);
    expect(page).toContain("Sign in</button>");
    const signedInMember = await member();
    expect((await signedInMember.get("/dashboard/operator")).status).toBe(303);
  });

  it("refuses a wrong token in words, then throttles the address even with the right one", async () => {
    const client = new Client();
    const _csrf = await client.csrf("/dashboard/operator/sign-in");
    for (let i = 0; i < 3; i++) {
      const res = await client.post("/dashboard/operator/sign-in", { _csrf, token: "hearth-admin-wrong" });
      expect(res.status).toBe(401);
      expect(await pageText(res)).toContain("That is not this server's admin token.");
    }
    const paused = await client.post("/dashboard/operator/sign-in", { _csrf, token: ADMIN_TOKEN });
    expect(paused.status).toBe(429);
    expect(await pageText(paused)).toContain("Too many wrong admin tokens");
    await new Promise((r) => setTimeout(r, 1100));
    expect((await client.post("/dashboard/operator/sign-in", { _csrf, token: ADMIN_TOKEN })).status).toBe(
      303,
    );
  });

  it("refuses a sign-in post without the form's token", async () => {
    const res = await new Client().post("/dashboard/operator/sign-in", { token: ADMIN_TOKEN });
    expect(res.status).toBe(403);
    expect(await pageText(res)).toContain("did not come from this dashboard");
  });

  it("opens an operator session: its own strict cookie, a sessions row without a user, ended by sign-out", async () => {
    const client = await operator();
    const cookie = client.setCookies.find((c) => c.startsWith("hearth_operator="));
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/dashboard\/operator/);
    const token = client.cookies.get("hearth_operator") ?? "";
    const rows = await store.db.select().from(sessions).where(eq(sessions.operator, true));
    expect(rows.some((r) => r.userId === null)).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(token);
    // Not a member: the members' pages stay closed to the operator cookie.
    expect((await client.get("/dashboard/keys")).status).toBe(303);
    const _csrf = await client.csrf("/dashboard/operator");
    const out = await client.post("/dashboard/operator/sign-out", { _csrf });
    expect(out.headers.get("location")).toBe("/dashboard/operator/sign-in?signed_out=1");
    const replay = new Client();
    replay.cookies.set("hearth_operator", token);
    expect((await replay.get("/dashboard/operator")).status).toBe(303);
  });

  it("is off without an admin token", async () => {
    const res = await new Client(noOperatorApp).get("/dashboard/operator/sign-in");
    expect(res.status).toBe(404);
    expect(await pageText(res)).toContain("no operator view");
  });
});

describe("operator fleet view", () => {
  it("shows each upstream endpoint serving or ejected with why, and says when a model cannot serve", async () => {
    const endpoint = { inFlight: 0, requests: 0, retries: 0, ejections: 0, promptTokens: 0, cachedTokens: 0 };
    harness.engine.setHealth([
      { model: "tiny", ready: true },
      {
        model: "fleet-a",
        ready: true,
        repins: { cache_lost: 4, endpoint_down: 1, endpoint_busy: 2 },
        endpoints: [
          {
            ...endpoint,
            url: "http://gpu-1:8000/v1",
            healthy: true,
            inFlight: 3,
            promptTokens: 800,
            cachedTokens: 600,
          },
          { ...endpoint, url: "http://gpu-2:8000/v1", healthy: false, lastError: "connection refused" },
        ],
      },
      {
        model: "fleet-b",
        ready: false,
        detail: "no healthy endpoint (status 503)",
        endpoints: [{ ...endpoint, url: "http://gpu-3:8000/v1", healthy: false, lastError: "status 503" }],
      },
    ]);
    try {
      const page = await pageText(await (await operator()).get("/dashboard/operator"));
      expect(page).toContain('<h2 id="fleet">Fleet</h2>');
      expect(page).toMatch(
        /fleet-a<\/td><td>http:\/\/gpu-1:8000\/v1<\/td><td>Serving<\/td><td>3<\/td><td title="600 of 800[^"]*">75%/,
      );
      expect(page).toMatch(
        /fleet-a<\/td><td>http:\/\/gpu-2:8000\/v1<\/td><td>Ejected: connection refused<\/td><td>0<\/td><td[^>]*>—/,
      );
      expect(page).toContain("fleet-b cannot serve now: no healthy endpoint (status 503).");
      expect(page).toContain(
        "fleet-a: 75% of prompt tokens from the endpoints' caches; conversations moved 3 times (endpoint down 1, busy 2); caches lost 4 times.",
      );
      expect(page).toContain("fleet-b: — of prompt tokens");
      harness.engine.setHealth(undefined);
      // Without upstream models there is no fleet section.
      expect(await pageText(await (await operator()).get("/dashboard/operator"))).not.toContain("Fleet</h2>");
    } finally {
      harness.engine.setHealth(undefined);
    }
  });
});

describe("operator changes", () => {
  it("lists every org with its models and limits", async () => {
    const page = await pageText(await (await operator()).get("/dashboard/operator"));
    expect(page).toContain('<h3 id="org-default-name">default</h3>');
    expect(page).toContain('<h3 id="org-other-name">other</h3>');
    expect(page).toContain("Create organization</button>");
    expect(page).toContain("Save limits</button>");
    expect(page).toContain("Grant</button>");
  });

  it("creates an org, grants, revokes and sets limits as admin, each audited, each said in words", async () => {
    const client = await operator();
    const _csrf = await client.csrf("/dashboard/operator");
    const created = await client.post("/dashboard/operator/orgs", {
      _csrf,
      name: "acme",
      models: ["tiny", "small"],
      rpm: "5",
      tpm: "",
    });
    expect(created.status).toBe(303);
    const location = created.headers.get("location") ?? "";
    expect(location).toBe("/dashboard/operator?done=created&org=acme#org-acme");
    expect(await pageText(await client.get(location))).toContain("Created the organization acme.");
    let acme = await tenancy.orgs.getByName("acme");
    expect(acme).toMatchObject({ models: ["small", "tiny"], rpm: 5, tpm: null });

    const revoked = await client.post("/dashboard/operator/orgs/acme/revoke", { _csrf, model: "small" });
    expect(await pageText(await client.get(revoked.headers.get("location") ?? ""))).toContain(
      "Revoked small from acme",
    );
    const granted = await client.post("/dashboard/operator/orgs/acme/grant", { _csrf, model: "unused" });
    expect(await pageText(await client.get(granted.headers.get("location") ?? ""))).toContain(
      "Granted unused to acme",
    );
    const limited = await client.post("/dashboard/operator/orgs/acme/limits", {
      _csrf,
      rpm: "0",
      tpm: "1,000",
    });
    expect(await pageText(await client.get(limited.headers.get("location") ?? ""))).toContain(
      "Saved the limits of acme: unlimited requests per minute, 1,000 tokens per minute.",
    );
    acme = await tenancy.orgs.getByName("acme");
    expect(acme).toMatchObject({ models: ["tiny", "unused"], rpm: null, tpm: 1000 });
    const audit = await tenancy.audit.list({ orgName: "acme", limit: 10 });
    expect(audit.map((e) => [e.action, e.actor])).toEqual([
      ["limits.set", "admin"],
      ["grant", "admin"],
      ["revoke-grant", "admin"],
      ["org.create", "admin"],
    ]);
  });

  it("refuses bad input in words and changes nothing", async () => {
    const client = await operator();
    const _csrf = await client.csrf("/dashboard/operator");
    const cases: [string, Record<string, string>, number, string][] = [
      ["/dashboard/operator/orgs", { name: "default" }, 409, 'Organization "default" already exists.'],
      ["/dashboard/operator/orgs", { name: "bad name" }, 400, 'Invalid organization name "bad name"'],
      [
        "/dashboard/operator/orgs",
        { name: "x", rpm: "ten" },
        400,
        'RPM must be a whole number, or blank for unlimited; "ten" is not.',
      ],
      ["/dashboard/operator/orgs/nope/grant", { model: "tiny" }, 404, 'Organization "nope" does not exist.'],
      ["/dashboard/operator/orgs/other/grant", { model: "gpt-9" }, 400, 'Unknown model "gpt-9"'],
      ["/dashboard/operator/orgs/other/revoke", { model: "small" }, 404, 'has no grant for model "small"'],
      [
        "/dashboard/operator/orgs/other/limits",
        { rpm: "-1", tpm: "" },
        400,
        "The limits of other were not changed",
      ],
    ];
    const before = JSON.stringify(await tenancy.orgs.list());
    for (const [path, form, status, message] of cases) {
      const res = await client.post(path, { _csrf, ...form });
      expect(res.status, path).toBe(status);
      const page = await pageText(res);
      expect(page).toContain(message);
      expect(page).toContain('role="alert"');
    }
    // The create form keeps what was typed.
    const kept = await pageText(
      await client.post("/dashboard/operator/orgs", { _csrf, name: "x", rpm: "ten" }),
    );
    expect(kept).toContain('id="new-org-name" name="name" type="text" required="" maxlength="64" value="x"');
    expect(JSON.stringify(await tenancy.orgs.list())).toBe(before);
  });

  it("refuses a change without or with a wrong CSRF token", async () => {
    const client = await operator();
    for (const form of [{ name: "csrf-less" }, { name: "csrf-less", _csrf: "forged" }]) {
      const res = await client.post("/dashboard/operator/orgs", form);
      expect(res.status).toBe(403);
      expect(await pageText(res)).toContain("security token is missing or wrong");
    }
    expect(await tenancy.orgs.getByName("csrf-less")).toBeNull();
  });

  it("parses limits: blank and 0 are unlimited", () => {
    expect(parseLimit("", "RPM")).toEqual({ ok: true, value: null });
    expect(parseLimit("0", "RPM")).toEqual({ ok: true, value: null });
    expect(parseLimit("1 000", "TPM")).toEqual({ ok: true, value: 1000 });
    expect(parseLimit("1.5", "TPM").ok).toBe(false);
  });
});
