import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { planEngineBuild } from "./engine-build.js";
import { buildEngine, EngineBuildError, engineBuildFailure } from "./engine-builder.js";

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
