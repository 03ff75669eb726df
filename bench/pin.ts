// Pinning the bench's processes to cores (taskset), so that a gateway does not share the cores of the workers it
// relays: what it costs then shows as its own core's time, not as the workers' lost throughput.
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";

export interface CoreSplit {
  /** taskset's list of the workers' cores (the client's too). */
  workers: string;
  /** The gateway's core. */
  gateway: string;
}

/**
 * The last core for the gateway, the others for the workers and the client; undefined on one core, without
 * taskset, or when BENCH_PIN=0.
 */
export function coreSplit(): CoreSplit | undefined {
  const cores = availableParallelism();
  if (cores < 2 || process.env.BENCH_PIN === "0") return undefined;
  try {
    execFileSync("taskset", ["-V"], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  return { workers: cores === 2 ? "0" : `0-${cores - 2}`, gateway: String(cores - 1) };
}

/** Every thread of `pid` onto `cores` (threads it starts later inherit it). */
export function pin(pid: number | undefined, cores: string): void {
  if (pid === undefined) throw new Error("cannot pin a process without a pid");
  execFileSync("taskset", ["-a", "-cp", cores, String(pid)], { stdio: "ignore" });
}
