// The tuned engine build started from `hearth serve` when it is missing: a detached `hearth engine build` at the
// lowest CPU priority, so the service starts on the prebuilt binaries at once and the build serves from the next
// start.
import { spawn } from "node:child_process";
import { mkdirSync, openSync } from "node:fs";
import { constants, setPriority } from "node:os";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import type { EngineBuildPlan } from "./engine-build.js";
import {
  type EngineBuildFailure,
  engineBuildFailure,
  engineBuildLogPath,
  engineBuildRunning,
} from "./engine-builder.js";

const HEARTH_BIN = fileURLToPath(new URL("../../../bin/hearth.js", import.meta.url));

/** What happened: a build started (its log), one was already running, or the last one failed (not tried again). */
export type BackgroundBuild =
  | { started: true; log: string; pid: number }
  | { started: false; pid: number }
  | { started: false; failed: EngineBuildFailure; log: string };

/** Starts `hearth engine build` detached from this process (it outlives a restart); its output goes to its log. */
export async function startBackgroundEngineBuild(plan: EngineBuildPlan): Promise<BackgroundBuild> {
  const running = await engineBuildRunning(plan);
  if (running !== undefined) return { started: false, pid: running };
  const failed = await engineBuildFailure(plan);
  if (failed !== undefined) return { started: false, failed, log: engineBuildLogPath(plan) };
  const log = `${engineBuildLogPath(plan)}.out`;
  mkdirSync(dirname(log), { recursive: true });
  const out = openSync(log, "a");
  const child = spawn(process.execPath, [HEARTH_BIN, "engine", "build"], {
    detached: true,
    stdio: ["ignore", out, out],
    env: process.env,
  });
  child.unref();
  const pid = child.pid ?? 0;
  try {
    // Its compilers inherit the priority: the service keeps the CPU it needs.
    setPriority(pid, constants.priority.PRIORITY_LOW);
  } catch {
    // not permitted here: the build runs at normal priority
  }
  return { started: true, log: engineBuildLogPath(plan), pid };
}
