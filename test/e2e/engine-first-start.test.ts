// A first start without the tuned engine build, as a new user meets it: `hearth serve` serves at once on the
// prebuilt binaries, says so in one log line and in /health, and starts `hearth engine build` in the background at
// low priority. That build is safe to interrupt: killed (-9, with its compilers), it leaves no build behind, the
// cache says "missing", and the next build clears the dead one's work and starts afresh.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { getPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planEngineBuild } from "../../src/engine/llama/engine-build.js";
import { engineBuildRunning, processAlive } from "../../src/engine/llama/engine-builder.js";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
const BIN = join(import.meta.dirname, "..", "..", "bin", "hearth.js");
const cache = mkdtempSync(join(tmpdir(), "hearth-engine-cache-"));
// auto, the default: the tuned build when the cache has it, else the prebuilt binaries and a build in the background.
const env = { HEARTH_ENGINE_CACHE: cache, HEARTH_ENGINE_BACKGROUND_BUILD: "1", HEARTH_ENGINE_BUILD: "auto" };
const plan = planEngineBuild({ ...process.env, ...env });
const builds = new Set<number>();

/** Kills a build and its compilers: it leads its own process group (started detached). */
function killBuild(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

interface Status {
  key: string;
  state: "built" | "building" | "missing";
  build: unknown;
}

async function status(server: ServerProcess): Promise<Status> {
  const { stdout } = await hearthCli(server, ["engine", "status", "--json"], env);
  return JSON.parse(stdout) as Status;
}

/** The running build's pid, from its lock (undefined once its holder is dead). */
const buildPid = () => engineBuildRunning(plan);

let server: ServerProcess;

beforeAll(async () => {
  server = await startServerProcess({ env });
});

afterAll(async () => {
  for (const pid of builds) killBuild(pid);
  const pid = await buildPid();
  if (pid !== undefined) killBuild(pid);
  await server?.stop();
  rmSync(cache, { recursive: true, force: true });
});

describe("a first start without the tuned build", () => {
  it("serves at once on the prebuilt binaries and says so: one log line, /health", async () => {
    const completion = await openaiClient(server).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Name a color." }],
      max_tokens: 8,
    });
    expect(completion.choices[0]?.message.content?.length).toBeGreaterThan(0);
    const health = (await (await fetch(`${server.url}/health`)).json()) as Record<string, unknown>;
    expect(health).toMatchObject({
      engine: {
        gpu: false,
        build: {
          build: "prebuilt",
          key: plan.key,
          missing: true,
          reason: expect.stringMatching(/not in the engine cache/),
        },
      },
      models: [{ id: MODEL, status: "ok", engine_build: "prebuilt" }],
    });
    await expect.poll(() => server.output(), { timeout: 10_000 }).toMatch(/compiling in the background/);
    const lines = server
      .output()
      .split("\n")
      .filter((l) => l.includes('"msg":"engine: '));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/"level":40/);
    expect(lines[0]).toContain(`"build":"${plan.key}"`);
  });

  it("builds in the background at the lowest priority; a kill -9 leaves no build, and the next one starts afresh", async () => {
    const first = await buildPid();
    expect(first).toBeDefined();
    if (first === undefined) return;
    builds.add(first);
    expect(processAlive(first)).toBe(true);
    expect(getPriority(first)).toBe(19);
    expect(await status(server)).toMatchObject({ key: plan.key, state: "building", build: null });
    const work = join(cache, `${plan.key}.work-${first}`);
    await expect.poll(() => existsSync(work), { timeout: 30_000 }).toBe(true);

    killBuild(first);
    await expect.poll(() => processAlive(first), { timeout: 10_000 }).toBe(false);
    expect(await status(server)).toMatchObject({ state: "missing", build: null });
    // What the dead build left: its work folder and its lock, never a build.
    expect(existsSync(work)).toBe(true);
    expect(existsSync(join(plan.dir, "hearth-build.json"))).toBe(false);

    // The service is untouched by the build's death.
    const again = await openaiClient(server).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Name a fruit." }],
      max_tokens: 4,
    });
    expect(again.choices[0]?.finish_reason).toBeDefined();

    // The next build takes the dead one's lock and clears its work.
    const next = spawn(process.execPath, [BIN, "engine", "build"], {
      env: { ...process.env, ...env },
      detached: true,
      stdio: "ignore",
    });
    if (next.pid !== undefined) builds.add(next.pid);
    await expect.poll(() => buildPid(), { timeout: 30_000 }).toBe(next.pid);
    await expect.poll(() => existsSync(work), { timeout: 30_000 }).toBe(false);
    await expect
      .poll(() => readdirSync(cache).filter((name) => name.includes(".work-")), { timeout: 30_000 })
      .toEqual([`${plan.key}.work-${next.pid}`]);
    expect(await status(server)).toMatchObject({ state: "building" });
  });
});
