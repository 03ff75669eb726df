// `hearth usage`: an organization's requests and tokens, totalled or grouped, through the admin API.
import type { Command } from "commander";
import type { UsageWire } from "../../http/admin/wire.js";
import { groupBy } from "./arguments.js";
import { pathSegment } from "./client.js";
import { day, usageCells } from "./format.js";
import type { AdminRunner } from "./runner.js";

interface UsageOptions {
  org: string;
  since?: string;
  until?: string;
  by?: string;
  user?: string;
  json?: boolean;
}

const USAGE_COLUMNS = Object.freeze([
  "REQUESTS",
  "PROMPT",
  "COMPLETION",
  "REASONING",
  "CACHED",
  "TOTAL",
  "ABORTED",
  "ERRORS",
]);

export function registerUsageCommand(program: Command, run: AdminRunner): void {
  program
    .command("usage")
    .description("show an organization's requests and tokens (needs a running server)")
    .requiredOption("--org <name>", "organization")
    .option("--since <iso>", "from this instant on, e.g. 2030-01-31 (UTC midnight) or 2030-01-31T12:00:00Z")
    .option("--until <iso>", "up to this instant (exclusive)")
    .option("--by <group>", "one row per day (UTC), model, key or endpoint", groupBy)
    .option("--user <id>", "only the requests that sent this `user` (the end-user id, exact match)")
    .option("--json", "print one JSON object: the totals at the top level, and groups")
    .action(
      run(async ({ api, out }, opts: UsageOptions) => {
        // The server parses and checks the dates, so its wording is the one the operator sees.
        const query = { since: opts.since, until: opts.until, by: opts.by, user: opts.user };
        const usage = await api.get<UsageWire>(`/orgs/${pathSegment(opts.org)}/usage`, query);
        if (opts.json === true) return out.json(usage);
        const from = usage.since === null ? "" : ` from ${day(usage.since)}`;
        const to = usage.until === null ? "" : ` until ${day(usage.until)}`;
        const who = usage.user === null ? "" : ` by user ${JSON.stringify(usage.user)}`;
        out.line(`Usage of organization "${usage.org}"${who}${from || to ? `${from}${to}` : " (all time)"}:`);
        const rows = [...usage.groups.map((g) => [g.key, ...usageCells(g)]), ["total", ...usageCells(usage)]];
        out.table([(usage.by ?? "").toUpperCase(), ...USAGE_COLUMNS], rows);
      }),
    );
}
