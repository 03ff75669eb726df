// A PostgreSQL and a Redis of the test's own, on free ports in a temp dir, for tests that stop, hang or kill them
// (the shared servers must never be touched). PostgreSQL comes from /usr/lib/postgresql/*/bin; as root, it runs
// as the `postgres` user (initdb refuses root).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { restartablePort } from "./ports.js";

const run = promisify(execFile);

/** Ports its servers restart on (see ports.ts). */
export const freePort = restartablePort;

function postgresBin(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const version = versions.find((v) => existsSync(join(root, v, "bin", "pg_ctl")));
  if (version === undefined) throw new Error(`no PostgreSQL server binaries under ${root}`);
  return join(root, version, "bin");
}

export interface PrivatePostgres {
  url: string;
  /** pg_ctl stop -m immediate: every connection is cut at once, new ones are refused. */
  stopImmediately(): Promise<void>;
  start(): Promise<void>;
  /** SIGSTOP (or SIGCONT) the postmaster and every backend: the server hangs, connections stay open. */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  query<R extends pg.QueryResultRow>(text: string): Promise<R[]>;
  destroy(): Promise<void>;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), "hearth-private-pg-"));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const ids = async (flag: string) => Number((await run("id", [flag, "postgres"])).stdout.trim());
    chownSync(dir, await ids("-u"), await ids("-g"));
  }
  const as = async (cmd: string, args: string[]) => {
    const full = join(bin, cmd);
    return asRoot ? run("runuser", ["-u", "postgres", "--", full, ...args]) : run(full, args);
  };
  const data = join(dir, "data");
  const port = await freePort();
  await as("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
  // Fast but crash-safe for the crashes these tests cause: fsync and full-page writes only guard against the
  // machine losing its page cache, which stopping PostgreSQL does not. synchronous_commit stays on: with it off,
  // the server acknowledges a commit before writing its WAL, and pg_ctl -m immediate loses the last ~200 ms of
  // acknowledged commits (usage records the meter had written). See test/integration/usage-store-crash.test.ts.
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses=127.0.0.1",
    "-c fsync=off",
    "-c full_page_writes=off",
    "-c max_connections=50",
  ].join(" ");
  const start = async () => {
    await as("pg_ctl", ["-D", data, "-l", join(dir, "log"), "-o", options, "-w", "-t", "30", "start"]);
  };
  await start();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const pids = async (): Promise<number[]> => {
    // The postmaster's pid is the first line of postmaster.pid; the backends are its children.
    const postmaster = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
    const { stdout } = await run("pgrep", ["-P", String(postmaster)]).catch(() => ({ stdout: "" }));
    return [postmaster, ...stdout.trim().split("\n").filter(Boolean).map(Number)];
  };
  const signalAll = async (signal: NodeJS.Signals) => {
    for (const pid of await pids()) process.kill(pid, signal);
  };
  return {
    url,
    stopImmediately: async () => {
      await as("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    },
    start,
    freeze: () => signalAll("SIGSTOP"),
    thaw: () => signalAll("SIGCONT"),
    async query<R extends pg.QueryResultRow>(text: string) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query<R>(text)).rows;
      } finally {
        await client.end();
      }
    },
    async destroy() {
      if (existsSync(join(data, "postmaster.pid"))) await signalAll("SIGCONT").catch(() => {});
      await as("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivateRedis {
  url: string;
  /** kill -9 */
  kill(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    const started = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      { stdio: ["ignore", "pipe", "ignore"] },
    );
    child = started;
    await new Promise<void>((resolve, reject) => {
      let out = "";
      started.stdout?.on("data", (d: Buffer) => {
        out += d.toString();
        if (out.includes("Ready to accept connections")) resolve();
      });
      started.once("exit", (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
    });
  };
  const kill = async () => {
    const running = child;
    if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGKILL");
    await exited;
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, kill, start, destroy: kill };
}
