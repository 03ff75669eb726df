import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startBackgroundEngineBuild } from "./background-build.js";
import { planEngineBuild } from "./engine-build.js";
import { engineBuildFailure } from "./engine-builder.js";

const root = mkdtempSync(join(tmpdir(), "hearth-engine-cache-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("the background build at start", () => {
  it("is not started again after a build of the same key failed: the failure is remembered", async () => {
    const plan = planEngineBuild({ HEARTH_ENGINE_CACHE: root });
    expect(await engineBuildFailure(plan)).toBeUndefined();
    mkdirSync(root, { recursive: true });
    const failure = { at: "2026-11-27T12:00:00.000Z", message: "cmake-js compile failed (exit 1)" };
    writeFileSync(`${plan.dir}.failed`, JSON.stringify(failure));
    expect(await engineBuildFailure(plan)).toEqual(failure);
    // Nothing is spawned: the answer says why, with the build's log.
    expect(await startBackgroundEngineBuild(plan)).toEqual({
      started: false,
      failed: failure,
      log: `${plan.dir}.log`,
    });
  });

  it("is not started twice: a running build (its lock held by a live process) is reported instead", async () => {
    const plan = planEngineBuild({ HEARTH_ENGINE_CACHE: join(root, "other") });
    mkdirSync(`${plan.dir}.lock`, { recursive: true });
    writeFileSync(join(`${plan.dir}.lock`, "pid"), String(process.pid));
    expect(await startBackgroundEngineBuild(plan)).toEqual({ started: false, pid: process.pid });
  });
});
