import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type UpstreamModelConfig, upstreamModelConfigSchema } from "../../config/schema.js";
import { BASE_BACKOFF_MS, EndpointPool, MAX_BACKOFF_MS, modelNotServing } from "./endpoint-pool.js";

const URLS = ["http://127.0.0.1:8101/v1", "http://user:secret@127.0.0.1:8102/v1"];

function config(extra: Record<string, unknown> = {}): UpstreamModelConfig {
  const file = upstreamModelConfigSchema.parse({
    id: "fleet",
    upstream: { model: "smol", endpoints: URLS.map((url) => ({ url })), probeIntervalMs: 2000, ...extra },
  });
  return {
    id: file.id,
    upstream: {
      ...file.upstream,
      model: file.upstream.model ?? file.id,
      endpoints: file.upstream.endpoints.map((e, i) => ({
        url: e.url,
        apiKey: i === 0 ? "key-0" : undefined,
      })),
    },
  };
}

/** "reset": the connection is reset under the request (the fetch's own error shape); "reset-once": then "ok". */
type Behaviour = "ok" | "refused" | "500" | "reset" | "reset-once";

/** A fetch answering `/models` per endpoint as `behaviour[i]` says, recording each call. */
function fakeFetch(behaviour: Behaviour[]) {
  const calls: { url: string; authorization: string | undefined }[] = [];
  const fetch = vi.fn(async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    const headers = new Headers(init?.headers);
    calls.push({ url, authorization: headers.get("authorization") ?? undefined });
    const i = URLS.findIndex((u) => url.startsWith(u.replace("user:secret@", "").split("?")[0] as string));
    const mode = behaviour[i === -1 ? 1 : i];
    if (mode === "refused") {
      throw new TypeError("fetch failed", {
        cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }),
      });
    }
    if (mode === "reset" || mode === "reset-once") {
      if (mode === "reset-once") behaviour[i === -1 ? 1 : i] = "ok";
      throw new TypeError("fetch failed", {
        cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }),
      });
    }
    if (mode === "500") return new Response("oops", { status: 500 });
    return Response.json({ object: "list", data: [{ id: "smol", object: "model", max_model_len: 8192 }] });
  });
  return { fetch: fetch as unknown as typeof globalThis.fetch, calls };
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("EndpointPool", () => {
  it("ejects at once on a passive signal and re-admits on a passing probe once the backoff has passed", async () => {
    const behaviour: Behaviour[] = ["ok", "ok"];
    const { fetch } = fakeFetch(behaviour);
    const changes = vi.fn();
    const pool = new EndpointPool({ config: config(), fetch, onHealthChange: changes });
    const [first] = pool.endpoints;
    if (first === undefined) throw new Error("no endpoint");
    pool.eject(first, "connection reset");
    expect(first.healthy).toBe(false);
    expect(first.lastError).toBe("connection reset");
    expect(first.backoffMs).toBe(BASE_BACKOFF_MS);
    expect(pool.healthy().map((e) => e.index)).toEqual([1]);
    expect(changes).toHaveBeenCalledTimes(1);
    // A probe before the backoff has passed does not re-admit it.
    await pool.probe(first);
    expect(first.healthy).toBe(false);
    // The probe scheduled at the end of the backoff does.
    await vi.advanceTimersByTimeAsync(BASE_BACKOFF_MS);
    expect(first.healthy).toBe(true);
    expect(changes).toHaveBeenCalledTimes(2);
    pool.stop();
  });

  it("keeps an endpoint out while its probes fail, and doubles the backoff up to the cap", async () => {
    const behaviour: Behaviour[] = ["refused", "ok"];
    const { fetch } = fakeFetch(behaviour);
    const pool = new EndpointPool({ config: config(), fetch });
    const first = pool.endpoints[0];
    if (first === undefined) throw new Error("no endpoint");
    await pool.start();
    expect(first.healthy).toBe(false);
    expect(first.lastError).toBe("probe: connection refused");
    await vi.advanceTimersByTimeAsync(10_000);
    expect(first.healthy).toBe(false);
    behaviour[0] = "ok";
    await vi.advanceTimersByTimeAsync(2_000);
    expect(first.healthy).toBe(true);
    // Ejections without a served request in between: 1 s, 2 s, 4 s … 30 s at most.
    pool.succeeded(first);
    const seen: number[] = [];
    for (let i = 0; i < 7; i++) {
      first.healthy = true;
      pool.eject(first, "HTTP 503");
      seen.push(first.backoffMs);
    }
    expect(seen).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, MAX_BACKOFF_MS, MAX_BACKOFF_MS]);
    pool.succeeded(first);
    first.healthy = true;
    pool.eject(first, "HTTP 503");
    expect(first.backoffMs).toBe(BASE_BACKOFF_MS);
    pool.stop();
  });

  it("probes once more on a connection reset: one reset keeps the endpoint in, two take it out", async () => {
    const behaviour: Behaviour[] = ["reset-once", "reset"];
    const { fetch, calls } = fakeFetch(behaviour);
    const pool = new EndpointPool({ config: config(), fetch });
    await pool.start();
    expect(pool.endpoints.map((e) => e.healthy)).toEqual([true, false]);
    expect(pool.endpoints[1]?.lastError).toBe("probe: connection reset");
    // Two GETs of /models each: the first endpoint's retry passed, the second's was reset again.
    expect(calls.map((c) => c.url.replace(/^http:\/\/127\.0\.0\.1:(\d+).*$/, "$1"))).toEqual([
      "8101",
      "8102",
      "8101",
      "8102",
    ]);
    pool.stop();
  });

  it("ejects on a probe answering 5xx, learns the context size and sends the key only as a header", async () => {
    const { fetch, calls } = fakeFetch(["ok", "500"]);
    const pool = new EndpointPool({ config: config(), fetch });
    await pool.start();
    const [first, second] = pool.endpoints;
    expect(first?.healthy).toBe(true);
    expect(second?.healthy).toBe(false);
    expect(second?.lastError).toBe("probe: HTTP 500");
    expect(pool.contextSize).toBe(8192);
    expect(calls[0]).toEqual({ url: "http://127.0.0.1:8101/v1/models", authorization: "Bearer key-0" });
    // Credentials in a URL travel as a Basic header, and never show in health.
    expect(calls[1]).toEqual({
      url: "http://127.0.0.1:8102/v1/models",
      authorization: `Basic ${Buffer.from("user:secret").toString("base64")}`,
    });
    expect(second?.health()).toMatchObject({ url: "http://127.0.0.1:8102/v1", healthy: false, inFlight: 0 });
    expect(JSON.stringify(pool.endpoints.map((e) => e.health()))).not.toMatch(/secret|key-0/);
    pool.stop();
  });

  it("prefers the configured context size and stops probing when stopped", async () => {
    const { fetch, calls } = fakeFetch(["ok", "ok"]);
    const pool = new EndpointPool({ config: config({ contextSize: 2048 }), fetch });
    await pool.start();
    expect(pool.contextSize).toBe(2048);
    await vi.advanceTimersByTimeAsync(4_000);
    expect(calls).toHaveLength(6);
    pool.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(6);
  });

  it("counts slots in flight", () => {
    const { fetch } = fakeFetch(["ok", "ok"]);
    const pool = new EndpointPool({ config: config(), fetch });
    const first = pool.endpoints[0];
    if (first === undefined) throw new Error("no endpoint");
    pool.acquire(first);
    pool.acquire(first);
    pool.release(first);
    expect(first.inFlight).toBe(1);
    expect(first.requests).toBe(2);
  });
});

describe("modelNotServing (a Hearth worker's /health body)", () => {
  const body = (state: string | undefined) =>
    JSON.stringify({
      status: "degraded",
      models: [
        { id: "other", status: "ok", state: "ready" },
        { id: "m", state },
      ],
    });

  it.each([
    ["loading", "loading"],
    ["downloading", "downloading"],
    ["failed", "failed"],
    ["ready", undefined],
    ["unloaded", undefined],
  ])("a model %s → %s", (state, expected) => {
    expect(modelNotServing(body(state), "m")).toBe(expected);
  });

  it("says nothing of bodies without the model or its state (older workers, other engines)", () => {
    expect(modelNotServing(body(undefined), "m")).toBeUndefined();
    expect(modelNotServing(body("loading"), "absent")).toBeUndefined();
    expect(modelNotServing("not json", "m")).toBeUndefined();
    expect(modelNotServing("{}", "m")).toBeUndefined();
  });
});
