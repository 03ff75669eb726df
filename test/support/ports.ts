// Ports for servers a test stops and starts again on the same port (private stores, fleet workers, llama-server).
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** The kernel's ephemeral range: ports it hands to `listen(0)` and to outgoing connections. */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
    return [Number(low), Number(high)];
  } catch {
    return [32768, 60999];
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * A port free now, chosen at random below the kernel's ephemeral range. A port the kernel picked (`listen(0)`)
 * and released goes back to the pool: while a test's server was down for a restart, another test's `listen(0)` or
 * any outgoing connection could take it, and the restart then met a stranger on its port (a full CI run once hung
 * there for the whole test timeout). Below the range only explicit binds, like these, can take a port.
 */
export async function restartablePort(): Promise<number> {
  const [ephemeralLow] = ephemeralRange();
  const low = 10_000;
  const high = Math.max(low + 1000, ephemeralLow) - 1;
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port between ${low} and ${high}`);
}
