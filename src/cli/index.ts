// The `hearth` command: serve, models, keys, orgs. Errors print one line, never a stack trace.
import { Command, InvalidArgumentError } from "commander";
import { ConfigError, loadConfig } from "../config/load.js";
import type { HearthConfig } from "../config/schema.js";
import { startServer } from "../main.js";
import { registerAdminCommands } from "./admin/index.js";
import { registerEngineCommands } from "./engine.js";
import { registerModelsCommands } from "./local-models.js";

function integer(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a non-negative integer");
  return n;
}

function fail(err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`hearth: ${message}\n`);
  process.exit(1);
}

const program = new Command("hearth")
  .description("Hearth: a self-hosted OpenAI-compatible chat-completions service")
  .option("-c, --config <path>", "config file (YAML); default ./hearth.yaml when present")
  .showHelpAfterError();

const configFromGlobalOptions = (): HearthConfig => loadConfig({ configPath: program.opts().config });

program
  .command("serve")
  .description("run the HTTP service")
  .option("--host <host>", "interface to listen on (default 127.0.0.1)")
  .option("--port <port>", "port to listen on (default 8000)", integer)
  .option("--parallel <n>", "sequences decoded together per model", integer)
  .option("--max-queue <n>", "requests waiting for a free sequence per model", integer)
  .option("--queue-timeout-ms <ms>", "longest wait in the queue before a 503 (default 30000)", integer)
  .action(
    async (options: {
      host?: string;
      port?: number;
      parallel?: number;
      maxQueue?: number;
      queueTimeoutMs?: number;
    }) => {
      try {
        const config = loadConfig({ configPath: program.opts().config, overrides: options });
        const server = await startServer(config);
        const stop = () => {
          // A shutdown that ran out of time has logged why; the exit code says it was not clean.
          server.shutdown().then(
            (outcome) => process.exit(outcome === "clean" ? 0 : 1),
            (err: unknown) => fail(err),
          );
        };
        process.once("SIGTERM", stop);
        process.once("SIGINT", stop);
        server.engineReady.catch((err: unknown) => {
          void server.shutdown().finally(() => fail(err));
        });
      } catch (err) {
        fail(err);
      }
    },
  );

registerModelsCommands(program, configFromGlobalOptions);
registerEngineCommands(program, configFromGlobalOptions);
registerAdminCommands(program, configFromGlobalOptions);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof ConfigError) fail(err);
  fail(err);
});
