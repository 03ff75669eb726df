// The server the HTTP phase drives: a running one (HEARTH_URL + HEARTH_API_KEY) or a fresh `hearth serve` process.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { startServerProcess } from "../test/support/server-process.js";

export interface BenchServer {
  url: string;
  apiKey: string;
  /** True when the benchmark started the process (and stop() ends it). */
  owned: boolean;
  stop(): Promise<void>;
}

const COMPILED_CLI = join(import.meta.dirname, "..", "dist", "cli", "index.js");

export async function openServer(
  existing: { url: string; apiKey: string } | undefined,
  parallel: number,
): Promise<BenchServer> {
  if (existing !== undefined) return { ...existing, owned: false, stop: async () => {} };
  // bin/hearth.js runs the compiled CLI: the benchmark measures what `npm run build` last produced.
  if (!existsSync(COMPILED_CLI))
    throw new Error("dist/ is missing: run `npm run build` before `npm run bench`.");
  const server = await startServerProcess({ args: ["--parallel", String(parallel)] });
  return {
    url: server.url,
    apiKey: server.apiKey,
    owned: true,
    stop: async () => {
      await server.stop();
    },
  };
}
