import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  cpuFlags,
  type EngineBuildKeyParts,
  engineBuildKey,
  engineCacheRoot,
  findEngineBuild,
  planEngineBuild,
  RECORD_FILE,
  TUNED_CMAKE_OPTIONS,
  tunedCmakeOptions,
} from "./engine-build.js";

const parts: EngineBuildKeyParts = {
  nodeLlamaCppVersion: "3.22.1",
  patch: "--- a/addon/AddonContext.cpp\n",
  cmakeOptions: TUNED_CMAKE_OPTIONS,
  platform: "linux",
  arch: "x64",
  cpuFlags: ["avx2", "fma", "sse4_2"],
  cacheRoot: "/cache",
};

describe("engineBuildKey", () => {
  it("is 16 hex characters, the same for the same parts in any order", () => {
    const key = engineBuildKey(parts);
    expect(key).toMatch(/^[0-9a-f]{16}$/);
    expect(engineBuildKey({ ...parts, cpuFlags: ["sse4_2", "avx2", "fma", "avx2"] })).toBe(key);
    expect(engineBuildKey({ ...parts, cmakeOptions: { GGML_OPENMP: "OFF", GGML_NATIVE: "ON" } })).toBe(key);
  });

  it("changes with the library, the patch, the options, the platform, the CPU and the cache", () => {
    const key = engineBuildKey(parts);
    const changed: Partial<EngineBuildKeyParts>[] = [
      { nodeLlamaCppVersion: "3.22.2" },
      { patch: `${parts.patch}+one line\n` },
      { cmakeOptions: { ...TUNED_CMAKE_OPTIONS, GGML_OPENMP: "ON" } },
      { platform: "darwin" },
      { arch: "arm64" },
      { cpuFlags: [...parts.cpuFlags, "avx512f"] },
      { cacheRoot: "/other" },
    ];
    const keys = changed.map((change) => engineBuildKey({ ...parts, ...change }));
    expect(new Set([key, ...keys]).size).toBe(changed.length + 1);
  });
});

describe("cpuFlags", () => {
  it("reads the flags line of /proc/cpuinfo (x86) or the Features line (Arm)", () => {
    expect(cpuFlags(() => "processor\t: 0\nflags\t\t: fpu sse avx2\nbugs\t: x\n")).toEqual([
      "fpu",
      "sse",
      "avx2",
    ]);
    expect(cpuFlags(() => "Features\t: fp asimd sve\n")).toEqual(["fp", "asimd", "sve"]);
    expect(
      cpuFlags(() => {
        throw new Error("ENOENT");
      }),
    ).toEqual([]);
  });
});

describe("the engine cache", () => {
  const root = mkdtempSync(join(tmpdir(), "hearth-engine-cache-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const env = { HEARTH_ENGINE_CACHE: root };

  it("keeps AVX512-FP16 out on a CPU that has it (its 128-element F16 steps leave short dots scalar)", () => {
    const epyc = ["fpu", "avx512f", "avx512_vnni", "avx512_bf16"];
    expect(tunedCmakeOptions(epyc)).toEqual(TUNED_CMAKE_OPTIONS);
    const xeon = [...epyc, "avx512_fp16", "amx_tile", "amx_int8"];
    const options = tunedCmakeOptions(xeon);
    expect(options).toMatchObject({ ...TUNED_CMAKE_OPTIONS });
    for (const name of ["CMAKE_C_FLAGS_RELEASE", "CMAKE_CXX_FLAGS_RELEASE"])
      expect(options[name]?.split(" ")).toEqual(["-O3", "-DNDEBUG", "-mno-avx512fp16"]);
    const keyed = (flags: string[]) =>
      engineBuildKey({ ...parts, cpuFlags: flags, cmakeOptions: tunedCmakeOptions(flags) });
    expect(keyed(xeon)).not.toBe(keyed(epyc));
  });

  it("is HEARTH_ENGINE_CACHE, else ~/.cache/hearth/engine", () => {
    expect(engineCacheRoot(env)).toBe(root);
    expect(engineCacheRoot({ HOME: "/home/x" })).toMatch(/\.cache\/hearth\/engine$/);
  });

  it("plans a build keyed for this install and CPU, its key among the CMake options (the build's folder name)", () => {
    const plan = planEngineBuild(env);
    expect(plan.dir).toBe(join(root, plan.key));
    expect(plan.cmakeOptions).toEqual({ ...tunedCmakeOptions(cpuFlags()), HEARTH_ENGINE_BUILD: plan.key });
    expect(planEngineBuild({ HEARTH_ENGINE_CACHE: join(root, "other") }).key).not.toBe(plan.key);
  });

  it("has a build only once its record is written and its folder is there", async () => {
    const plan = planEngineBuild(env);
    expect(await findEngineBuild(plan)).toBeUndefined();
    mkdirSync(plan.dir, { recursive: true });
    const record = {
      key: plan.key,
      folder: "linux-x64-abc",
      nodeLlamaCppVersion: plan.nodeLlamaCppVersion,
      cmakeOptions: plan.cmakeOptions,
      builtAt: new Date(0).toISOString(),
      buildSeconds: 1,
    };
    writeFileSync(join(plan.dir, RECORD_FILE), JSON.stringify(record));
    // An interrupted move: the record without its folder is no build.
    expect(await findEngineBuild(plan)).toBeUndefined();
    mkdirSync(join(plan.dir, record.folder));
    expect(await findEngineBuild(plan)).toEqual(record);
    // A record of another key (a copied cache) is no build of this one.
    writeFileSync(join(plan.dir, RECORD_FILE), JSON.stringify({ ...record, key: "0000000000000000" }));
    expect(await findEngineBuild(plan)).toBeUndefined();
  });
});
