// The server the HTTP phase drives: a running one (HEARTH_URL + HEARTH_API_KEY) or a fresh `hearth serve` process.
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { startServerProcess } from "../test/support/server-process.js";

export interface BenchServer {
  url: string;
  apiKey: string;
  /** True when the benchmark started the process (and stop() ends it). */
  owned: boolean;
  /** The server's process id when it runs on this machine under the benchmark (for the CPU noise meter). */
  pid: number | undefined;
  stop(): Promise<void>;
}

const COMPILED_CLI = join(import.meta.dirname, "..", "dist", "cli", "index.js");

export async function openServer(
  existing: { url: string; apiKey: string } | undefined,
  parallel: number,
): Promise<BenchServer> {
  if (existing !== undefined) return { ...existing, owned: false, pid: undefined, stop: async () => {} };
  // bin/hearth.js runs the compiled CLI: the benchmark measures what `npm run build` last produced.
  if (!existsSync(COMPILED_CLI))
    throw new Error("dist/ is missing: run `npm run build` before `npm run bench`.");
  const server = await startServerProcess({ args: ["--parallel", String(parallel)] });
  // An interrupted benchmark must not leave its server running (and loading the machine).
  const interrupted = (signal: NodeJS.Signals) => {
    server.child.kill("SIGTERM");
    rmSync(server.dataDir, { recursive: true, force: true });
    process.exit(signal === "SIGINT" ? 130 : 143);
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  return {
    url: server.url,
    apiKey: server.apiKey,
    owned: true,
    pid: server.child.pid,
    stop: async () => {
      process.off("SIGINT", interrupted);
      process.off("SIGTERM", interrupted);
      await server.stop();
    },
  };
}
