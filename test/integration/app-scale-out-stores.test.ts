// The whole app on the scale-out stores, PostgreSQL and Redis, with the fake engine: the graph main.ts builds when
// HEARTH_DATABASE_URL and HEARTH_REDIS_URL are set records usage in PostgreSQL and counts limits in Redis.
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usageRecords } from "../../src/store/schema.js";
import { DEFAULT_REPLY, FAKE_MODEL, type FakeEngine } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

const REDIS_URL = process.env.HEARTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

describe("the app on PostgreSQL and Redis", () => {
  let harness: TestApp<FakeEngine>;

  beforeAll(async () => {
    harness = await startTestApp({ store: "postgres", redisUrl: REDIS_URL });
  });

  afterAll(async () => {
    await harness?.close();
  });

  it("runs on the PostgreSQL driver with the Redis limiter and invalidation broadcast", () => {
    expect(harness.store.driver).toBe("postgres");
    expect(harness.services.redis).toBeDefined();
    expect(harness.services.invalidations).toBeDefined();
  });

  it("answers a completion and records its usage in PostgreSQL", async () => {
    const response = await harness.chat({ model: FAKE_MODEL, messages: [{ role: "user", content: "Hi." }] });
    expect(response.status).toBe(200);
    const completion = (await response.json()) as {
      choices: { message: { content: string } }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    expect(completion.choices[0]?.message.content).toBe(DEFAULT_REPLY);
    await harness.services.accounting.settled();
    await harness.services.usageMeter.flush();
    const requestId = response.headers.get("x-request-id") ?? "";
    const [record] = await harness.store.db
      .select()
      .from(usageRecords)
      .where(eq(usageRecords.requestId, requestId));
    expect(record).toMatchObject({
      status: "completed",
      promptTokens: completion.usage.prompt_tokens,
      completionTokens: completion.usage.completion_tokens,
    });
  });

  it("refuses with 429 once the org's window in Redis is spent", async () => {
    // A fresh org id each run: the Redis windows of earlier runs never count here.
    await harness.services.tenancy.orgs.create("redis-limited", [FAKE_MODEL], { rpm: 1 });
    const { key } = await harness.services.tenancy.keys.create("redis-limited");
    const body = { model: FAKE_MODEL, messages: [{ role: "user", content: "Hi." }] };
    const admitted = await harness.chat(body, key);
    expect(admitted.status).toBe(200);
    expect(admitted.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect((await harness.chat(body, key)).status).toBe(429);
  });
});
