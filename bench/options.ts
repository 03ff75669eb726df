// The benchmark's knobs, read once from the environment.

export type Phase =
  | "http"
  | "engine"
  | "decode"
  | "anchor"
  | "ablation"
  | "prefix"
  | "keys"
  | "grammar"
  | "schema"
  | "overload"
  | "limits"
  | "fleet"
  | "gateway"
  | "soak"
  | "fuzz";

export interface BenchOptions {
  /** Concurrency levels, ascending. */
  levels: number[];
  /** Time box of a level's first HTTP run; it fixes the request count every other run of that level repeats. */
  seconds: number;
  maxTokens: number;
  /** Runs per level and phase; the run with the median tokens/s is reported. */
  repeats: number;
  /** Steps timed per batch size in the decode-cost phase. */
  decodeSteps: number;
  phases: Phase[];
  /** An already running server; when absent the benchmark starts (and stops) its own. */
  server: { url: string; apiKey: string } | undefined;
  /** Model id to request; the config's first model when absent. */
  model: string | undefined;
  /** Length of the soak phase (the target is 10 minutes; shorter for a quick look). */
  soakSeconds: number;
  /** Requests of the fuzz phase, and the seed that makes them (the same seed, the same requests). */
  fuzzRequests: number;
  fuzzSeed: number;
  /** llama.cpp threads of the soak and fuzz servers; 0 = every core. 1 on a machine busy with other work. */
  serverThreads: number;
}

const PHASES: readonly Phase[] = [
  "http",
  "engine",
  "decode",
  "anchor",
  "ablation",
  "prefix",
  "keys",
  "grammar",
  "schema",
  "overload",
  "limits",
  "fleet",
  "gateway",
  "soak",
  "fuzz",
];

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

function list(env: NodeJS.ProcessEnv, name: string, fallback: string): string[] {
  return (env[name] || fallback)
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

export function readBenchOptions(env: NodeJS.ProcessEnv = process.env): BenchOptions {
  const levels = list(env, "BENCH_LEVELS", "1,4,8,16").map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1)
      throw new Error(`BENCH_LEVELS must list positive integers, got "${s}"`);
    return n;
  });
  // The llama-server ablation runs only when asked for: it is a study of llama-server, not of Hearth.
  const defaults = PHASES.filter((p) => p !== "ablation").join(",");
  const phases = list(env, "BENCH_PHASES", defaults).map((s) => {
    if (!PHASES.includes(s as Phase))
      throw new Error(`BENCH_PHASES: unknown phase "${s}" (${PHASES.join(", ")})`);
    return s as Phase;
  });
  const url = env.HEARTH_URL || undefined;
  const apiKey = env.HEARTH_API_KEY || undefined;
  if ((url === undefined) !== (apiKey === undefined)) {
    throw new Error("Set both HEARTH_URL and HEARTH_API_KEY to use a running server, or neither.");
  }
  return {
    levels: [...new Set(levels)].sort((a, b) => a - b),
    seconds: positiveInt(env, "BENCH_SECONDS", 15),
    maxTokens: positiveInt(env, "BENCH_MAX_TOKENS", 64),
    repeats: positiveInt(env, "BENCH_REPEATS", 1),
    decodeSteps: positiveInt(env, "BENCH_DECODE_STEPS", 30),
    phases,
    server: url === undefined || apiKey === undefined ? undefined : { url: url.replace(/\/+$/, ""), apiKey },
    model: env.BENCH_MODEL || undefined,
    soakSeconds: positiveInt(env, "BENCH_SOAK_SECONDS", 600),
    fuzzRequests: positiveInt(env, "BENCH_FUZZ_REQUESTS", 10_000),
    fuzzSeed: positiveInt(env, "BENCH_FUZZ_SEED", 12),
    serverThreads: env.BENCH_SERVER_THREADS ? positiveInt(env, "BENCH_SERVER_THREADS", 1) : 0,
  };
}
