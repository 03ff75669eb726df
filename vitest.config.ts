// Test tiers as vitest projects, chosen by folder. `npm test` runs every tier but the conformance and fleet ones,
// one after another (unit, integration, model, e2e, clients); `.ci/run` runs those two after it (`npm run
// test:conformance`, `npm run test:fleet`); `npm run test:<tier>` (or `npx vitest run --project <tier>`) runs one.
// - unit: next to the code (src/**) and test/unit, test/support: model-free, server-free, under a minute;
// - integration (test/integration): PostgreSQL and Redis servers (suites run on PGlite and PostgreSQL too);
// - model (test/model): the real model, loaded in the test's process or by a `hearth serve` the test drives with
//   the openai client;
// - conformance (test/conformance): the API's behaviours on both model families (SmolLM2 and Gemma 3), each file
//   loading both: 208 s of a 1,075 s run on an Intel Xeon (2026-11-28), so `npm test` leaves them to `.ci/run`;
// - e2e (test/e2e): whole deployments: the CLI against server processes, replicas sharing stores, shutdown,
//   Chromium;
// - fleet (test/fleet): the gateway in front of real upstream engines (vLLM, llama-server, other `hearth serve`
//   processes), faults caused for real: the slowest files (fleet-vllm 124 s, fleet 79 s of a 20-minute run on an
//   Intel Xeon, 2026-11-28), so `npm test` leaves them to `.ci/run`;
// - clients (test/clients): real client libraries (openai-node, the Vercel AI SDK, LangChain JS; Python ones, the
//   Agents SDK and the Open Responses checks in the venv of scripts/setup-clients.sh; Codex CLI in its cache)
//   against one `hearth serve` of the default model, started once.
// A test that needs a server or the model lives in that tier's folder, never next to the code.
import { existsSync } from "node:fs";
import { configDefaults, defineConfig } from "vitest/config";

const UNIT = ["src/**/*.test.{ts,tsx}", "test/unit/**/*.test.ts", "test/support/**/*.test.ts"];
const INTEGRATION = ["test/integration/**/*.test.ts"];
const MODEL = ["test/model/**/*.test.ts"];
const CONFORMANCE = ["test/conformance/**/*.test.ts"];
const E2E = ["test/e2e/**/*.test.ts"];
const CLIENTS = ["test/clients/**/*.test.ts"];
const FLEET = ["test/fleet/**/*.test.ts"];

// Throwaway data dirs (PGlite clusters, secrets) in memory where the machine has a tmpfs: PGlite waits on the
// disk far more than it computes, and these tiers test Hearth, not the disk. Model and e2e tiers keep the disk.
const MEMORY_TMP = existsSync("/dev/shm") ? { TMPDIR: "/dev/shm" } : {};

export default defineConfig({
  test: {
    // A test's `hearth serve` never starts a tuned engine build of its own (.ci/run builds it before the tests; the
    // one test of the background build turns this back on).
    env: { HEARTH_ENGINE_BACKGROUND_BUILD: "0" },
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          env: MEMORY_TMP,
          include: UNIT,
          exclude: configDefaults.exclude,
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
          name: "conformance",
          include: CONFORMANCE,
          // As the model tier: the models take every core.
          fileParallelism: false,
          sequence: { groupOrder: 6 },
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: E2E,
          // Two files at a time: they mostly wait (processes starting and draining, a stopped database, Chromium),
          // and each has its own server processes, data dirs, PostgreSQL database (or private PostgreSQL and
          // Redis) and ports, so two on two cores took the tier from 308 s to 217 s (Intel Xeon, 2026-11-28).
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 3 },
        },
      },
      {
        extends: true,
        test: {
          name: "fleet",
          include: FLEET,
          // Each file starts its own engines, which take every core.
          fileParallelism: false,
          sequence: { groupOrder: 5 },
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
