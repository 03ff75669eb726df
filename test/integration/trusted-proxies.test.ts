// The client's address over real sockets (issue 12, item 3): X-Forwarded-For is believed only from a configured
// trusted proxy, and the one address is what the sign-in throttle, the admin throttle and the request log use.
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { type ServerType, serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/observability/logger.js";
import type { FakeEngine } from "../support/fake-engine.js";
import { FormClient } from "../support/form-client.js";
import { startTestApp, TEST_ADMIN_TOKEN, type TestApp } from "../support/test-app.js";

interface Running {
  harness: TestApp<FakeEngine>;
  server: ServerType;
  url: string;
  logLines: () => Record<string, unknown>[];
}

/** The whole app on a real port (the peer is 127.0.0.1), trusting `trustedProxies`, logging into memory. */
async function listen(trustedProxies: string[]): Promise<Running> {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const harness = await startTestApp({ server: { trustedProxies }, logger: createLogger("info", stream) });
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: harness.app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const logLines = () =>
    chunks
      .join("")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { harness, server, url, logLines };
}

async function stop(running: Running | undefined): Promise<void> {
  if (running === undefined) return;
  await new Promise<void>((resolve) => running.server.close(() => resolve()));
  await running.harness.close();
}

/** A browser on the real port whose requests carry `forwardedFor` as X-Forwarded-For. */
async function signInFrom(running: Running, forwardedFor: string, password: string): Promise<number> {
  const client = new FormClient({
    request: (path, init) => {
      const headers = new Headers(init.headers);
      headers.set("x-forwarded-for", forwardedFor);
      return fetch(`${running.url}${path}`, { ...init, headers, redirect: "manual" });
    },
  });
  const csrf = await client.csrf("/dashboard/sign-in");
  const res = await client.post("/dashboard/sign-in", {
    _csrf: csrf,
    email: running.harness.owner.email,
    password,
  });
  await res.text();
  return res.status;
}

function adminFrom(running: Running, forwardedFor: string, token: string): Promise<Response> {
  return fetch(`${running.url}/admin/v1/orgs`, {
    headers: { authorization: `Bearer ${token}`, "x-forwarded-for": forwardedFor },
  });
}

/** A server for the enclosing describe block, trusting `trustedProxies`; `current()` inside its tests. */
function serverTrusting(trustedProxies: string[]): { current(): Running } {
  let running: Running | undefined;
  beforeAll(async () => {
    running = await listen(trustedProxies);
  });
  afterAll(() => stop(running));
  return {
    current() {
      if (running === undefined) throw new Error("the server did not start");
      return running;
    },
  };
}

describe("from a peer that is not a trusted proxy", () => {
  const server = serverTrusting(["10.0.0.0/8"]);

  it("ignores a spoofed X-Forwarded-For: a new one per guess does not get a new budget", async () => {
    const r = server.current();
    for (let i = 1; i <= 5; i++) expect(await signInFrom(r, `203.0.113.${i}`, "wrong guess")).toBe(401);
    expect(await signInFrom(r, "203.0.113.99", "wrong guess")).toBe(429);
    // Request lines are written once their response is on its way.
    await new Promise((resolve) => setImmediate(resolve));
    const lines = r.logLines().filter((l) => l.msg === "request" && l.method === "POST");
    expect(lines.length).toBeGreaterThan(0);
    expect(new Set(lines.map((l) => l.client))).toEqual(new Set(["127.0.0.1"]));
    const failures = r.logLines().filter((l) => l.msg === "dashboard sign-in failed");
    expect(new Set(failures.map((l) => l.client))).toEqual(new Set(["127.0.0.1"]));
  });

  it("throttles wrong admin tokens by the peer, whatever X-Forwarded-For says", async () => {
    const r = server.current();
    for (let i = 1; i <= 5; i++)
      expect((await adminFrom(r, `198.51.100.${i}`, "wrong-token")).status).toBe(401);
    const refused = await adminFrom(r, "198.51.100.99", TEST_ADMIN_TOKEN);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
      "too_many_failed_attempts",
    );
  });
});

describe("behind a trusted proxy", () => {
  const server = serverTrusting(["127.0.0.1"]);

  it("counts each client by the address the proxy saw, not the proxy's", async () => {
    const r = server.current();
    for (let i = 0; i < 5; i++) expect(await signInFrom(r, "203.0.113.1", "wrong guess")).toBe(401);
    expect(await signInFrom(r, "203.0.113.1", "wrong guess")).toBe(429);
    // What the client put before the proxy's hop is not believed: still 203.0.113.1, still paused.
    expect(await signInFrom(r, "203.0.113.2, 203.0.113.1", "wrong guess")).toBe(429);
    // Another client behind the same proxy has a budget of its own.
    expect(await signInFrom(r, "203.0.113.2", r.harness.owner.password)).toBe(303);
    await new Promise((resolve) => setImmediate(resolve));
    const clients = new Set(
      r
        .logLines()
        .filter((l) => l.msg === "request" && l.method === "POST")
        .map((l) => l.client),
    );
    expect(clients).toEqual(new Set(["203.0.113.1", "203.0.113.2"]));
  });

  it("throttles wrong admin tokens per client behind the proxy", async () => {
    const r = server.current();
    for (let i = 0; i < 5; i++) expect((await adminFrom(r, "198.51.100.1", "wrong-token")).status).toBe(401);
    expect((await adminFrom(r, "198.51.100.1", TEST_ADMIN_TOKEN)).status).toBe(429);
    expect((await adminFrom(r, "198.51.100.2", TEST_ADMIN_TOKEN)).status).toBe(200);
  });
});
