// The benchmark's noise, from /proc: CPU time the hypervisor stole, and CPU time other processes took meanwhile.
import { readdirSync, readFileSync } from "node:fs";

export interface CpuNoise {
  /** % of all cores' time the hypervisor took from this VM. */
  stealPercent: number;
  /** % of all cores' time used by processes other than the benchmark and its server (e.g. a test run). */
  othersPercent: number;
}

interface Snapshot {
  total: number;
  busy: number;
  steal: number;
  /** CPU ticks of the measured processes. */
  own: number;
}

function readSystem(): Omit<Snapshot, "own"> | undefined {
  const fields = (readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "")
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already counted in user and nice)
  const counted = fields.slice(0, 8);
  if (counted.length < 8 || counted.some(Number.isNaN)) return undefined;
  const [, , , idle = 0, iowait = 0, , , steal = 0] = counted;
  const total = counted.reduce((a, b) => a + b, 0);
  return { total, busy: total - idle - iowait - steal, steal };
}

/** /proc's clock ticks per second (USER_HZ: 100 on Linux's mainstream architectures). */
const TICKS_PER_SECOND = 100;

/** CPU time a process has used so far, all its threads, in ms (tick resolution: 10 ms); 0 once it is gone. */
export function processCpuMs(pid: number): number {
  return (processTicks(pid) * 1000) / TICKS_PER_SECOND;
}

/** utime + stime of a process, all its threads (same clock ticks as /proc/stat); 0 once it is gone. */
function processTicks(pid: number): number {
  return statTicks(`/proc/${pid}/stat`) ?? 0;
}

/** utime + stime from a process's or a thread's `stat` file; undefined once it is gone. */
function statTicks(path: string): number | undefined {
  try {
    const stat = readFileSync(path, "utf8");
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return undefined;
  }
}

function snapshot(pids: readonly number[]): Snapshot | undefined {
  try {
    const system = readSystem();
    if (system === undefined) return undefined;
    return { ...system, own: pids.reduce((sum, pid) => sum + processTicks(pid), 0) };
  } catch {
    return undefined;
  }
}

/** Starts a measurement over the given processes; the result gives the noise since (undefined off Linux). */
export function startNoiseMeter(pids: readonly number[]): () => CpuNoise | undefined {
  const before = snapshot(pids);
  return () => {
    const after = snapshot(pids);
    if (before === undefined || after === undefined || after.total === before.total) return undefined;
    const total = after.total - before.total;
    const others = after.busy - before.busy - (after.own - before.own);
    return {
      stealPercent: (100 * (after.steal - before.steal)) / total,
      othersPercent: Math.max(0, (100 * others) / total),
    };
  };
}

/** CPU a server used in a run, split where its cost lies: its busiest `computeThreads` threads and all the others. */
export interface ThreadCpu {
  /** ms on the busiest threads: llama.cpp's compute threads (the pool's, the decode's), spinning included. */
  computeMs: number;
  /** ms on every other thread: the HTTP work, Hearth's JS thread, sampling outside the compute threads. */
  otherMs: number;
}

/** CPU ticks of each thread of a process now, by thread id (empty once it is gone). */
function threadTicks(pid: number): Map<string, number> {
  const ticks = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return ticks;
  }
  for (const tid of tids) {
    // A thread that ended meanwhile has no file any more.
    const used = statTicks(`/proc/${pid}/task/${tid}/stat`);
    if (used !== undefined) ticks.set(tid, used);
  }
  return ticks;
}

/** Splits the threads' CPU deltas (ticks) into the busiest `computeThreads` and the rest, in ms. Pure. */
export function splitThreadCpu(deltas: readonly number[], computeThreads: number): ThreadCpu {
  const sorted = [...deltas].sort((a, b) => b - a);
  const ms = (ticks: number[]) => (ticks.reduce((sum, t) => sum + t, 0) * 1000) / TICKS_PER_SECOND;
  return { computeMs: ms(sorted.slice(0, computeThreads)), otherMs: ms(sorted.slice(computeThreads)) };
}

/**
 * Starts a measurement of one server's threads; the result splits the CPU they used since (undefined off Linux).
 * Both llama-server and Hearth's tuned build keep `computeThreads` compute threads busy through a run, so the
 * busiest are those: the rest is what the server does besides the model.
 */
export function startThreadMeter(pid: number, computeThreads: number): () => ThreadCpu | undefined {
  const before = threadTicks(pid);
  return () => {
    const after = threadTicks(pid);
    if (after.size === 0) return undefined;
    return splitThreadCpu(
      [...after].map(([tid, ticks]) => ticks - (before.get(tid) ?? 0)),
      computeThreads,
    );
  };
}

/** The pids of a process and all its descendants, alive now (a Python server's workers, say). */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      // gone meanwhile
    }
  }
  const tree: number[] = [];
  const visit = (p: number) => {
    tree.push(p);
    for (const child of children.get(p) ?? []) visit(child);
  };
  visit(pid);
  return tree;
}

/** CPU time of a process and its descendants (as they are now), in ms. */
export function processTreeCpuMs(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + processCpuMs(p), 0);
}
