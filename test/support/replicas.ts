// Two `hearth serve` replicas sharing one PostgreSQL database (fresh), one Redis, the key secret and the admin token.
import { randomBytes } from "node:crypto";
import { type ServerProcess, startServerProcess } from "./server-process.js";
import { type Backend, postgresBackend } from "./store-backends.js";

export const TEST_REDIS_URL = process.env.HEARTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export interface ReplicaPair {
  /** What the replicas share, as environment variables (the CLI needs them too). */
  shared: Record<string, string>;
  backend: Backend;
  first: ServerProcess;
  second: ServerProcess;
  stop(): Promise<void>;
}

/** The first replica initialises the empty store (and prints its bootstrap key); the second joins it. */
export async function startReplicaPair(args: string[] = ["--parallel", "2"]): Promise<ReplicaPair> {
  const backend = await postgresBackend();
  const shared = {
    HEARTH_DATABASE_URL: backend.options.databaseUrl ?? "",
    HEARTH_REDIS_URL: TEST_REDIS_URL,
    HEARTH_KEY_SECRET: randomBytes(32).toString("hex"),
    HEARTH_ADMIN_TOKEN: `admin-${randomBytes(16).toString("hex")}`,
  };
  const first = await startServerProcess({ env: shared, args });
  const second = await startServerProcess({ env: shared, args, bootstrap: false });
  const pair: ReplicaPair = {
    shared,
    backend,
    first,
    second,
    async stop() {
      await pair.second.stop();
      await pair.first.stop();
      await backend.cleanup();
    },
  };
  return pair;
}
