// Which llama.cpp build serves the embedded models: Hearth's tuned build (node-llama-cpp's addon compiled for this
// CPU with a persistent thread pool per context) when `hearth engine build` has made it, else the prebuilt binaries.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { lstat, mkdir, readFile, readlink, rm, symlink } from "node:fs/promises";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The patch to node-llama-cpp's addon (one file, applied by the builder). */
export const ADDON_PATCH_PATH = nativeFile("node-llama-cpp-addon.diff");

/**
 * The patches to the llama.cpp source node-llama-cpp bundles, applied in this order by the builder after the clone.
 *
 * The AMX tile configuration: the bundled llama.cpp (node-llama-cpp 3.22.1) fills it in a stack buffer whose stores
 * GCC drops (it does not see that `_tile_loadconfig` reads it): the tiles stay unconfigured and the first batched
 * decode on a -march=native build with AMX died with SIGILL (`tilezero` in `tinygemm_kernel_amx`) on an Intel Xeon,
 * three runs out of three. The patch loads a constant configuration instead, as llama.cpp's pull request 26954 does.
 *
 * The stream copy: node-llama-cpp's contexts keep each sequence in a KV stream of its own, and copying a prefix from
 * one sequence to another (`llama_memory_seq_cp`) copied the whole stream, every cell of every layer (47 MB for
 * SmolLM2 at 2,048 cells), on the next decode, while every other sequence waited for it. The patch copies the source's
 * used cells only (`used_max_p1`): a conversation of 200 tokens moves a tenth of that. Where V is stored transposed (no
 * flash attention) V is copied whole, as before.
 *
 * The Q4_1 row pairs: on x86 ggml multiplies Q4_1 weights (the default model's) one row by one column per call,
 * unpacking each weight block again for every column of a batch and converting each column's scales again for every
 * row. The patch's kernel takes two rows by two columns (or by one, for a batch's lone column), each sum computed in
 * the same order as the one-row kernel's, so the results are the same bit for bit: 1.5–1.8× faster in isolation at
 * 2–16 columns. One token's product keeps the one-row kernel (two rows by one column slowed a one-stream decode).
 */
export const LLAMA_CPP_PATCHES = Object.freeze({
  amxTileConfig: nativeFile("llama-cpp-amx-tile-config.diff"),
  streamCopy: nativeFile("llama-cpp-stream-copy.diff"),
  q4_1Pairs: nativeFile("llama-cpp-q4-1-pairs.diff"),
});

/** The llama.cpp patches' paths, in the order the builder applies them. */
export const LLAMA_CPP_PATCH_PATHS: readonly string[] = Object.values(LLAMA_CPP_PATCHES);

function nativeFile(name: string): string {
  return fileURLToPath(new URL(`../../../native/${name}`, import.meta.url));
}

/**
 * The CMake options of the tuned build. `GGML_NATIVE`: compiled for this CPU (-march=native, AMX included where the
 * CPU has it) instead of the prebuilt generic variants. `GGML_OPENMP` off: ggml's own thread pool, the one the
 * patch keeps per context (an OpenMP build ignores it and measured slower per decode: docs/models.md).
 */
export const TUNED_CMAKE_OPTIONS: Readonly<Record<string, string>> = Object.freeze({
  GGML_NATIVE: "ON",
  GGML_OPENMP: "OFF",
});

/**
 * Compiler flags that keep AVX512-FP16 out of a -march=native build on a CPU that has it (Intel Xeon since Sapphire
 * Rapids). With it, the bundled ggml does its F16 vector arithmetic in 32-lane half-precision registers and 128
 * elements per loop step (`GGML_F16_STEP`, simd-mappings.h), and a dot product shorter than a step runs entirely in
 * its scalar remainder loop: flash attention's F16 products over a 64-wide head (SmolLM2's) then ran scalar. Measured
 * on an Intel Xeon (2 vCPU, 2026-11-28, bench/anchor.ts), the tuned build with it made 0.68 of llama-server's tok/s
 * at one stream and 0.43 at 16, without it 1.06 and 1.00 (the prebuilt binaries, whose Sapphire Rapids variant
 * leaves FP16 out: 0.59 and 1.02). Without it the F16 products convert to F32 in 16-lane steps, as on every other
 * AVX-512 CPU.
 */
const NO_FP16_FLAGS = "-mno-avx512fp16";

/**
 * The tuned build's CMake options on a CPU with these feature flags (/proc/cpuinfo's names). Extra compiler flags go
 * into the Release configuration's (with CMake's own Release defaults): cmake-js sets CMAKE_CXX_FLAGS itself, over
 * ours.
 */
export function tunedCmakeOptions(flags: readonly string[]): Readonly<Record<string, string>> {
  if (!flags.includes("avx512_fp16")) return TUNED_CMAKE_OPTIONS;
  const release = `-O3 -DNDEBUG ${NO_FP16_FLAGS}`;
  return { ...TUNED_CMAKE_OPTIONS, CMAKE_C_FLAGS_RELEASE: release, CMAKE_CXX_FLAGS_RELEASE: release };
}

/** What one tuned build is keyed by: a change to any of them means another build. */
export interface EngineBuildKeyParts {
  nodeLlamaCppVersion: string;
  /** The patches' text (the addon's and llama.cpp's). */
  patch: string;
  cmakeOptions: Readonly<Record<string, string>>;
  platform: string;
  arch: string;
  /** The CPU's feature flags: a -march=native build may not run on another CPU. */
  cpuFlags: readonly string[];
  /**
   * The cache it lives in: node-llama-cpp links each build by a name the key is part of, so two caches (a test's
   * and the real one) never claim the same link.
   */
  cacheRoot: string;
}

/** The cache key of a tuned build: 16 hex characters of the SHA-256 of its parts. */
export function engineBuildKey(parts: EngineBuildKeyParts): string {
  const canonical = JSON.stringify({
    nodeLlamaCppVersion: parts.nodeLlamaCppVersion,
    patch: createHash("sha256").update(parts.patch).digest("hex"),
    cmakeOptions: Object.entries(parts.cmakeOptions).sort(([a], [b]) => a.localeCompare(b)),
    platform: parts.platform,
    arch: parts.arch,
    cpuFlags: [...new Set(parts.cpuFlags)].sort(),
    cacheRoot: parts.cacheRoot,
  });
  return createHash("sha256").update(canonical).digest("hex").slice(0, 16);
}

/** The CPU feature flags from /proc/cpuinfo (Linux); elsewhere the CPU model string stands in for them. */
export function cpuFlags(read: (path: string) => string = (p) => readFileSync(p, "utf8")): string[] {
  try {
    const line = read("/proc/cpuinfo")
      .split("\n")
      .find((l) => /^(flags|Features)\s*:/.test(l));
    if (line !== undefined) return line.split(":")[1]?.trim().split(/\s+/) ?? [];
  } catch {
    // not Linux
  }
  return [];
}

/** Where tuned builds are cached: HEARTH_ENGINE_CACHE, else ~/.cache/hearth/engine (beside the models). */
export function engineCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.HEARTH_ENGINE_CACHE || join(homedir(), ".cache", "hearth", "engine");
}

/** The installed node-llama-cpp package's folder (found as Node finds it: its package.json is not exported). */
export function nodeLlamaCppDir(): string {
  const require = createRequire(import.meta.url);
  for (const modules of require.resolve.paths("node-llama-cpp") ?? []) {
    const dir = join(modules, "node-llama-cpp");
    if (existsSync(join(dir, "package.json"))) return dir;
  }
  throw new Error("node-llama-cpp is not installed");
}

/** One tuned build, planned for this machine and this install. */
export interface EngineBuildPlan {
  key: string;
  /** `<cache root>/<key>`: the finished build and its record. */
  dir: string;
  nodeLlamaCppVersion: string;
  /** Passed to node-llama-cpp both when compiling and when loading: its build folder's name follows them. */
  cmakeOptions: Readonly<Record<string, string>>;
}

export function planEngineBuild(env: NodeJS.ProcessEnv = process.env): EngineBuildPlan {
  const packageDir = nodeLlamaCppDir();
  const nodeLlamaCppVersion = (
    JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { version: string }
  ).version;
  const patch = [ADDON_PATCH_PATH, ...LLAMA_CPP_PATCH_PATHS]
    .map((path) => readFileSync(path, "utf8"))
    .join("\n");
  const cacheRoot = engineCacheRoot(env);
  const flags = cpuFlags();
  const cmakeOptions = tunedCmakeOptions(flags);
  const key = engineBuildKey({
    nodeLlamaCppVersion,
    patch,
    cmakeOptions,
    platform: process.platform,
    arch: process.arch,
    cpuFlags: flags,
    cacheRoot,
  });
  return {
    key,
    dir: join(cacheRoot, key),
    nodeLlamaCppVersion,
    // The key is an option too, so each patch and CPU gets its own folder among node-llama-cpp's local builds.
    cmakeOptions: { ...cmakeOptions, HEARTH_ENGINE_BUILD: key },
  };
}

/** The record a finished build leaves beside its binaries; written last, so its presence means "complete". */
export interface EngineBuildRecord {
  key: string;
  /** node-llama-cpp's name for the build folder (under its llama/localBuilds). */
  folder: string;
  nodeLlamaCppVersion: string;
  cmakeOptions: Record<string, string>;
  builtAt: string;
  buildSeconds: number;
}

export const RECORD_FILE = "hearth-build.json";

/** The finished build of `plan`, or undefined when there is none (never built, or interrupted). */
export async function findEngineBuild(plan: EngineBuildPlan): Promise<EngineBuildRecord | undefined> {
  try {
    const record = JSON.parse(await readFile(join(plan.dir, RECORD_FILE), "utf8")) as EngineBuildRecord;
    if (record.key !== plan.key || !existsSync(join(plan.dir, record.folder))) return undefined;
    return record;
  } catch {
    return undefined;
  }
}

/**
 * Makes node-llama-cpp see the cached build: a link in its llama/localBuilds folder (the only place it loads a
 * local build from) to the build in the cache, which `npm ci` cannot wipe.
 */
export async function linkEngineBuild(record: EngineBuildRecord, plan: EngineBuildPlan): Promise<void> {
  const localBuilds = join(nodeLlamaCppDir(), "llama", "localBuilds");
  const link = join(localBuilds, record.folder);
  const target = join(plan.dir, record.folder);
  await mkdir(localBuilds, { recursive: true });
  const existing = await lstat(link).catch(() => undefined);
  if (existing?.isSymbolicLink() && (await readlink(link)) === target) return;
  if (existing !== undefined) await rm(link, { recursive: true, force: true });
  try {
    await symlink(target, link, "dir");
  } catch (err) {
    // Another Hearth starting at the same moment made the same link first.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST" || (await readlink(link)) !== target) throw err;
  }
}
