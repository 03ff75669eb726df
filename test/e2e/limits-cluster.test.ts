// Two `hearth serve` replicas sharing one PostgreSQL and one Redis: an organization's requests per minute hold
// exactly across both, whichever replica a request lands on.
import { Redis } from "ioredis";
import OpenAI, { type APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INVALIDATION_CHANNEL } from "../../src/tenancy/invalidation-broadcast.js";
import { type ReplicaPair, startReplicaPair, TEST_REDIS_URL } from "../support/replicas.js";
import { hearthCli, openaiClient, type ServerProcess } from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
const REDIS_URL = TEST_REDIS_URL;
const RPM = 4;

let pair: ReplicaPair;
let shared: Record<string, string>;
let first: ServerProcess;
let second: ServerProcess;

async function hearth(...args: string[]): Promise<string> {
  return (await hearthCli(first, args, shared)).stdout;
}

beforeAll(async () => {
  pair = await startReplicaPair();
  ({ shared, first, second } = pair);
});

afterAll(async () => {
  await pair?.stop();
});

describe("limits across two replicas", () => {
  it(`admits exactly rpm=${RPM} of ${2 * RPM + 2} concurrent requests spread over both`, async () => {
    // A fresh organization: its id is new in this fresh database, so its Redis keys are this test's alone.
    await hearth("orgs", "create", "cluster-org", "--models", MODEL, "--rpm", String(RPM));
    const key = (await hearth("keys", "create", "--org", "cluster-org")).trim().split("\n").at(-1) ?? "";
    const orgs = JSON.parse(await hearth("orgs", "list", "--json")) as { id: string; name: string }[];
    const orgId = orgs.find((o) => o.name === "cluster-org")?.id;
    expect(orgId).toMatch(/^org_/);
    const clients = [openaiClient(first, key), openaiClient(second, key)];
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 2 * RPM + 2 }, (_, i) =>
          clients[i % 2]?.chat.completions.create({
            model: MODEL,
            messages: [{ role: "user", content: `Count to ${i}.` }],
            max_tokens: 1,
          }),
        ),
      );
      const admitted = results.filter((r) => r.status === "fulfilled");
      const refused = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
      expect(admitted).toHaveLength(RPM);
      expect(refused).toHaveLength(RPM + 2);
      for (const err of refused) {
        expect(err).toBeInstanceOf(OpenAI.RateLimitError);
        expect((err as APIError).type).toBe("requests");
      }

      // Both replicas see the spent window: one more request is refused on either.
      for (const client of clients) {
        const err = await client.chat.completions
          .create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 1 })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(err).toBeInstanceOf(OpenAI.RateLimitError);
        const apiError = err as APIError;
        expect(apiError.message).toContain(`Limit ${RPM}, Used ${RPM}, Requested 1.`);
        expect((apiError.headers as Headers).get("x-ratelimit-remaining-requests")).toBe("0");
      }
      for (const output of [first.output(), second.output()]) {
        expect(output).toContain("rate limits are shared through Redis");
        expect(output).not.toContain("Redis is unreachable");
      }
    } finally {
      const redis = new Redis(REDIS_URL);
      await redis.del(`hearth:limits:rpm:${orgId}`, `hearth:limits:tpm:${orgId}`);
      redis.disconnect();
    }
  });
  it("both replicas take part in the cache-invalidation broadcast: a revocation is published", async () => {
    const listener = new Redis(REDIS_URL);
    try {
      // Both replicas subscribed (their subscriptions come up with their Redis connections).
      const [, subscribers] = (await listener.pubsub("NUMSUB", INVALIDATION_CHANNEL)) as [string, number];
      expect(Number(subscribers)).toBeGreaterThanOrEqual(2);
      await listener.subscribe(INVALIDATION_CHANNEL);
      const messages: string[] = [];
      listener.on("message", (_channel: string, text: string) => messages.push(text));

      await hearth("orgs", "create", "revoke-org", "--models", MODEL);
      const created = JSON.parse(await hearth("keys", "create", "--org", "revoke-org", "--json")) as {
        id: string;
        key: string;
      };
      const revoked = await fetch(`${first.url}/admin/v1/keys/${created.id}`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${shared.HEARTH_ADMIN_TOKEN}` },
      });
      expect(revoked.status).toBe(200);
      for (let i = 0; i < 250 && !messages.some((m) => m.includes(created.id)); i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const message = messages.find((m) => m.includes(created.id));
      expect(JSON.parse(message ?? "null")).toMatchObject({ event: { kind: "key", keyId: created.id } });
      expect(message).not.toContain(created.key);
      const onSecond = await fetch(`${second.url}/v1/models`, {
        headers: { authorization: `Bearer ${created.key}` },
      });
      expect(onSecond.status).toBe(401);
    } finally {
      listener.disconnect();
    }
  });
});
