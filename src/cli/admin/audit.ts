// `hearth audit`: the trail of tenancy changes, newest first, through the admin API.
import type { Command } from "commander";
import type { AuditWire, ListWire } from "../../http/admin/wire.js";
import { positiveInteger } from "./arguments.js";
import { day } from "./format.js";
import type { AdminRunner } from "./runner.js";

export function registerAuditCommand(program: Command, run: AdminRunner): void {
  program
    .command("audit")
    .description("show the audit trail of tenancy changes, newest first (needs a running server)")
    .option("--org <name>", "only changes to this organization")
    .option("--limit <n>", "how many entries (1-1000, default 100)", positiveInteger)
    .option("--json", "print a JSON array")
    .action(
      run(async ({ api, out }, opts: { org?: string; limit?: number; json?: boolean }) => {
        const list = await api.get<ListWire<AuditWire>>("/audit", { org: opts.org, limit: opts.limit });
        if (opts.json === true) return out.json(list.data);
        if (list.data.length === 0) return out.line("No audit entries.");
        const rows = list.data.map((e) => [day(e.at), e.actor, e.action, e.target, e.org_id ?? "-"]);
        out.table(["TIME", "ACTOR", "ACTION", "TARGET", "ORG"], rows);
      }),
    );
}
