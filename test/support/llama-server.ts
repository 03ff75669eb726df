// llama.cpp's own llama-server (built by scripts/build-llama-server.sh, on node-llama-cpp's prebuilt libraries) as a
// real foreign upstream for tests: build or reuse the cached binary, start it on a GGUF, stop it.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { restartablePort } from "./ports.js";

const BUILD_SCRIPT = join(import.meta.dirname, "..", "..", "scripts", "build-llama-server.sh");

let binary: Promise<string> | undefined;

/**
 * The llama-server binary's path: runs the build script once per process (it reuses the cached build, so this is
 * quick once built; a first build takes minutes). Rejects with the script's output when it fails.
 */
export function ensureLlamaServer(): Promise<string> {
  binary ??= promisify(execFile)(BUILD_SCRIPT, [], { maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout }) => {
      const path = stdout.trim().split("\n").at(-1);
      if (path === undefined || path === "") throw new Error("build-llama-server.sh printed no binary path");
      return path;
    },
    (error: unknown) => {
      binary = undefined;
      throw error;
    },
  );
  return binary;
}

/** The default model's GGUF (SmolLM2), fetched into the models dir like the server does when it is not there yet. */
export async function defaultModelPath(): Promise<string> {
  const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
  const model = config.models[0];
  if (model === undefined) throw new Error("no default model");
  return ensureModelFile(model, { modelsDir: config.modelsDir });
}

export interface StartLlamaServerOptions {
  modelPath: string;
  /** Default: a free port (llama-server has no port 0). */
  port?: number;
  /** Sequences decoded together (`-np`); default 4. */
  parallel?: number;
  /** The whole context, shared by the sequences (`-c`); default 4096. */
  contextSize?: number;
  /** The model id `/v1/models` reports (`--alias`); default: llama-server's own (the file name). */
  alias?: string;
  extraArgs?: string[];
  /** Added to the inherited environment (e.g. `GLIBC_TUNABLES`). */
  env?: Record<string, string>;
}

export interface LlamaServer {
  /** `http://127.0.0.1:PORT` (/health, /tokenize, /metrics). */
  url: string;
  /** `${url}/v1`, the OpenAI-compatible base. */
  baseUrl: string;
  process: ChildProcess;
  /** Everything the process wrote, for failures and log assertions. */
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

const READY_TIMEOUT_MS = 120_000;

export async function startLlamaServer(options: StartLlamaServerOptions): Promise<LlamaServer> {
  const bin = await ensureLlamaServer();
  // A free port can be taken between the probe and the bind: pick another one then.
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnLlamaServer(bin, options, options.port ?? (await restartablePort()));
    } catch (error) {
      if (!(error instanceof PortInUseError) || options.port !== undefined || attempt >= 3) throw error;
    }
  }
}

class PortInUseError extends Error {}

async function spawnLlamaServer(
  bin: string,
  options: StartLlamaServerOptions,
  port: number,
): Promise<LlamaServer> {
  const args = [
    ...["--model", options.modelPath, "--host", "127.0.0.1", "--port", String(port)],
    ...["--parallel", String(options.parallel ?? 4), "--ctx-size", String(options.contextSize ?? 4096)],
    // /metrics for the tests that watch busy slots; no web UI (none was built).
    "--metrics",
    "--no-webui",
    ...(options.alias === undefined ? [] : ["--alias", options.alias]),
    ...(options.extraArgs ?? []),
  ];
  const child = spawn(bin, args, {
    stdio: ["ignore", "pipe", "pipe"],
    ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } }),
  });
  let output = "";
  const collect = (data: Buffer) => {
    output += data.toString();
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let healthy = false;
  while (!healthy && running() && Date.now() < deadline) {
    // 503 while the model loads, refused before the socket is bound.
    healthy = (await fetch(`${url}/health`).catch(() => undefined))?.status === 200;
    if (!healthy) await new Promise((r) => setTimeout(r, 100));
  }
  if (!healthy) {
    if (running()) child.kill("SIGKILL");
    await exited;
    if (/address already in use|couldn't bind/i.test(output)) throw new PortInUseError(output);
    throw new Error(`llama-server did not become healthy on ${url}:\n${output}`);
  }

  return {
    url,
    baseUrl: `${url}/v1`,
    process: child,
    output: () => output,
    async stop(graceMs = 5_000) {
      if (!running()) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
