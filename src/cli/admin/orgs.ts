// `hearth orgs create|set-limits|list|grant|revoke`: organizations, their models and limits via the admin API.
import type { Command } from "commander";
import type { ListWire, OrgWire } from "../../http/admin/wire.js";
import { commaList, limit } from "./arguments.js";
import { AdminCliError, pathSegment } from "./client.js";
import { day, limitsText, limitText, modelList } from "./format.js";
import type { AdminRunner } from "./runner.js";

export function registerOrgsCommands(program: Command, run: AdminRunner): void {
  const orgs = program
    .command("orgs")
    .description("manage organizations and their models (needs a running server)");
  createOrgCommand(orgs, run);
  setLimitsCommand(orgs, run);
  listOrgsCommand(orgs, run);
  grantModelCommand(orgs, run);
  revokeModelCommand(orgs, run);
}

interface LimitOptions {
  rpm?: number;
  tpm?: number;
}

/** The limits the operator gave, as admin API fields; a limit not given is left out (unchanged). */
function limitsBody(opts: LimitOptions): LimitOptions {
  return {
    ...(opts.rpm === undefined ? {} : { rpm: opts.rpm }),
    ...(opts.tpm === undefined ? {} : { tpm: opts.tpm }),
  };
}

function createOrgCommand(orgs: Command, run: AdminRunner): void {
  orgs
    .command("create")
    .description("create an organization")
    .argument("<name>", "organization name")
    .option("--models <ids>", "comma-separated model ids to grant", commaList)
    .option("--rpm <n>", "requests per minute (0 = unlimited, the default)", limit)
    .option("--tpm <n>", "tokens per minute (0 = unlimited, the default)", limit)
    .option("--json", "print one JSON object instead")
    .action(
      run(async ({ api, out }, name: string, opts: LimitOptions & { models?: string[]; json?: boolean }) => {
        const org = await api.post<OrgWire>("/orgs", {
          name,
          models: opts.models ?? [],
          ...limitsBody(opts),
        });
        if (opts.json === true) return out.json(org);
        out.line(
          `Created organization "${org.name}" (${org.id}) with models: ${modelList(org.models)}; ` +
            `limits: ${limitsText(org)}.`,
        );
      }),
    );
}

function setLimitsCommand(orgs: Command, run: AdminRunner): void {
  orgs
    .command("set-limits")
    .description("set an organization's requests and tokens per minute (0 = unlimited)")
    .argument("<name>", "organization name")
    .option("--rpm <n>", "requests per minute (0 = unlimited)", limit)
    .option("--tpm <n>", "tokens per minute (0 = unlimited)", limit)
    .option("--json", "print one JSON object instead")
    .action(
      run(async ({ api, out }, name: string, opts: LimitOptions & { json?: boolean }) => {
        if (opts.rpm === undefined && opts.tpm === undefined) {
          throw new AdminCliError("give --rpm, --tpm or both (0 = unlimited)");
        }
        const org = await api.patch<OrgWire>(`/orgs/${pathSegment(name)}/limits`, limitsBody(opts));
        if (opts.json === true) return out.json(org);
        out.line(`Limits of organization "${org.name}": ${limitsText(org)}.`);
      }),
    );
}

function listOrgsCommand(orgs: Command, run: AdminRunner): void {
  orgs
    .command("list")
    .description("list organizations and their models")
    .option("--json", "print a JSON array")
    .action(
      run(async ({ api, out }, opts: { json?: boolean }) => {
        const list = await api.get<ListWire<OrgWire>>("/orgs");
        if (opts.json === true) return out.json(list.data);
        if (list.data.length === 0) return out.line("No organizations.");
        const rows = list.data.map((o) => [
          o.name,
          o.id,
          modelList(o.models),
          limitText(o.rpm),
          limitText(o.tpm),
          day(o.created_at),
        ]);
        out.table(["NAME", "ID", "MODELS", "RPM", "TPM", "CREATED"], rows);
      }),
    );
}

function grantModelCommand(orgs: Command, run: AdminRunner): void {
  orgs
    .command("grant")
    .description("let an organization use a model")
    .argument("<name>", "organization name")
    .argument("<model>", "model id")
    .action(
      run(async ({ api, out }, name: string, model: string) => {
        const org = await api.post<OrgWire>(`/orgs/${pathSegment(name)}/grants`, { model });
        out.line(`Granted "${model}" to organization "${org.name}"; its models: ${modelList(org.models)}.`);
      }),
    );
}

function revokeModelCommand(orgs: Command, run: AdminRunner): void {
  orgs
    .command("revoke")
    .description("stop an organization from using a model")
    .argument("<name>", "organization name")
    .argument("<model>", "model id")
    .action(
      run(async ({ api, out }, name: string, model: string) => {
        const org = await api.delete<OrgWire>(`/orgs/${pathSegment(name)}/grants/${pathSegment(model)}`);
        out.line(`Revoked "${model}" from organization "${org.name}"; its models: ${modelList(org.models)}.`);
      }),
    );
}
