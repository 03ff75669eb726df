// One `hearth serve` of both model families for a whole conformance file, and the official client pointed at it
// (kept apart from models.ts, which the benchmarks import outside vitest).
import type OpenAI from "openai";
import { afterAll, beforeAll } from "vitest";
import { startServerWithModels } from "./models.js";
import { openaiClient, type ServerProcess } from "./server-process.js";

/** A server of startServerWithModels for a whole test file, and the official client pointed at it. */
export interface ServedModels {
  readonly server: ServerProcess;
  readonly client: OpenAI;
}

/**
 * Starts one `startServerWithModels()` server before the file's tests and stops it after them; its server and
 * client are read once the tests run.
 */
export function serveModelFamilies(): ServedModels {
  let server: ServerProcess | undefined;
  let client: OpenAI | undefined;
  beforeAll(async () => {
    server = await startServerWithModels();
    client = openaiClient(server);
  });
  afterAll(async () => {
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the models server has not started");
    return value;
  };
  return {
    get server() {
      return started(server);
    },
    get client() {
      return started(client);
    },
  };
}
