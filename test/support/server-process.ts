// Starts a real `hearth serve` process on a free port (a fresh data dir, or one to restart on), and runs the
// hearth CLI against it, for conformance and e2e tests.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import OpenAI from "openai";
import { pgliteTemplate } from "./pglite-template.js";

export interface ServerProcess {
  url: string;
  /** The bootstrap API key of org `default` ("" when the store was already set up: nothing is printed then). */
  apiKey: string;
  /** The first owner of org `default`, printed once at first start (dashboard sign-in); "" like apiKey. */
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
  /** Start on this existing data dir (a restart); it is kept on stop. Default: a fresh one, removed on stop. */
  dataDir?: string;
  /**
   * Wait for the first-start banner (API key and owner). Default true; false for a restart or a replica joining a
   * store that is already set up.
   */
  bootstrap?: boolean;
  /** Node.js options before the script, e.g. `--cpu-prof` (which NODE_OPTIONS does not allow). */
  nodeArgs?: string[];
  /** Another build's `bin/hearth.js` (a before/after comparison); default this checkout's. */
  bin?: string;
}

const BIN = join(import.meta.dirname, "..", "..", "bin", "hearth.js");

/** A `hearth serve` process on a free port and everything it writes (stdout and stderr). */
export interface SpawnedServe {
  child: ChildProcess;
  output(): string;
  /** The exit code once it exits. */
  exited: Promise<number | null>;
}

/** Spawns `hearth serve --port 0 ARGS` with `env` over this process's environment (log level info). */
export function spawnServe(
  env: Record<string, string | undefined>,
  args: string[] = [],
  node: Pick<StartServerProcessOptions, "nodeArgs" | "bin"> = {},
): SpawnedServe {
  const script = [...(node.nodeArgs ?? []), node.bin ?? BIN];
  const child = spawn(process.execPath, [...script, "serve", "--port", "0", ...args], {
    env: { ...process.env, HEARTH_LOG_LEVEL: "info", ...env },
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
  return { child, output: () => output, exited };
}

export async function startServerProcess(options: StartServerProcessOptions = {}): Promise<ServerProcess> {
  const ownDataDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "hearth-test-"));
  if (ownDataDir && options.env?.HEARTH_DATABASE_URL === undefined) {
    cpSync(await pgliteTemplate(), join(dataDir, "pg"), { recursive: true });
  }
  const bootstrap = options.bootstrap ?? true;
  const spawned = spawnServe({ HEARTH_DATA_DIR: dataDir, ...options.env }, options.args, options);
  const { child, exited } = spawned;
  const output = spawned.output;
  const removeDataDir = () => {
    if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 170_000;
  let url: string | undefined;
  let apiKey: string | undefined;
  let owner: RegExpExecArray | null = null;
  let healthy = false;
  while (Date.now() < deadline && child.exitCode === null) {
    url ??= /"url":"(http:\/\/[^"]+)"/.exec(output())?.[1];
    apiKey ??= /^\s+(sk-[A-Za-z0-9_-]+)\s*$/m.exec(output())?.[1];
    owner ??= /^\s+Email:\s+(\S+)\n\s+Password:\s+(\S+)\n/m.exec(output());
    if (url !== undefined) {
      const health = await fetch(`${url}/health`).catch(() => undefined);
      healthy = health?.status === 200;
      if (healthy && (!bootstrap || (apiKey !== undefined && owner !== null))) break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  if (url === undefined || !healthy || (bootstrap && (apiKey === undefined || owner === null))) {
    child.kill("SIGKILL");
    await exited;
    removeDataDir();
    throw new Error(`hearth serve did not become healthy:\n${output()}`);
  }
  return {
    url,
    apiKey: apiKey ?? "",
    ownerEmail: owner?.[1] ?? "",
    ownerPassword: owner?.[2] ?? "",
    dataDir,
    child,
    output,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null) child.kill(signal);
      const code = await exited;
      removeDataDir();
      return code;
    },
  };
}

const execCli = promisify(execFile);

/**
 * Runs `hearth ARGS` against a test server as an operator would: HEARTH_URL is the server, and the admin token is
 * read from its data dir (or given in `env`). Rejects on a non-zero exit, with the output on the error.
 */
export async function hearthCli(
  server: Pick<ServerProcess, "url" | "dataDir">,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string }> {
  return execCli(process.execPath, [BIN, ...args], {
    env: { ...process.env, HEARTH_URL: server.url, HEARTH_DATA_DIR: server.dataDir, ...env },
  });
}

/** The secret of a key created with `hearth keys create` (its last stdout line). */
export async function createKeyWithCli(
  server: Pick<ServerProcess, "url" | "dataDir">,
  org: string,
  env: Record<string, string> = {},
): Promise<string> {
  const { stdout } = await hearthCli(server, ["keys", "create", "--org", org], env);
  return stdout.trim().split("\n").at(-1) ?? "";
}

/** The official client pointed at a test server, without retries so every status is seen as sent. */
export function openaiClient(server: Pick<ServerProcess, "url" | "apiKey">, apiKey = server.apiKey): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 });
}
