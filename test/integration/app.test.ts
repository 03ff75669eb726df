// The composed app in memory (app.request, no port): readiness, routing errors and headers, real store and engine.
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../src/app/create-app.js";
import { createServices } from "../../src/app/services.js";
import { loadOrCreateKeySecret } from "../../src/auth/key-secret.js";
import { loadConfig } from "../../src/config/load.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import { ensureModelFile } from "../../src/models/fetch.js";
import { createLogger } from "../../src/observability/logger.js";
import { openStore, type Store } from "../../src/store/open-store.js";
import { TenancyService } from "../../src/tenancy/tenancy-service.js";
import { dataDirWithPglite } from "../support/pglite-template.js";

let dataDir: string;
let store: Store;
let engine: LlamaEngine;
let app: ReturnType<typeof createApp>;
let apiKey: string;

beforeAll(async () => {
  dataDir = await dataDirWithPglite();
  const config = loadConfig({
    env: { HEARTH_DATA_DIR: dataDir, HEARTH_MODELS_DIR: process.env.HEARTH_MODELS_DIR ?? "" },
  });
  store = await openStore({ dataDir, databaseUrl: undefined });
  const modelIds = config.models.map((m) => m.id);
  const tenancy = new TenancyService(store.db, { keySecret: loadOrCreateKeySecret(config), modelIds });
  apiKey = (await tenancy.bootstrap(modelIds))?.key ?? "";
  engine = new LlamaEngine({
    models: config.models.map((m) => ({ ...m, parallel: 2 })),
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
  const services = createServices({
    config,
    engine,
    tenancy,
    adminToken: "admin-token-for-tests",
    logger: createLogger("silent"),
    db: store.db,
  });
  app = createApp(services);
});

afterAll(async () => {
  await engine?.dispose();
  await store?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const chat = (body: unknown) =>
  app.request("/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("readiness", () => {
  it("answers 503 on /health and on completions until every model is loaded, then 200", async () => {
    const health = await app.request("/health");
    expect(health.status).toBe(503);
    const early = await chat({ model: "smollm2-135m-instruct", messages: [{ role: "user", content: "hi" }] });
    expect(early.status).toBe(503);
    expect(early.headers.get("retry-after")).toBe("1");
    expect(((await early.json()) as { error: { type: string } }).error.type).toBe("server_error");

    await engine.start();
    expect((await app.request("/health")).status).toBe(200);
    const ready = await chat({
      model: "smollm2-135m-instruct",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 2,
    });
    expect(ready.status).toBe(200);
    expect(ready.headers.get("x-request-id")).toMatch(/^req_/);
  });
});

describe("routing errors", () => {
  it("answers unknown routes with a JSON 404 and a request id", async () => {
    const response = await app.request("/nope");
    expect(response.status).toBe(404);
    expect(response.headers.get("x-request-id")).toMatch(/^req_/);
    expect(await response.json()).toEqual({
      error: {
        message: "Unknown request URL: GET /nope.",
        type: "invalid_request_error",
        param: null,
        code: "unknown_url",
      },
    });
  });

  it("answers a wrong method with 405", async () => {
    const response = await app.request("/v1/chat/completions", {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(response.status).toBe(405);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
  });

  it("refuses a body over the limit with 413 before reading it whole", async () => {
    const response = await app.request("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: "x".repeat(5 * 1024 * 1024),
    });
    expect(response.status).toBe(413);
  });

  it("answers n above the model's sequences with 400 on param n", async () => {
    const response = await chat({
      model: "smollm2-135m-instruct",
      messages: [{ role: "user", content: "hi" }],
      n: 3,
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { param: string } }).error.param).toBe("n");
  });
});
