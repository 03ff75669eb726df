// Runs one admin command: a client for it, its output, and any failure as one stderr line with exit code 1.
import type { HearthConfig } from "../../config/schema.js";
import { AdminClient } from "./client.js";
import { table } from "./format.js";

/** Where a command's results go (stdout), one line at a time. */
export interface AdminOutput {
  line(text: string): void;
  /** `--json`: the value, pretty-printed. */
  json(value: unknown): void;
  table(header: readonly string[], rows: readonly (readonly string[])[]): void;
}

/** What every admin command's action gets before its commander arguments. */
export interface AdminCommandContext {
  api: AdminClient;
  out: AdminOutput;
}

export type AdminAction<A extends unknown[]> = (context: AdminCommandContext, ...args: A) => Promise<void>;

/** Turns an admin action into a commander action. */
export type AdminRunner = <A extends unknown[]>(action: AdminAction<A>) => (...args: A) => Promise<void>;

export interface AdminRunnerOptions {
  loadConfig: () => HearthConfig;
  fetch: typeof fetch;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  setExitCode: (code: number) => void;
}

export function createAdminRunner(options: AdminRunnerOptions): AdminRunner {
  const out: AdminOutput = {
    line: (text) => options.stdout(`${text}\n`),
    json: (value) => out.line(JSON.stringify(value, null, 2)),
    table: (header, rows) => {
      for (const text of table(header, rows)) out.line(text);
    },
  };
  return (action) =>
    async (...args) => {
      try {
        // Inside the try: a config that does not load is reported like any other failure.
        const api = new AdminClient(options.loadConfig(), options.fetch);
        await action({ api, out }, ...args);
      } catch (err) {
        options.stderr(`hearth: ${err instanceof Error ? err.message : String(err)}\n`);
        options.setExitCode(1);
      }
    };
}
