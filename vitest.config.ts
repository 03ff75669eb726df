// Test tiers as vitest projects. `npm test` runs every tier, one after another (unit, integration, model, e2e,
// clients); `npm run test:<tier>` (or `npx vitest run --project <tier>`) runs one. A new test file is a unit test
// unless it is listed below: the unit tier must stay model-free, server-free and under a minute.
import { existsSync } from "node:fs";
import { configDefaults, defineConfig } from "vitest/config";

const ALL = ["src/**/*.test.{ts,tsx}", "test/**/*.test.ts"];

/** PostgreSQL or Redis servers (suites run on PGlite and PostgreSQL, Redis-backed limits and broadcasts). */
const INTEGRATION = [
  "test/integration/**/*.test.ts",
  "src/dashboard/sign-in-throttle.test.ts",
  "src/limits/rate-limiter.test.ts",
  "src/tenancy/invalidation-broadcast.test.ts",
  "src/tenancy/members.test.ts",
  "src/usage/pg-meter.test.ts",
  "src/usage/queries.test.ts",
];

/** The real model: loaded in the test's process, or by a `hearth serve` the test drives with the openai client. */
const MODEL = [
  "test/conformance/**/*.test.ts",
  "test/integration/app.test.ts",
  "test/integration/engine.test.ts",
  "test/integration/prompt-cache-key.test.ts",
  "test/integration/model-lifecycle.test.ts",
  "test/integration/model-memory.test.ts",
  "test/integration/gpu-backend.test.ts",
  "test/integration/llama-internals.test.ts",
  "test/integration/logprobs.test.ts",
  "test/integration/limits.test.ts",
  "test/integration/llama-server.test.ts",
  "test/integration/overload.test.ts",
  "test/integration/sampling-distribution.test.ts",
  "test/integration/usage.test.ts",
  "src/chat/real-models.test.ts",
  "src/models/fetch.test.ts",
];

/** Whole deployments: the CLI against server processes, replicas sharing stores, shutdown, Chromium. */
const E2E = ["test/e2e/**/*.test.ts"];

/**
 * Real client libraries (openai-node, the Vercel AI SDK, LangChain JS; Python ones in the venv of
 * scripts/setup-clients.sh) against one `hearth serve` of the default model, started once for the whole tier.
 */
const CLIENTS = ["test/clients/**/*.test.ts"];

// Throwaway data dirs (PGlite clusters, secrets) in memory where the machine has a tmpfs: PGlite waits on the
// disk far more than it computes, and these tiers test Hearth, not the disk. Model and e2e tiers keep the disk.
const MEMORY_TMP = existsSync("/dev/shm") ? { TMPDIR: "/dev/shm" } : {};

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          env: MEMORY_TMP,
          include: ALL,
          exclude: [...configDefaults.exclude, ...INTEGRATION, ...MODEL, ...E2E, ...CLIENTS],
          // Nothing shared: temp dirs and in-memory stores only, so files run side by side. The PGlite files
          // wait on WASM and timers more than they compute: two workers on two cores halve the wall time.
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          env: MEMORY_TMP,
          include: INTEGRATION,
          exclude: [...configDefaults.exclude, ...MODEL],
          // One PostgreSQL and one Redis for every file: one file at a time.
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "model",
          include: MODEL,
          // The model takes every core; timings and ports must not compete with another file.
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: E2E,
          fileParallelism: false,
          sequence: { groupOrder: 3 },
        },
      },
      {
        extends: true,
        test: {
          name: "clients",
          include: CLIENTS,
          globalSetup: ["test/clients/global-setup.ts"],
          // One server for every file; the model takes every core.
          fileParallelism: false,
          sequence: { groupOrder: 4 },
        },
      },
    ],
  },
});
