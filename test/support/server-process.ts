// Starts a real `hearth serve` process on a free port with a fresh data dir, for conformance and e2e tests.
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { pgliteTemplate } from "./pglite-template.js";

export interface ServerProcess {
  url: string;
  /** The bootstrap API key of org `default`. */
  apiKey: string;
  /** The first owner of org `default`, printed once at first start (dashboard sign-in). */
  ownerEmail: string;
  ownerPassword: string;
  dataDir: string;
  child: ChildProcess;
  /** Everything the process wrote (stdout and stderr), for log assertions. */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface StartServerProcessOptions {
  env?: Record<string, string>;
  args?: string[];
}

const BIN = join(import.meta.dirname, "..", "..", "bin", "hearth.js");

export async function startServerProcess(options: StartServerProcessOptions = {}): Promise<ServerProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), "hearth-test-"));
  if (options.env?.HEARTH_DATABASE_URL === undefined) {
    cpSync(await pgliteTemplate(), join(dataDir, "pg"), { recursive: true });
  }
  const child = spawn(process.execPath, [BIN, "serve", "--port", "0", ...(options.args ?? [])], {
    env: { ...process.env, HEARTH_DATA_DIR: dataDir, HEARTH_LOG_LEVEL: "info", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const deadline = Date.now() + 170_000;
  let url: string | undefined;
  let apiKey: string | undefined;
  let owner: RegExpExecArray | null = null;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`hearth serve exited early:\n${output}`);
    url ??= /"url":"(http:\/\/[^"]+)"/.exec(output)?.[1];
    apiKey ??= /^\s+(sk-[A-Za-z0-9_-]+)\s*$/m.exec(output)?.[1];
    owner ??= /^\s+Email:\s+(\S+)\n\s+Password:\s+(\S+)\n/m.exec(output);
    if (url !== undefined) {
      const health = await fetch(`${url}/health`).catch(() => undefined);
      if (health?.status === 200 && apiKey !== undefined && owner !== null) break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  if (url === undefined || apiKey === undefined || owner === null) {
    child.kill("SIGKILL");
    throw new Error(`hearth serve did not become healthy:\n${output}`);
  }
  return {
    url,
    apiKey,
    ownerEmail: owner[1] ?? "",
    ownerPassword: owner[2] ?? "",
    dataDir,
    child,
    output: () => output,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null) child.kill(signal);
      const code = await exited;
      rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}

/** The official client pointed at a test server, without retries so every status is seen as sent. */
export function openaiClient(server: Pick<ServerProcess, "url" | "apiKey">, apiKey = server.apiKey): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 });
}
