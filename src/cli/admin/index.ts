// `hearth keys|orgs|users|usage|audit|models add… …`: thin clients of the running server's admin API (one file per group in admin/).
import type { Command } from "commander";
import type { HearthConfig } from "../../config/schema.js";
import { registerAuditCommand } from "./audit.js";
import { registerKeysCommands } from "./keys.js";
import { registerModelsAdminCommands } from "./models.js";
import { registerOrgsCommands } from "./orgs.js";
import { createAdminRunner } from "./runner.js";
import { registerUsageCommand } from "./usage.js";
import { registerUsersCommands } from "./users.js";

export interface AdminCommandsOptions {
  /** For tests: where requests go (default: the global fetch). */
  fetch?: typeof fetch;
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  /** Called with 1 after an error was printed (default: sets process.exitCode). */
  setExitCode?: (code: number) => void;
}

export function registerAdminCommands(
  program: Command,
  loadConfig: () => HearthConfig,
  options: AdminCommandsOptions = {},
): void {
  const run = createAdminRunner({
    loadConfig,
    fetch: options.fetch ?? globalThis.fetch,
    stdout: options.stdout ?? ((text) => process.stdout.write(text)),
    stderr: options.stderr ?? ((text) => process.stderr.write(text)),
    setExitCode:
      options.setExitCode ??
      ((code) => {
        process.exitCode = code;
      }),
  });
  registerKeysCommands(program, run);
  registerOrgsCommands(program, run);
  registerUsersCommands(program, run);
  registerUsageCommand(program, run);
  registerAuditCommand(program, run);
  registerModelsAdminCommands(program, run);
}
