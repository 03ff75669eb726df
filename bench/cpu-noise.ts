// CPU time the hypervisor took from this VM (/proc/stat "steal"): the benchmark's noise, reported next to its numbers.
import { readFileSync } from "node:fs";

interface CpuTimes {
  total: number;
  steal: number;
}

function readCpuTimes(): CpuTimes | undefined {
  try {
    const fields = (readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "")
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    // user nice system idle iowait irq softirq steal [guest guest_nice, already counted in user and nice]
    const counted = fields.slice(0, 8);
    if (counted.length < 8 || counted.some(Number.isNaN)) return undefined;
    return { total: counted.reduce((a, b) => a + b, 0), steal: counted[7] as number };
  } catch {
    return undefined;
  }
}

/** Starts a measurement; calling the result gives the percentage of CPU time stolen since (undefined off Linux). */
export function startStealMeter(): () => number | undefined {
  const before = readCpuTimes();
  return () => {
    const after = readCpuTimes();
    if (before === undefined || after === undefined || after.total === before.total) return undefined;
    return (100 * (after.steal - before.steal)) / (after.total - before.total);
  };
}
