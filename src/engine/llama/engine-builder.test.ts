import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { planEngineBuild } from "./engine-build.js";
import { buildEngine, EngineBuildError, engineBuildFailure, selfCheck } from "./engine-builder.js";

const root = mkdtempSync(join(tmpdir(), "hearth-engine-cache-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("buildEngine", () => {
  it("refuses while another build holds the lock, and leaves that lock and no failure behind", async () => {
    const env = { ...process.env, HEARTH_ENGINE_CACHE: root };
    const plan = planEngineBuild(env);
    mkdirSync(`${plan.dir}.lock`, { recursive: true });
    // This process stands in for the other builder: its pid is alive.
    writeFileSync(join(`${plan.dir}.lock`, "pid"), String(process.pid));
    const error = await buildEngine({ plan, env, log: () => undefined }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineBuildError);
    expect((error as Error).message).toBe(`another engine build is running (pid ${process.pid})`);
    expect(existsSync(join(`${plan.dir}.lock`, "pid"))).toBe(true);
    expect(await engineBuildFailure(plan)).toBeUndefined();
    // Its own would-be lock is gone too: only the holder's remains.
    expect(readdirSync(root).filter((name) => name.includes(".lock"))).toEqual([`${plan.key}.lock`]);
  });
});

/** A stand-in node-llama-cpp package whose getLlama runs `body` (the real check: test/model/engine-build.test.ts). */
function fakePackage(body: string): string {
  const dir = mkdtempSync(join(root, "package-"));
  mkdirSync(join(dir, "dist"));
  writeFileSync(
    join(dir, "dist", "index.js"),
    `export const LlamaLogLevel = { error: "error" };\nexport async function getLlama() { ${body} }\n`,
  );
  return dir;
}

describe("selfCheck", () => {
  const plan = planEngineBuild({ ...process.env, HEARTH_ENGINE_CACHE: root });
  const check = (packageDir: string) =>
    selfCheck({
      packageDir,
      plan,
      modelPath: "/models/m.gguf",
      env: process.env,
      logFile: join(root, "check.log"),
    });

  it("refuses a build whose kernels trap (the child dies by SIGILL), naming the signal", async () => {
    const error = await check(fakePackage('process.kill(process.pid, "SIGILL");')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineBuildError);
    expect((error as Error).message).toMatch(
      /^the new build failed its self-check on m\.gguf, so it is not used: /,
    );
    expect((error as Error).message).toContain("the self-check failed (SIGILL)");
  });

  it("refuses a build whose check hangs, once the time is up", async () => {
    const packageDir = fakePackage("setInterval(() => undefined, 1000); await new Promise(() => undefined);");
    const error = await selfCheck({
      packageDir,
      plan,
      modelPath: "/models/m.gguf",
      env: process.env,
      logFile: join(root, "check.log"),
      timeoutMs: 1500,
    }).catch((e: unknown) => e);
    expect((error as Error).message).toContain("the self-check did not finish within 1500 ms");
  });

  it("refuses a build node-llama-cpp does not take", async () => {
    const error = await check(fakePackage('return { buildType: "prebuilt" };')).catch((e: unknown) => e);
    expect((error as Error).message).toContain("node-llama-cpp did not take the new build");
  });

  it("passes the plan's CMake options to getLlama, which must find the build by them", async () => {
    const error = await check(
      fakePackage(
        `const [options] = arguments; if (options.cmakeOptions.HEARTH_ENGINE_BUILD !== ${JSON.stringify(plan.key)}) ` +
          'throw new Error("wrong options"); throw new Error("reached the model: " + process.env.HEARTH_CHECK_MODEL);',
      ),
    ).catch((e: unknown) => e);
    expect((error as Error).message).toContain("reached the model: /models/m.gguf");
  });
});
