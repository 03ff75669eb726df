// `hearth engine build`: compiles node-llama-cpp's addon, with Hearth's patch, for this CPU into the engine cache.
// Offline (the package's own llama.cpp bundle), one build at a time, and safe to interrupt: work happens in a
// private folder and the finished build appears in the cache in one rename, its record written last.
import { spawn } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { cp, mkdir, readdir, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { usableCores } from "./cpu.js";
import {
  ADDON_PATCH_PATH,
  type EngineBuildPlan,
  type EngineBuildRecord,
  engineCacheRoot,
  findEngineBuild,
  LLAMA_CPP_PATCH_PATHS,
  nodeLlamaCppDir,
  RECORD_FILE,
} from "./engine-build.js";

/** The build could not start or did not finish; the message says why, for the operator. */
export class EngineBuildError extends Error {
  override name = "EngineBuildError";
}

export interface BuildEngineOptions {
  plan: EngineBuildPlan;
  /** Progress and outcome, one line each. */
  log: (line: string) => void;
  /** Build again even when the cache has this build. */
  force?: boolean;
  env?: NodeJS.ProcessEnv;
  /**
   * A GGUF the finished build must run before it is published (`selfCheck`); undefined: no model file is on this
   * machine yet, and the build is published unchecked (its log says so).
   */
  checkModel?: string | undefined;
}

/** The build log of `plan`, beside the cache entry. */
export function engineBuildLogPath(plan: EngineBuildPlan): string {
  return `${plan.dir}.log`;
}

/** The last build of `plan` that failed: when, and why (cleared by a build that succeeds). */
export interface EngineBuildFailure {
  at: string;
  message: string;
}

const failurePath = (plan: EngineBuildPlan) => `${plan.dir}.failed`;

/** Why the last build of `plan` failed, or undefined when none did (or one succeeded since). */
export async function engineBuildFailure(plan: EngineBuildPlan): Promise<EngineBuildFailure | undefined> {
  try {
    return JSON.parse(await readFile(failurePath(plan), "utf8")) as EngineBuildFailure;
  } catch {
    return undefined;
  }
}

/** Whether process `pid` is running (one of another user counts: it exists). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The pid that holds `lockDir`, or undefined when nobody (or a dead process) does. */
async function lockHolder(lockDir: string): Promise<number | undefined> {
  const pid = Number(await readFile(join(lockDir, "pid"), "utf8").catch(() => ""));
  return Number.isInteger(pid) && pid > 0 && processAlive(pid) ? pid : undefined;
}

/** Whether a build of `plan` is running now (another process holds its lock). */
export async function engineBuildRunning(plan: EngineBuildPlan): Promise<number | undefined> {
  return lockHolder(`${plan.dir}.lock`);
}

/**
 * Takes the build lock: a directory holding the builder's pid, made whole in a private name and renamed into place
 * (atomic), so no one ever sees the lock without its pid. A lock left by a dead process is taken over.
 */
async function acquireLock(lockDir: string): Promise<() => Promise<void>> {
  const mine = `${lockDir}.${process.pid}`;
  await mkdir(mine, { recursive: true });
  await writeFile(join(mine, "pid"), String(process.pid));
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await rename(mine, lockDir);
        return () => rm(lockDir, { recursive: true, force: true });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== "EEXIST" && code !== "ENOTEMPTY") throw err;
        const holder = await lockHolder(lockDir);
        if (holder !== undefined)
          throw new EngineBuildError(`another engine build is running (pid ${holder})`);
        await rm(lockDir, { recursive: true, force: true });
      }
    }
    throw new EngineBuildError(`cannot take the engine build lock ${lockDir}`);
  } finally {
    await rm(mine, { recursive: true, force: true });
  }
}

/** Work folders of builds that were interrupted (their process is gone). */
async function removeAbandonedWork(plan: EngineBuildPlan): Promise<void> {
  const root = dirname(plan.dir);
  const prefix = `${plan.key}.work-`;
  for (const name of await readdir(root).catch(() => [] as string[])) {
    if (!name.startsWith(prefix) && !name.startsWith(`${plan.key}.staging-`)) continue;
    const pid = Number(name.split("-").at(-1));
    if (!Number.isInteger(pid) || !processAlive(pid) || pid === process.pid)
      await rm(join(root, name), { recursive: true, force: true });
  }
}

/** Runs a command, its output appended to `logFile`; rejects with the command's last lines when it fails. */
function run(
  command: string,
  args: readonly string[],
  options: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    logFile: string;
    onLine?: (line: string) => void;
    /** How errors name the command; default the command line. */
    name?: string;
    /** Killed (SIGKILL) when it runs longer; default no limit. */
    timeoutMs?: number;
  },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const log = createWriteStream(options.logFile, { flags: "a" });
    const tail: string[] = [];
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const onData = (chunk: Buffer) => {
      log.write(chunk);
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() === "") continue;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        options.onLine?.(line);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    let timedOut = false;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            child.kill("SIGKILL");
          }, options.timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      log.end();
      reject(new EngineBuildError(`${command} did not start: ${err.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      log.end();
      if (code === 0) return resolve();
      const name = options.name ?? `${command} ${args.join(" ")}`;
      const why = timedOut
        ? `did not finish within ${options.timeoutMs} ms`
        : `failed (${signal ?? `exit ${code}`})`;
      reject(new EngineBuildError(`${name} ${why}:\n${tail.slice(-8).join("\n")}`));
    });
  });
}

/**
 * The self-check, run in a child process so that a build that traps cannot take the builder with it: loads the
 * build from the work copy, then evaluates prompts in four sequences in one batch and decodes them together, the
 * shapes a served model runs (kernels a -march=native build picks for batches of many rows, such as AMX's, run
 * only there). node-llama-cpp's getLlama from the copy finds the build among the copy's local builds by the plan's
 * CMake options, as the service finds it in the cache.
 */
const SELF_CHECK = `
const { getLlama, LlamaLogLevel } = await import(process.env.HEARTH_CHECK_PACKAGE);
const llama = await getLlama({ gpu: false, build: "never", cmakeOptions: JSON.parse(process.env.HEARTH_CHECK_CMAKE),
  logLevel: LlamaLogLevel.error, progressLogs: false });
if (llama.buildType !== "localBuild") throw new Error("node-llama-cpp did not take the new build");
const model = await llama.loadModel({ modelPath: process.env.HEARTH_CHECK_MODEL });
const context = await model.createContext({ sequences: 4, contextSize: 4 * 512, batchSize: 512, flashAttention: true,
  threads: Number(process.env.HEARTH_CHECK_THREADS) });
const sequences = Array.from({ length: 4 }, () => context.getSequence());
const prompt = model.tokenize("A lighthouse keeper finds a message in a bottle on the shore at dawn. ".repeat(6));
await Promise.all(sequences.map((s, i) => s.evaluateWithoutGeneratingNewTokens(prompt.slice(i))));
await Promise.all(sequences.map(async (s) => {
  let n = 0;
  for await (const token of s.evaluate([prompt[0]], { temperature: 0 })) if (++n >= 8) break;
}));
process.stdout.write("self-check passed\\n");
process.exit(0);
`;

/** A self-check that has not finished by then has hung (it takes about 2 s): the build fails. */
const SELF_CHECK_TIMEOUT_MS = 120_000;

/** Runs SELF_CHECK on `plan`'s build in `packageDir`; rejects with an EngineBuildError saying why it failed. */
export async function selfCheck(options: {
  packageDir: string;
  plan: EngineBuildPlan;
  modelPath: string;
  env: NodeJS.ProcessEnv;
  logFile: string;
  timeoutMs?: number;
}): Promise<void> {
  try {
    await run(process.execPath, ["--input-type=module", "-e", SELF_CHECK], {
      cwd: options.packageDir,
      env: {
        ...options.env,
        HEARTH_CHECK_PACKAGE: pathToFileURL(join(options.packageDir, "dist", "index.js")).href,
        HEARTH_CHECK_CMAKE: JSON.stringify(options.plan.cmakeOptions),
        HEARTH_CHECK_MODEL: options.modelPath,
        // The service's own thread count: more threads than cores make a pool's workers wait on each other (an
        // unset count here was node-llama-cpp's 4 on 2 cores, and one batch took 14 s).
        HEARTH_CHECK_THREADS: String(usableCores()),
      },
      logFile: options.logFile,
      name: "the self-check",
      timeoutMs: options.timeoutMs ?? SELF_CHECK_TIMEOUT_MS,
    });
  } catch (err) {
    throw new EngineBuildError(
      `the new build failed its self-check on ${basename(options.modelPath)}, so it is not used: ` +
        `${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** Refuses early, with the reason, what would fail (or download) half-way through the build. */
function checkPrerequisites(packageDir: string): void {
  if (!existsSync(join(packageDir, "llama", "gitRelease.bundle")))
    throw new EngineBuildError(
      "node-llama-cpp's llama.cpp bundle (llama/gitRelease.bundle) is missing; the build never downloads one",
    );
  for (const tool of ["cmake", "patch", "git"]) {
    const found = (process.env.PATH ?? "")
      .split(":")
      .some((dir) => dir !== "" && existsSync(join(dir, tool)));
    if (!found) throw new EngineBuildError(`the engine build needs ${tool} on the PATH`);
  }
}

/**
 * Builds the tuned engine of `plan` into the cache and returns its record; returns the cached one when it exists
 * (unless `force`).
 */
export async function buildEngine(options: BuildEngineOptions): Promise<EngineBuildRecord> {
  const { plan, log } = options;
  if (options.force !== true) {
    const cached = await findEngineBuild(plan);
    if (cached !== undefined) return cached;
  }
  const packageDir = nodeLlamaCppDir();
  checkPrerequisites(packageDir);
  await mkdir(engineCacheRoot(options.env), { recursive: true });
  const release = await acquireLock(`${plan.dir}.lock`);
  const work = `${plan.dir}.work-${process.pid}`;
  const staging = `${plan.dir}.staging-${process.pid}`;
  const logFile = engineBuildLogPath(plan);
  const started = performance.now();
  try {
    await removeAbandonedWork(plan);
    await writeFile(
      logFile,
      `hearth engine build ${plan.key} (node-llama-cpp ${plan.nodeLlamaCppVersion})\n`,
    );
    // A private copy of the package: its own build writes into the package's folder, and the installed one stays
    // untouched. Its dependencies resolve through a node_modules link beside it.
    const copy = join(work, "node-llama-cpp");
    await cp(packageDir, copy, {
      recursive: true,
      filter: (source) => {
        const rel = source.slice(packageDir.length);
        return rel !== "/llama/localBuilds" && rel !== "/llama/llama.cpp" && rel !== "/llama/lastBuild.json";
      },
    });
    await symlink(dirname(packageDir), join(work, "node_modules"), "dir");
    log("applying Hearth's patch to node-llama-cpp's addon (thread pool, decode thread, draws)");
    await run("patch", ["-p1", "--forward", "--batch", "-i", ADDON_PATCH_PATH], {
      cwd: join(copy, "llama"),
      env: process.env,
      logFile,
    });
    const env: NodeJS.ProcessEnv = { ...(options.env ?? process.env) };
    // The package's own bundle and nothing else: no release override, no download fallback.
    delete env.NODE_LLAMA_CPP_REPO;
    delete env.NODE_LLAMA_CPP_REPO_RELEASE;
    for (const name of Object.keys(env))
      if (name.startsWith("NODE_LLAMA_CPP_CMAKE_OPTION_")) delete env[name];
    for (const [name, value] of Object.entries(plan.cmakeOptions))
      env[`NODE_LLAMA_CPP_CMAKE_OPTION_${name}`] = value;
    const cli = join(copy, "dist", "cli", "cli.js");
    // The clone first (from the bundle, with node-llama-cpp's own patches), then Hearth's patches to llama.cpp, then
    // the compile of that source.
    await run(process.execPath, [cli, "source", "download", "--skipBuild", "--noUsageExample"], {
      cwd: copy,
      env,
      logFile,
    });
    for (const path of LLAMA_CPP_PATCH_PATHS) {
      log(`applying ${basename(path)} to llama.cpp`);
      await run("patch", ["-p1", "--forward", "--batch", "-i", path], {
        cwd: join(copy, "llama", "llama.cpp"),
        env: process.env,
        logFile,
      });
    }
    log(
      `compiling llama.cpp and the addon for this CPU (log: ${logFile}); ` +
        "this takes 3-6 minutes on 2 idle cores, longer on busy ones",
    );
    let lastReported = 0;
    await run(process.execPath, [cli, "source", "build", "--gpu", "false", "--noUsageExample"], {
      cwd: copy,
      env,
      logFile,
      onLine: (line) => {
        // ninja's "[n/total]": a line every 10 %.
        const step = /^\[(\d+)\/(\d+)\]/.exec(line);
        if (step === null) return;
        const percent = Math.floor((Number(step[1]) / Number(step[2])) * 10) * 10;
        if (percent > lastReported) {
          lastReported = percent;
          log(`compiling: ${percent} %`);
        }
      },
    });
    const localBuilds = join(copy, "llama", "localBuilds");
    const folders = [];
    for (const name of await readdir(localBuilds)) {
      if (existsSync(join(localBuilds, name, "buildDone.status"))) folders.push(name);
    }
    const folder = folders[0];
    if (folder === undefined || folders.length > 1)
      throw new EngineBuildError(`expected one finished build in ${localBuilds}, found ${folders.length}`);
    if (options.checkModel === undefined) log("self-check skipped: no model file is on this machine yet");
    else {
      log(`self-check: ${basename(options.checkModel)} on the new build (batched prompts and decodes)`);
      await selfCheck({ packageDir: copy, plan, modelPath: options.checkModel, env, logFile });
    }
    const record: EngineBuildRecord = {
      key: plan.key,
      folder,
      nodeLlamaCppVersion: plan.nodeLlamaCppVersion,
      cmakeOptions: { ...plan.cmakeOptions },
      builtAt: new Date().toISOString(),
      buildSeconds: Math.round((performance.now() - started) / 1000),
    };
    await mkdir(staging);
    await rename(join(localBuilds, folder), join(staging, folder));
    await writeFile(join(staging, RECORD_FILE), `${JSON.stringify(record, null, 2)}\n`);
    await rm(plan.dir, { recursive: true, force: true });
    await rename(staging, plan.dir);
    await rm(failurePath(plan), { force: true });
    log(`engine build ${plan.key} is ready (${record.buildSeconds} s); it serves from the next start`);
    return record;
  } catch (err) {
    // Remembered, so a start does not compile again what failed (`hearth engine build` tries again).
    const failure: EngineBuildFailure = {
      at: new Date().toISOString(),
      message: err instanceof Error ? err.message : String(err),
    };
    await writeFile(failurePath(plan), `${JSON.stringify(failure)}\n`).catch(() => undefined);
    throw err;
  } finally {
    await rm(work, { recursive: true, force: true });
    await rm(staging, { recursive: true, force: true });
    await release();
  }
}
