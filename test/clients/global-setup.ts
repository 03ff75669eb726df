// The client tier's one `hearth serve` of the default model (started before the first file, stopped after the last),
// its request log in a file, and the clients of scripts/setup-clients.sh (the Python venv, Codex CLI), handed to the
// test files with vitest's provide/inject.
import { execFile } from "node:child_process";
import { createWriteStream, existsSync, mkdtempSync, rmSync, type WriteStream } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { TestProject } from "vitest/node";
import { SMOLLM2_MODEL, startServerWithModels } from "../support/models.js";
import type { ServerProcess } from "../support/server-process.js";

const SETUP_SCRIPT = join(import.meta.dirname, "..", "..", "scripts", "setup-clients.sh");

declare module "vitest" {
  export interface ProvidedContext {
    /** `http://127.0.0.1:PORT/v1` of the tier's server: what every library is pointed at. */
    hearthBaseUrl: string;
    /** The bootstrap API key of org `default` (every configured model granted). */
    hearthApiKey: string;
    /** The id of the served model (the default one). */
    hearthModel: string;
    /** The served model's context per sequence (tokens), as hearth.yaml gives it. */
    hearthContextSize: number;
    /** A file the server's output is copied to as it comes: one JSON line per request served (request-log.ts). */
    hearthLogFile: string;
    /** The client-library venv's python (scripts/setup-clients.sh). */
    clientsPython: string;
    /** Codex CLI (`@openai/codex`, test/clients/npm-tools.txt) in the clients cache. */
    clientsCodex: string;
  }
}

interface ClientsCache {
  python: string;
  codex: string;
}

/**
 * The clients cache: made by the script on a machine's first run (pip and npm, from their registries), then reused.
 * `.ci/run` makes it before the tests, as it builds llama-server, so CI's tests only ever reuse it.
 */
async function clientsCache(): Promise<ClientsCache> {
  const { stdout } = await promisify(execFile)(SETUP_SCRIPT, [], { maxBuffer: 16 * 1024 * 1024 });
  const cache = stdout.trim().split("\n").at(-1);
  if (cache === undefined || cache === "") throw new Error("setup-clients.sh printed no cache directory");
  const clients = {
    python: join(cache, "venv", "bin", "python"),
    codex: join(cache, "npm", "node_modules", ".bin", "codex"),
  };
  for (const path of Object.values(clients)) {
    if (!existsSync(path)) throw new Error(`setup-clients.sh: ${path} is missing from the cache`);
  }
  return clients;
}

let server: ServerProcess | undefined;
let logDir: string | undefined;
let log: WriteStream | undefined;

export async function setup(project: TestProject): Promise<void> {
  const clients = await clientsCache();
  server = await startServerWithModels([SMOLLM2_MODEL]);
  logDir = mkdtempSync(join(tmpdir(), "hearth-clients-log-"));
  const logFile = join(logDir, "hearth.log");
  const stream = createWriteStream(logFile);
  log = stream;
  stream.write(server.output());
  server.child.stdout?.on("data", (data: Buffer) => stream.write(data));
  server.child.stderr?.on("data", (data: Buffer) => stream.write(data));
  project.provide("hearthBaseUrl", `${server.url}/v1`);
  project.provide("hearthApiKey", server.apiKey);
  project.provide("hearthModel", SMOLLM2_MODEL.id);
  project.provide("hearthContextSize", SMOLLM2_MODEL.contextSize);
  project.provide("hearthLogFile", logFile);
  project.provide("clientsPython", clients.python);
  project.provide("clientsCodex", clients.codex);
}

export async function teardown(): Promise<void> {
  await server?.stop();
  log?.end();
  if (logDir !== undefined) rmSync(logDir, { recursive: true, force: true });
}
