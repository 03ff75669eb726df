// Two `hearth serve` replicas sharing one PostgreSQL and one Redis: an organization's requests per minute hold
// exactly across both, whichever replica a request lands on.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import OpenAI, { type APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openaiClient, type ServerProcess, startServerProcess } from "../support/server-process.js";
import { type Backend, postgresBackend } from "../support/store-backends.js";

const run = promisify(execFile);
const BIN = join(import.meta.dirname, "..", "..", "bin", "hearth.js");
const MODEL = "smollm2-135m-instruct";
const REDIS_URL = process.env.HEARTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const RPM = 4;

/** What the replicas share: the database, Redis, the key secret and the admin token. */
let shared: Record<string, string>;
let backend: Backend;
let first: ServerProcess;
let second: Replica;

interface Replica {
  url: string;
  output(): string;
  stop(): Promise<void>;
}

/**
 * A replica joining a store that is already set up: it prints no bootstrap key, so startServerProcess (which waits
 * for one) does not fit; this waits for the listening line and /health instead.
 */
async function startReplica(env: Record<string, string>): Promise<Replica> {
  const dataDir = mkdtempSync(join(tmpdir(), "hearth-replica-"));
  const child: ChildProcess = spawn(process.execPath, [BIN, "serve", "--port", "0", "--parallel", "2"], {
    env: { ...process.env, ...env, HEARTH_DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const collect = (d: Buffer) => {
    output += d.toString();
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGTERM");
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 170_000;
  while (Date.now() < deadline && child.exitCode === null) {
    const url = /"url":"(http:\/\/[^"]+)"/.exec(output)?.[1];
    if (url !== undefined && (await fetch(`${url}/health`).catch(() => undefined))?.status === 200) {
      return { url, output: () => output, stop };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await stop();
  throw new Error(`the replica did not become healthy:\n${output}`);
}

async function hearth(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...shared, HEARTH_URL: first.url, HEARTH_DATA_DIR: first.dataDir },
  });
  return stdout;
}

beforeAll(async () => {
  backend = await postgresBackend();
  shared = {
    HEARTH_DATABASE_URL: backend.options.databaseUrl ?? "",
    HEARTH_REDIS_URL: REDIS_URL,
    HEARTH_KEY_SECRET: randomBytes(32).toString("hex"),
    HEARTH_ADMIN_TOKEN: `admin-${randomBytes(16).toString("hex")}`,
  };
  // The first replica initialises the empty store (and prints its bootstrap key); the second joins it.
  first = await startServerProcess({ env: shared, args: ["--parallel", "2"] });
  second = await startReplica(shared);
});

afterAll(async () => {
  await second?.stop();
  await first?.stop();
  await backend?.cleanup();
});

describe("limits across two replicas", () => {
  it(`admits exactly rpm=${RPM} of ${2 * RPM + 2} concurrent requests spread over both`, async () => {
    // A fresh organization: its id is new in this fresh database, so its Redis keys are this test's alone.
    await hearth("orgs", "create", "cluster-org", "--models", MODEL, "--rpm", String(RPM));
    const key = (await hearth("keys", "create", "--org", "cluster-org")).trim().split("\n").at(-1) ?? "";
    const orgs = JSON.parse(await hearth("orgs", "list", "--json")) as { id: string; name: string }[];
    const orgId = orgs.find((o) => o.name === "cluster-org")?.id;
    expect(orgId).toMatch(/^org_/);
    const clients = [openaiClient(first, key), openaiClient({ url: second.url, apiKey: key })];
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
});
