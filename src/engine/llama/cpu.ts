// How many cores this process may really use: affinity and the cgroup CPU quota, never more.
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

/** Cores allowed by the cgroup v2 (cpu.max) or v1 (cfs quota/period) limit, or undefined when unlimited. */
export function cgroupCpuLimit(
  read: (path: string) => string = (p) => readFileSync(p, "utf8"),
): number | undefined {
  try {
    const [quota, period] = read("/sys/fs/cgroup/cpu.max").trim().split(/\s+/);
    if (quota !== undefined && quota !== "max" && period !== undefined) return Number(quota) / Number(period);
    return undefined;
  } catch {
    // not cgroup v2; try v1
  }
  try {
    const quota = Number(read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").trim());
    const period = Number(read("/sys/fs/cgroup/cpu/cpu.cfs_period_us").trim());
    if (quota > 0 && period > 0) return quota / period;
  } catch {
    // no cgroup limit visible
  }
  return undefined;
}

/**
 * Threads for llama.cpp: the cores we may run on, capped by the CPU quota. More threads than cores makes
 * ggml's thread pool spin against itself (measured 250x slower on 2 vCPUs).
 */
export function usableCores(): number {
  const affinity = availableParallelism();
  const quota = cgroupCpuLimit();
  const cores = quota === undefined ? affinity : Math.min(affinity, Math.floor(quota));
  return Math.max(1, cores);
}
