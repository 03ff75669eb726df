// A real fleet on this machine for the e2e tests: `hearth serve` workers on fixed ports (so one can be restarted
// where the gateway expects it) behind a gateway `hearth serve` whose only model is an upstream one.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { restartablePort } from "./ports.js";
import { type ServerProcess, startServerProcess } from "./server-process.js";

/** The model every worker serves (the default SmolLM2) and the id the gateway serves it under. */
export const WORKER_MODEL = "smollm2-135m-instruct";
export const FLEET_MODEL = "fleet-smol";

/** A port to start a worker on and restart it on (see ports.ts). */
export const freePort = restartablePort;

/**
 * A worker: the default model, two sequences, on `port`; `dataDir` restarts it on its existing store. The gateway
 * owns the queueing (4 in flight per worker, 2 decoding): the worker's own queue time-out is long, so requests
 * that wait inside it on an oversubscribed machine are not refused with a 503 (which ejects the endpoint).
 */
export function startWorker(port: number, dataDir?: string): Promise<ServerProcess> {
  return startServerProcess({
    args: ["--port", String(port), "--parallel", "2", "--queue-timeout-ms", "300000"],
    ...(dataDir === undefined ? {} : { dataDir, bootstrap: false }),
  });
}

export interface Gateway {
  server: ServerProcess;
  configDir: string;
  stop(): Promise<void>;
}

/** The gateway: a hearth.yaml with only `fleet-smol` over the workers, their keys passed via the environment. */
export async function startGateway(workers: readonly { port: number; apiKey: string }[]): Promise<Gateway> {
  const configDir = mkdtempSync(join(tmpdir(), "hearth-fleet-"));
  const endpoints = workers.map(
    (w, i) => `        - url: http://127.0.0.1:${w.port}/v1\n          apiKeyEnv: WORKER${i + 1}_KEY`,
  );
  // Generous first-token and queue bounds: a queued request waits for whole generations on two shared cores.
  const yaml = [
    "models:",
    `  - id: ${FLEET_MODEL}`,
    "    upstream:",
    `      model: ${WORKER_MODEL}`,
    "      endpoints:",
    ...endpoints,
    "      maxInFlight: 4",
    "      maxQueue: 16",
    "      queueTimeoutMs: 60000",
    "      probeIntervalMs: 500",
    "      firstTokenTimeoutMs: 60000",
    "",
  ].join("\n");
  const configPath = join(configDir, "hearth.yaml");
  writeFileSync(configPath, yaml);
  const env = Object.fromEntries(workers.map((w, i) => [`WORKER${i + 1}_KEY`, w.apiKey]));
  const server = await startServerProcess({ env, args: ["--config", configPath] }).catch((err: unknown) => {
    rmSync(configDir, { recursive: true, force: true });
    throw err;
  });
  return {
    server,
    configDir,
    async stop() {
      await server.stop();
      rmSync(configDir, { recursive: true, force: true });
    },
  };
}

/** The sum of a Prometheus metric's samples (every label set), from a server's `/metrics`. */
export async function metricSum(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(" ").at(-1));
  }
  return sum;
}

export interface HealthBody {
  status: string;
  models: { id: string; status: string; endpoints?: { url: string; status: string; error?: string }[] }[];
}

export async function health(url: string): Promise<{ status: number; body: HealthBody }> {
  const response = await fetch(`${url}/health`);
  return { status: response.status, body: (await response.json()) as HealthBody };
}

/** The status `/health` shows for the endpoint on `port`. */
export async function endpointStatus(gatewayUrl: string, port: number): Promise<string | undefined> {
  const { body } = await health(gatewayUrl);
  const endpoints = body.models.find((m) => m.id === FLEET_MODEL)?.endpoints ?? [];
  return endpoints.find((e) => e.url === `http://127.0.0.1:${port}/v1`)?.status;
}

/** Polls `check` every 50 ms until it returns true; fails after `timeoutMs` with `what`. Returns the time taken. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
): Promise<number> {
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    if (await check().catch(() => false)) return Date.now() - start;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
