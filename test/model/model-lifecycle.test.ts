// Models loaded and unloaded at run time on the real default model (two ids over the same GGUF): 503 while loading,
// /health per model, unload and load, on demand, keepAlive, and the memory budget's eviction and refusal.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { ModelCatalogue } from "../../src/catalogue/catalogue.js";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import type { MemoryBudget, ModelConfig } from "../../src/config/schema.js";
import { EngineNotReadyError, ModelMemoryError } from "../../src/engine/errors.js";
import {
  LlamaEngine,
  type LlamaEngineOptions,
  type ModelEvent,
} from "../../src/engine/llama/llama-engine.js";
import { createLogger } from "../../src/observability/logger.js";
import { CacheInvalidations } from "../../src/tenancy/invalidation.js";
import { generationRequest, greedySampling } from "../support/generation-request.js";
import { startTestApp, TEST_ADMIN_TOKEN } from "../support/test-app.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
// The default model's cached file as a local source: the second id is the same GGUF, nothing is downloaded again.
const file = await ensureModelFile(base, { modelsDir: config.modelsDir });
const shape = { parallel: 2, contextSize: 1024, source: file };
const A: ModelConfig = { ...base, ...shape, id: "smol-a" };
const B: ModelConfig = { ...base, ...shape, id: "smol-b" };

const resolveModelPath: LlamaEngineOptions["resolveModelPath"] = (m, progress) =>
  ensureModelFile(m, { modelsDir: config.modelsDir, ...(progress === undefined ? {} : { progress }) });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
});
afterAll(async () => {
  for (const h of open.splice(0)) await h.close();
});

async function appOver(models: ModelConfig[], options: Partial<LlamaEngineOptions> = {}) {
  const harness = await startTestApp<LlamaEngine>({
    models,
    engine: () => new LlamaEngine({ models, resolveModelPath, keepAliveSweepMs: 100, ...options }),
  });
  open.push(harness);
  return harness;
}

/** Polls `check` every 50 ms until it holds; fails after `ms` (a bound, not a timing assertion). */
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const stateOf = (engine: LlamaEngine, id: string) => engine.health().find((h) => h.model === id)?.state;

const hi = (model: string) => ({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 });

interface HealthBody {
  status: string;
  models: { id: string; status: string; state?: string; progress?: { load: number }; memory?: unknown }[];
}

describe("loading at run time", () => {
  it("answers 503 engine_overloaded with retry-after for a model still loading, serves the loaded one, then both", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    // B's file arrives only when the test says so: B stays `downloading` while A serves.
    const harness = await appOver([A, B], {
      resolveModelPath: async (m, progress) => {
        if (m.id === B.id) await gate;
        return resolveModelPath(m, progress);
      },
    });
    const { app, engine } = harness;
    const started = engine.start();
    await until("A serves", () => stateOf(engine, A.id) === "ready");

    const health = await app.request("/health");
    expect(health.status).toBe(200);
    const body = (await health.json()) as HealthBody;
    expect(body.status).toBe("degraded");
    const [a, b] = body.models;
    expect(a).toMatchObject({ id: A.id, status: "ok", state: "ready", progress: { load: 1 } });
    expect(a?.memory).toMatchObject({ ram_bytes: expect.any(Number) });
    expect(b).toMatchObject({ id: B.id, status: "downloading", state: "downloading" });

    const refused = await harness.chat(hi(B.id));
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    const error = ((await refused.json()) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("engine_overloaded");
    expect(error.message).toContain(B.id);
    expect((await harness.chat(hi(A.id))).status).toBe(200);

    release();
    await started;
    expect((await harness.chat(hi(B.id))).status).toBe(200);
    expect(((await (await app.request("/health")).json()) as HealthBody).status).toBe("ok");
  });

  it("unloads a model (503 meanwhile) and loads it again on demand", async () => {
    const events: ModelEvent[] = [];
    const harness = await appOver([A, B], { onModelEvent: (e) => events.push(e) });
    const { engine } = harness;
    await engine.start();

    await engine.unloadModel(A.id);
    expect(stateOf(engine, A.id)).toBe("unloaded");
    expect(engine.runners()).toHaveLength(1);
    await expect(engine.prepare(generationRequest(A.id))).rejects.toBeInstanceOf(EngineNotReadyError);
    // /health stays 200 (B serves); A rests unloaded.
    const health = (await (await harness.app.request("/health")).json()) as HealthBody;
    expect(health.models[0]).toMatchObject({ id: A.id, status: "unloaded", state: "unloaded" });

    // The request that finds it unloaded starts the load and is told to come back.
    const first = await harness.chat(hi(A.id));
    expect(first.status).toBe(503);
    expect(first.headers.get("retry-after")).toBe("1");
    expect(["downloading", "loading", "ready"]).toContain(stateOf(engine, A.id));
    await until("A is loaded on demand", () => stateOf(engine, A.id) === "ready");
    expect((await harness.chat(hi(A.id))).status).toBe(200);
    expect(events).toContainEqual({ model: A.id, state: "ready", reason: "on demand" });
  });

  it("unloads a model idle for its keepAlive; a model without one stays", async () => {
    const events: ModelEvent[] = [];
    const harness = await appOver([B, { ...A, keepAlive: "1s" }], { onModelEvent: (e) => events.push(e) });
    const { engine } = harness;
    await engine.start();
    // Served (loaded again on demand should its keepAlive have run out since the start on a slow machine).
    await until("A serves a request", async () => (await harness.chat(hi(A.id))).status === 200);
    await until("A's keepAlive unloads it", () => stateOf(engine, A.id) === "unloaded", 20_000);
    expect(events).toContainEqual({ model: A.id, state: "unloaded", reason: "keepAlive" });
    // B has no keepAlive: it stays.
    expect(stateOf(engine, B.id)).toBe("ready");
  });
});

describe("memory budget", () => {
  /** What one model of `shape` takes by node-llama-cpp's estimate (read from a loaded model's health). */
  async function estimate(): Promise<number> {
    const engine = new LlamaEngine({ models: [A], resolveModelPath });
    try {
      await engine.start();
      const ram = engine.health()[0]?.memory?.ramBytes;
      if (ram === undefined) throw new Error("no estimate");
      return ram;
    } finally {
      await engine.dispose();
    }
  }

  it("makes room by unloading the least recently used idle model, and refuses while the other is busy", async () => {
    const one = await estimate();
    // Room for one model and a half: never both.
    const memory: MemoryBudget = { ram: Math.floor(one * 1.5) };
    const events: ModelEvent[] = [];
    const harness = await appOver([A, B], { memory, onModelEvent: (e) => events.push(e) });
    const { engine } = harness;
    await engine.start();
    // At start nothing is evicted: B did not fit beside A and rests unloaded, with the reason.
    expect(stateOf(engine, A.id)).toBe("ready");
    expect(stateOf(engine, B.id)).toBe("unloaded");
    expect(engine.health()[1]?.error).toMatch(/does not fit in the memory budget/);

    // A request for B: A is idle, so it is unloaded for B.
    expect((await harness.chat(hi(B.id))).status).toBe(503);
    await until("B is loaded in A's place", () => stateOf(engine, B.id) === "ready");
    expect(stateOf(engine, A.id)).toBe("unloaded");
    expect(events).toContainEqual({ model: A.id, state: "unloaded", reason: `evicted for ${B.id}` });

    // B busy (a generation holding its sequences, its reader absent): A cannot be loaded, with a clear error.
    const abort = new AbortController();
    const prepared = await engine.prepare(
      generationRequest(B.id, {
        sampling: greedySampling({ maxTokens: 500, ignoreEos: true }),
        signal: abort.signal,
      }),
    );
    await engine.enqueue(prepared);
    await expect(engine.loadModel(A.id)).rejects.toBeInstanceOf(ModelMemoryError);
    expect(stateOf(engine, B.id)).toBe("ready");
    const refused = await harness.chat(hi(A.id));
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /does not fit in the memory budget/,
    );

    // Idle again: A may take B's place.
    abort.abort();
    await until("B is idle", () => engine.modelLoad().every((l) => l.busySequences === 0));
    await until("A is loaded", async () => {
      await harness.chat(hi(A.id));
      return stateOf(engine, A.id) === "ready";
    });
    expect(stateOf(engine, B.id)).toBe("unloaded");
  });
});

describe("the model catalogue through the admin API", () => {
  const admin =
    (harness: { app: { request: (url: string, init?: RequestInit) => Response | Promise<Response> } }) =>
    (method: string, path: string, body?: unknown) =>
      Promise.resolve(
        harness.app.request(`/admin/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        }),
      );

  it("adds, serves, unloads, loads and removes a model at run time; the store keeps the changes", async () => {
    const harness = await appOver([A]);
    const call = admin(harness);
    await harness.engine.start();

    // hearth.yaml's checks, with the field at fault.
    const bad = await call("POST", "/models", { id: "x", source: file, contextSize: 5 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe("contextSize");
    const upstream = await call("POST", "/models", {
      id: "u",
      upstream: { endpoints: [{ url: "http://x/v1" }] },
    });
    expect(upstream.status).toBe(400);
    expect((await call("POST", "/models", { id: A.id, source: file })).status).toBe(409);
    expect((await call("POST", "/models/nope/load")).status).toBe(404);

    const added = await call("POST", "/models", {
      id: "org/smol-c",
      source: file,
      sha256: base.sha256,
      contextSize: 1024,
      parallel: 2,
      keepAlive: "10m",
    });
    expect(added.status).toBe(201);
    expect(await added.json()).toMatchObject({
      id: "org/smol-c",
      context_size: 1024,
      keep_alive: "10m",
      seeded: false,
    });
    await until("the added model is loaded", () => stateOf(harness.engine, "org/smol-c") === "ready");
    // Granted like any other model, then served.
    await harness.services.tenancy.orgs.grantModel("default", "org/smol-c", "admin");
    expect((await harness.chat(hi("org/smol-c"))).status).toBe(200);

    const list = (await (await call("GET", "/models")).json()) as { data: { id: string; state: string }[] };
    expect(list.data.map((m) => [m.id, m.state])).toEqual([
      [A.id, "ready"],
      ["org/smol-c", "ready"],
    ]);

    const unloaded = await call("POST", "/models/org/smol-c/unload");
    expect(unloaded.status).toBe(200);
    expect(await unloaded.json()).toMatchObject({ state: "unloaded" });
    expect((await call("POST", "/models/org%2Fsmol-c/load")).status).toBe(202);
    await until("loaded again", () => stateOf(harness.engine, "org/smol-c") === "ready");

    // Removing the seed model: it stays removed for the next start (the store says so).
    const removed = await call("DELETE", `/models/${A.id}`);
    expect(removed.status).toBe(200);
    expect(harness.engine.listModels().map((m) => m.id)).toEqual(["org/smol-c"]);
    expect((await harness.chat(hi(A.id))).status).toBe(404);
    // Each change is in the audit log (newest first), made by the admin token's holder.
    const audit = await harness.services.tenancy.audit.list();
    expect(
      audit.filter((e) => e.action.startsWith("model.")).map((e) => [e.action, e.target, e.actor]),
    ).toEqual([
      ["model.remove", A.id, "admin"],
      ["model.load", "org/smol-c", "admin"],
      ["model.unload", "org/smol-c", "admin"],
      ["model.add", "org/smol-c", "admin"],
    ]);

    // A restart: a new engine with the same seed, over the same store.
    const restarted = new LlamaEngine({ models: [A], resolveModelPath });
    open.push({ close: () => restarted.dispose() });
    const catalogue = new ModelCatalogue(harness.store.db, {
      host: restarted,
      seed: [A],
      servedIds: () => restarted.listModels().map((m) => m.id),
      invalidation: new CacheInvalidations(),
      logger: createLogger("silent"),
    });
    await catalogue.sync();
    expect(restarted.listModels().map((m) => m.id)).toEqual(["org/smol-c"]);
    expect(restarted.modelConfig("org/smol-c")).toMatchObject({ contextSize: 1024, keepAlive: "10m" });
  });
});
