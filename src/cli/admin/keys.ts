// `hearth keys create|list|revoke`: an organization's API keys through the admin API.
import type { Command } from "commander";
import type { CreatedKeyWire, KeyWire, ListWire } from "../../http/admin/wire.js";
import { parseDuration } from "./arguments.js";
import { pathSegment } from "./client.js";
import { day, keyStatus } from "./format.js";
import type { AdminRunner } from "./runner.js";

export function registerKeysCommands(program: Command, run: AdminRunner): void {
  const keys = program
    .command("keys")
    .description("create, list and revoke API keys (needs a running server)");
  createKeyCommand(keys, run);
  listKeysCommand(keys, run);
  revokeKeyCommand(keys, run);
}

interface CreateKeyOptions {
  org: string;
  name?: string;
  expiresIn?: number;
  json?: boolean;
}

function createKeyCommand(keys: Command, run: AdminRunner): void {
  keys
    .command("create")
    .description("create an API key; the secret is printed once, as the last line")
    .requiredOption("--org <name>", "organization the key belongs to")
    .option("--name <label>", "a label to recognise the key by")
    .option(
      "--expires-in <duration>",
      "the key stops working after this long: 3600s, 90m, 12h, 30d, 1h30m (plain numbers are seconds)",
      parseDuration,
    )
    .option("--json", "print one JSON object instead")
    .action(
      run(async ({ api, out }, opts: CreateKeyOptions) => {
        const body = {
          ...(opts.name === undefined ? {} : { name: opts.name }),
          ...(opts.expiresIn === undefined ? {} : { expires_in: opts.expiresIn }),
        };
        const created = await api.post<CreatedKeyWire>(`/orgs/${pathSegment(opts.org)}/keys`, body);
        if (opts.json === true) return out.json(created);
        const label = created.name === null ? "" : ` "${created.name}"`;
        const expiry = created.expires_at === null ? "" : `, expires ${created.expires_at}`;
        out.line(`Created API key${label} ${created.id} for organization "${created.org}"${expiry}.`);
        out.line("The key is shown only now; store it somewhere safe:");
        // Last, alone on its line: scripts take the secret from the last line of stdout.
        out.line(created.key);
      }),
    );
}

function listKeysCommand(keys: Command, run: AdminRunner): void {
  keys
    .command("list")
    .description("list an organization's keys (never their secrets)")
    .requiredOption("--org <name>", "organization")
    .option("--json", "print a JSON array")
    .action(
      run(async ({ api, out }, opts: { org: string; json?: boolean }) => {
        const list = await api.get<ListWire<KeyWire>>(`/orgs/${pathSegment(opts.org)}/keys`);
        if (opts.json === true) return out.json(list.data);
        if (list.data.length === 0) return out.line(`Organization "${opts.org}" has no API keys.`);
        const rows = list.data.map((k) => [
          k.id,
          k.name ?? "",
          k.display,
          day(k.created_at),
          k.last_used_at === null ? "never" : day(k.last_used_at),
          k.expires_at === null ? "never" : day(k.expires_at),
          k.revoked_at === null ? "-" : day(k.revoked_at),
          keyStatus(k),
        ]);
        out.table(["ID", "NAME", "KEY", "CREATED", "LAST USED", "EXPIRES", "REVOKED", "STATUS"], rows);
      }),
    );
}

function revokeKeyCommand(keys: Command, run: AdminRunner): void {
  keys
    .command("revoke")
    .description("revoke an API key; it stops working within a second")
    .argument("<id>", "key id (key_…)")
    .action(
      run(async ({ api, out }, id: string) => {
        const key = await api.delete<KeyWire>(`/keys/${pathSegment(id)}`);
        out.line(`Revoked API key ${key.id} (${key.display}) of organization "${key.org}".`);
      }),
    );
}
