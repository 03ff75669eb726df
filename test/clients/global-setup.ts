// The client tier's one `hearth serve` of the default model (started before the first file, stopped after the last)
// and the Python of the client-library venv, handed to the test files with vitest's provide/inject.
import { execFile } from "node:child_process";
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
    /** The client-library venv's python (scripts/setup-clients.sh). */
    clientsPython: string;
  }
}

/**
 * The venv's python: made by the script on a machine's first run (pip, from the package index), then reused from its
 * cache. `.ci/run` makes it before the tests, as it builds llama-server, so CI's tests only ever reuse it.
 */
async function clientsPython(): Promise<string> {
  const { stdout } = await promisify(execFile)(SETUP_SCRIPT, [], { maxBuffer: 16 * 1024 * 1024 });
  const python = stdout.trim().split("\n").at(-1);
  if (python === undefined || python === "") throw new Error("setup-clients.sh printed no python path");
  return python;
}

let server: ServerProcess | undefined;

export async function setup(project: TestProject): Promise<void> {
  const python = await clientsPython();
  server = await startServerWithModels([SMOLLM2_MODEL]);
  project.provide("hearthBaseUrl", `${server.url}/v1`);
  project.provide("hearthApiKey", server.apiKey);
  project.provide("hearthModel", SMOLLM2_MODEL.id);
  project.provide("clientsPython", python);
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
