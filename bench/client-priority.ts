// The benchmark's client is its instrument: it timestamps each token as it reads it. On a 2-vCPU machine a server's
// two compute threads fill both cores, and a client at their priority read a token up to a scheduler slice late: at
// one stream, with both servers, 4–6 % of the client's gaps were 8–11 ms and the next ones 2–3 ms (a token read late,
// the next on time), while a packet capture of the same runs showed the servers' own sends without that tail
// (p95 ÷ p50 1.13–1.37 against the client's 1.36–1.53; AMD EPYC, 2026-11-28). At nice -10 the client's gaps matched
// the sends (1.12–1.24 against 1.15–1.21). A remote client, as in production, has cores of its own.
import { getPriority, setPriority } from "node:os";

/** The client's nice value when none is asked for. */
export const DEFAULT_CLIENT_NICE = -10;

export interface ClientPriority {
  /** The nice value in effect: the one asked for, or the old one when raising it was not permitted. */
  nice: number;
  restore(): void;
}

/**
 * Sets the nice value of the calling thread (on Linux, nice is per thread: the JavaScript thread, which reads the
 * streams; child processes started later inherit it, so call this after the servers have started). Raising the
 * priority needs root or CAP_SYS_NICE; without it the old value stays.
 */
export function setClientPriority(nice: number = DEFAULT_CLIENT_NICE): ClientPriority {
  const before = getPriority();
  try {
    setPriority(nice);
  } catch {
    // Not permitted: measured at the old priority, which `nice` reports.
  }
  return {
    nice: getPriority(),
    restore: () => setPriority(before),
  };
}
