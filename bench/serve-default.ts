// A fresh `hearth serve` of the default model with a given parallel, queue and threads, for the soak and fuzz phases.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultModels } from "../src/config/schema.js";
import { type ServerProcess, startServerProcess } from "../test/support/server-process.js";

export interface DefaultServerOptions {
  model: string;
  parallel: number;
  maxQueue: number;
  /** llama.cpp threads; 0 = every core (the default). 1 on a machine shared with other work (see bench/fleet.ts). */
  threads: number;
  /** Prompt tokens per engine step while others generate (the model's `prefillChunk`); default the config's. */
  prefillChunk?: number;
  /** How much longer a step carrying prompt tokens may take (the model's `prefillStretch`); default the config's. */
  prefillStretch?: number;
  /** Host memory for prompt states beyond the slots (the model's `promptCacheMiB`); default the config's. */
  promptCacheMiB?: number;
  /** The `engine:` block: which llama.cpp build serves (default auto: the tuned build when cached). */
  engine?: { build?: "auto" | "tuned" | "prebuilt"; threadPoolPoll?: number };
  /** Environment of the server process, over this one's. */
  env?: Record<string, string>;
  /** Node options of the server process, e.g. `--cpu-prof` (which NODE_OPTIONS does not take). */
  nodeArgs?: string[];
}

/** Starts the server (stopped with `stop()`, which also removes its config), ending it if this process is interrupted. */
export async function startDefaultServer(options: DefaultServerOptions): Promise<ServerProcess> {
  if (!existsSync(join(import.meta.dirname, "..", "dist", "cli", "index.js")))
    throw new Error("dist/ is missing: run `npm run build` first.");
  const embedded = defaultModels.find((m) => m.id === options.model);
  if (embedded === undefined) throw new Error(`this phase serves the default model, not ${options.model}`);
  const dir = mkdtempSync(join(tmpdir(), "hearth-bench-"));
  const config = join(dir, "hearth.yaml");
  // JSON is YAML.
  writeFileSync(
    config,
    JSON.stringify({
      models: [
        {
          ...embedded,
          threads: options.threads,
          parallel: options.parallel,
          maxQueue: options.maxQueue,
          ...(options.prefillChunk === undefined ? {} : { prefillChunk: options.prefillChunk }),
          ...(options.prefillStretch === undefined ? {} : { prefillStretch: options.prefillStretch }),
          ...(options.promptCacheMiB === undefined ? {} : { promptCacheMiB: options.promptCacheMiB }),
        },
      ],
      // Never a build started by the benchmark: it would take the cores being measured.
      engine: { ...options.engine, backgroundBuild: false },
    }),
  );
  const server = await startServerProcess({
    args: ["--config", config],
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.nodeArgs === undefined ? {} : { nodeArgs: options.nodeArgs }),
  });
  const interrupted = () => {
    server.child.kill("SIGTERM");
    rmSync(server.dataDir, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  };
  process.once("SIGINT", interrupted);
  return {
    ...server,
    async stop(signal) {
      process.off("SIGINT", interrupted);
      const code = await server.stop(signal);
      rmSync(dir, { recursive: true, force: true });
      return code;
    },
  };
}
