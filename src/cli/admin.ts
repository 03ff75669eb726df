// `hearth keys|orgs|users|usage|audit …`: thin clients of the running server's admin API.
import { type Command, InvalidArgumentError } from "commander";
import { adminTokenPath, readAdminToken } from "../admin/admin-token.js";
import type {
  AuditWire,
  CreatedKeyWire,
  CreatedUserWire,
  KeyWire,
  ListWire,
  OrgWire,
  UsageWire,
} from "../admin/wire.js";
import type { HearthConfig } from "../config/schema.js";
import { USAGE_GROUP_BY, type UsageGroupBy, type UsageTotals } from "../usage/queries.js";

export interface AdminCommandsOptions {
  /** For tests: where requests go (default: the global fetch). */
  fetch?: typeof fetch;
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  /** Called with 1 after an error was printed (default: sets process.exitCode). */
  setExitCode?: (code: number) => void;
}

/** A failure already worded for the operator; printed as `hearth: <message>`. */
export class AdminCliError extends Error {
  override name = "AdminCliError";
}

interface Io {
  out(line: string): void;
  err(line: string): void;
  setExitCode(code: number): void;
}

export function registerAdminCommands(
  program: Command,
  loadConfig: () => HearthConfig,
  options: AdminCommandsOptions = {},
): void {
  const io: Io = {
    out: (line) => (options.stdout ?? ((t) => process.stdout.write(t)))(`${line}\n`),
    err: (line) => (options.stderr ?? ((t) => process.stderr.write(t)))(`${line}\n`),
    setExitCode:
      options.setExitCode ??
      ((code) => {
        process.exitCode = code;
      }),
  };
  const fetchImpl = options.fetch ?? globalThis.fetch;

  // Every action: build a client, run, and turn any failure into one line on stderr and exit code 1.
  const run =
    <A extends unknown[]>(action: (client: AdminClient, ...args: A) => Promise<void>) =>
    async (...args: A): Promise<void> => {
      try {
        const client = new AdminClient(loadConfig(), fetchImpl);
        await action(client, ...args);
      } catch (err) {
        io.err(`hearth: ${err instanceof Error ? err.message : String(err)}`);
        io.setExitCode(1);
      }
    };

  const keys = program
    .command("keys")
    .description("create, list and revoke API keys (needs a running server)");

  keys
    .command("create")
    .description("create an API key; the secret is printed once, as the last line")
    .requiredOption("--org <name>", "organization the key belongs to")
    .option("--name <label>", "a label to recognise the key by")
    .option(
      "--expires-in <duration>",
      "the key stops working after this long: 3600s, 90m, 12h, 30d (plain numbers are seconds)",
      parseDuration,
    )
    .option("--json", "print one JSON object instead")
    .action(
      run(async (client, opts: { org: string; name?: string; expiresIn?: number; json?: boolean }) => {
        const body: Record<string, unknown> = {};
        if (opts.name !== undefined) body.name = opts.name;
        if (opts.expiresIn !== undefined) body.expires_in = opts.expiresIn;
        const created = await client.request<CreatedKeyWire>("POST", `/orgs/${seg(opts.org)}/keys`, body);
        if (opts.json === true) return io.out(JSON.stringify(created, null, 2));
        const label = created.name === null ? "" : ` "${created.name}"`;
        const expiry = created.expires_at === null ? "" : `, expires ${created.expires_at}`;
        io.out(`Created API key${label} ${created.id} for organization "${created.org}"${expiry}.`);
        io.out("The key is shown only now; store it somewhere safe:");
        io.out(created.key);
      }),
    );

  keys
    .command("list")
    .description("list an organization's keys (never their secrets)")
    .requiredOption("--org <name>", "organization")
    .option("--json", "print a JSON array")
    .action(
      run(async (client, opts: { org: string; json?: boolean }) => {
        const list = await client.request<ListWire<KeyWire>>("GET", `/orgs/${seg(opts.org)}/keys`);
        if (opts.json === true) return io.out(JSON.stringify(list.data, null, 2));
        if (list.data.length === 0) return io.out(`Organization "${opts.org}" has no API keys.`);
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
        const header = ["ID", "NAME", "KEY", "CREATED", "LAST USED", "EXPIRES", "REVOKED", "STATUS"];
        for (const line of table(header, rows)) io.out(line);
      }),
    );

  keys
    .command("revoke")
    .description("revoke an API key; it stops working within a second")
    .argument("<id>", "key id (key_…)")
    .action(
      run(async (client, id: string) => {
        const key = await client.request<KeyWire>("DELETE", `/keys/${seg(id)}`);
        io.out(`Revoked API key ${key.id} (${key.display}) of organization "${key.org}".`);
      }),
    );

  const orgs = program
    .command("orgs")
    .description("manage organizations and their models (needs a running server)");

  orgs
    .command("create")
    .description("create an organization")
    .argument("<name>", "organization name")
    .option("--models <ids>", "comma-separated model ids to grant", commaList)
    .option("--rpm <n>", "requests per minute (0 = unlimited, the default)", limit)
    .option("--tpm <n>", "tokens per minute (0 = unlimited, the default)", limit)
    .option("--json", "print one JSON object instead")
    .action(
      run(
        async (
          client,
          name: string,
          opts: { models?: string[]; rpm?: number; tpm?: number; json?: boolean },
        ) => {
          const body = { name, models: opts.models ?? [], ...limitsBody(opts) };
          const org = await client.request<OrgWire>("POST", "/orgs", body);
          if (opts.json === true) return io.out(JSON.stringify(org, null, 2));
          io.out(
            `Created organization "${org.name}" (${org.id}) with models: ${modelList(org.models)}; ` +
              `limits: ${limitsText(org)}.`,
          );
        },
      ),
    );

  orgs
    .command("set-limits")
    .description("set an organization's requests and tokens per minute (0 = unlimited)")
    .argument("<name>", "organization name")
    .option("--rpm <n>", "requests per minute (0 = unlimited)", limit)
    .option("--tpm <n>", "tokens per minute (0 = unlimited)", limit)
    .option("--json", "print one JSON object instead")
    .action(
      run(async (client, name: string, opts: { rpm?: number; tpm?: number; json?: boolean }) => {
        if (opts.rpm === undefined && opts.tpm === undefined) {
          throw new AdminCliError("give --rpm, --tpm or both (0 = unlimited)");
        }
        const org = await client.request<OrgWire>("PATCH", `/orgs/${seg(name)}/limits`, limitsBody(opts));
        if (opts.json === true) return io.out(JSON.stringify(org, null, 2));
        io.out(`Limits of organization "${org.name}": ${limitsText(org)}.`);
      }),
    );

  orgs
    .command("list")
    .description("list organizations and their models")
    .option("--json", "print a JSON array")
    .action(
      run(async (client, opts: { json?: boolean }) => {
        const list = await client.request<ListWire<OrgWire>>("GET", "/orgs");
        if (opts.json === true) return io.out(JSON.stringify(list.data, null, 2));
        if (list.data.length === 0) return io.out("No organizations.");
        const rows = list.data.map((o) => [
          o.name,
          o.id,
          modelList(o.models),
          limitText(o.rpm),
          limitText(o.tpm),
          day(o.created_at),
        ]);
        for (const line of table(["NAME", "ID", "MODELS", "RPM", "TPM", "CREATED"], rows)) io.out(line);
      }),
    );

  orgs
    .command("grant")
    .description("let an organization use a model")
    .argument("<name>", "organization name")
    .argument("<model>", "model id")
    .action(
      run(async (client, name: string, model: string) => {
        const org = await client.request<OrgWire>("POST", `/orgs/${seg(name)}/grants`, { model });
        io.out(`Granted "${model}" to organization "${org.name}"; its models: ${modelList(org.models)}.`);
      }),
    );

  orgs
    .command("revoke")
    .description("stop an organization from using a model")
    .argument("<name>", "organization name")
    .argument("<model>", "model id")
    .action(
      run(async (client, name: string, model: string) => {
        const org = await client.request<OrgWire>("DELETE", `/orgs/${seg(name)}/grants/${seg(model)}`);
        io.out(`Revoked "${model}" from organization "${org.name}"; its models: ${modelList(org.models)}.`);
      }),
    );

  const usersCommand = program
    .command("users")
    .description("manage dashboard users (needs a running server)");

  usersCommand
    .command("create")
    .description("create a user in an organization; without --password one is generated and printed once")
    .requiredOption("--org <name>", "organization the user belongs to")
    .requiredOption("--email <address>", "the user's email address (their sign-in name)")
    .option("--password <password>", "initial password (at least 8 characters)")
    .option("--role <role>", "owner or member", role, "member")
    .option("--json", "print one JSON object instead")
    .action(
      run(
        async (
          client,
          opts: { org: string; email: string; password?: string; role: string; json?: boolean },
        ) => {
          const body: Record<string, unknown> = { email: opts.email, role: opts.role };
          if (opts.password !== undefined) body.password = opts.password;
          const user = await client.request<CreatedUserWire>("POST", `/orgs/${seg(opts.org)}/users`, body);
          if (opts.json === true) return io.out(JSON.stringify(user, null, 2));
          io.out(`Created user ${user.email} (${user.id}) as ${user.role} of organization "${user.org}".`);
          if (user.password !== undefined) {
            io.out("The generated password is shown only now; pass it on safely:");
            io.out(user.password);
          }
        },
      ),
    );

  program
    .command("usage")
    .description("show an organization's requests and tokens (needs a running server)")
    .requiredOption("--org <name>", "organization")
    .option("--since <iso>", "from this instant on, e.g. 2030-01-31 (UTC midnight) or 2030-01-31T12:00:00Z")
    .option("--until <iso>", "up to this instant (exclusive)")
    .option("--by <group>", "one row per day (UTC), model or key", groupBy)
    .option("--json", "print one JSON object: the totals at the top level, and groups")
    .action(
      run(
        async (
          client,
          opts: { org: string; since?: string; until?: string; by?: string; json?: boolean },
        ) => {
          const query = new URLSearchParams();
          for (const name of ["since", "until", "by"] as const) {
            const value = opts[name];
            if (value !== undefined) query.set(name, value);
          }
          const qs = query.size === 0 ? "" : `?${query.toString()}`;
          const usage = await client.request<UsageWire>("GET", `/orgs/${seg(opts.org)}/usage${qs}`);
          if (opts.json === true) return io.out(JSON.stringify(usage, null, 2));
          const from = usage.since === null ? "" : ` from ${day(usage.since)}`;
          const to = usage.until === null ? "" : ` until ${day(usage.until)}`;
          io.out(`Usage of organization "${usage.org}"${from || to ? `${from}${to}` : " (all time)"}:`);
          const rows = [
            ...usage.groups.map((g) => [g.key, ...usageCells(g)]),
            ["total", ...usageCells(usage)],
          ];
          const header = [
            "REQUESTS",
            "PROMPT",
            "COMPLETION",
            "REASONING",
            "CACHED",
            "TOTAL",
            "ABORTED",
            "ERRORS",
          ];
          for (const line of table([(usage.by ?? "").toUpperCase(), ...header], rows)) io.out(line);
        },
      ),
    );

  program
    .command("audit")
    .description("show the audit trail of tenancy changes, newest first (needs a running server)")
    .option("--org <name>", "only changes to this organization")
    .option("--limit <n>", "how many entries (1-1000, default 100)", positiveInteger)
    .option("--json", "print a JSON array")
    .action(
      run(async (client, opts: { org?: string; limit?: number; json?: boolean }) => {
        const query = new URLSearchParams();
        if (opts.org !== undefined) query.set("org", opts.org);
        if (opts.limit !== undefined) query.set("limit", String(opts.limit));
        const qs = query.size === 0 ? "" : `?${query.toString()}`;
        const list = await client.request<ListWire<AuditWire>>("GET", `/audit${qs}`);
        if (opts.json === true) return io.out(JSON.stringify(list.data, null, 2));
        if (list.data.length === 0) return io.out("No audit entries.");
        const rows = list.data.map((e) => [day(e.at), e.actor, e.action, e.target, e.org_id ?? "-"]);
        for (const line of table(["TIME", "ACTOR", "ACTION", "TARGET", "ORG"], rows)) io.out(line);
      }),
    );
}

/** The admin API over HTTP with the admin token; failures become AdminCliErrors with the server's message. */
class AdminClient {
  private readonly baseUrl: string;
  private readonly serverUrl: string;

  constructor(
    private readonly config: HearthConfig,
    private readonly fetchImpl: typeof fetch,
  ) {
    this.serverUrl = config.serverUrl.replace(/\/+$/, "");
    this.baseUrl = `${this.serverUrl}/admin/v1`;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const token = readAdminToken(this.config);
    if (token === undefined) {
      throw new AdminCliError(
        `no admin token: set HEARTH_ADMIN_TOKEN, or run where the server's data dir is (${adminTokenPath(this.config)} not found; set HEARTH_DATA_DIR)`,
      );
    }
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await this.fetchImpl(this.baseUrl + path, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch {
      throw new AdminCliError(
        `cannot reach the Hearth server at ${this.serverUrl} (is it running? set HEARTH_URL)`,
      );
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (!response.ok)
      throw new AdminCliError(errorMessage(parsed) ?? `the server answered HTTP ${response.status}`);
    if (parsed === undefined)
      throw new AdminCliError(`the server sent an unexpected answer (HTTP ${response.status})`);
    return parsed as T;
  }
}

function errorMessage(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined;
  const error = body.error;
  if (typeof error !== "object" || error === null || !("message" in error)) return undefined;
  return typeof error.message === "string" ? error.message : undefined;
}

/** One path segment; encoding also keeps a "/" in a model id inside its segment. */
function seg(value: string): string {
  return encodeURIComponent(value);
}

function positiveInteger(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n <= 0)
    throw new InvalidArgumentError("expected a positive whole number");
  return n;
}

function limit(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError("expected a whole number, 0 for unlimited");
  return n;
}

function groupBy(value: string): UsageGroupBy {
  const found = USAGE_GROUP_BY.find((g) => g === value);
  if (found === undefined) throw new InvalidArgumentError(`expected ${USAGE_GROUP_BY.join(", ")}`);
  return found;
}

function usageCells(t: UsageTotals): string[] {
  return [
    t.requests,
    t.prompt_tokens,
    t.completion_tokens,
    t.reasoning_tokens,
    t.cached_tokens,
    t.total_tokens,
    t.aborted,
    t.errors,
  ].map(String);
}

function role(value: string): string {
  if (value !== "owner" && value !== "member") throw new InvalidArgumentError('expected "owner" or "member"');
  return value;
}

const DURATION_UNITS: Readonly<Record<string, number>> = Object.freeze({ s: 1, m: 60, h: 3600, d: 86_400 });

/** "30d", "12h", "90m", "3600s" or a plain number of seconds → seconds. */
export function parseDuration(value: string): number {
  const match = /^(\d+)([smhd]?)$/.exec(value.trim());
  const unit = DURATION_UNITS[match?.[2] || "s"];
  const seconds = match === null || unit === undefined ? Number.NaN : Number(match[1]) * unit;
  if (!Number.isSafeInteger(seconds) || seconds <= 0) {
    throw new InvalidArgumentError("expected a positive duration such as 3600s, 90m, 12h or 30d");
  }
  return seconds;
}

/** The limits the operator gave, as admin API fields; a limit not given is left out (unchanged). */
function limitsBody(opts: { rpm?: number; tpm?: number }): { rpm?: number; tpm?: number } {
  return {
    ...(opts.rpm === undefined ? {} : { rpm: opts.rpm }),
    ...(opts.tpm === undefined ? {} : { tpm: opts.tpm }),
  };
}

function limitText(value: number | null): string {
  return value === null ? "unlimited" : String(value);
}

function limitsText(org: OrgWire): string {
  return `rpm ${limitText(org.rpm)}, tpm ${limitText(org.tpm)}`;
}

function commaList(value: string): string[] {
  return value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

function modelList(models: string[]): string {
  return models.length === 0 ? "(none)" : models.join(", ");
}

function day(iso: string): string {
  return iso.slice(0, 19).replace("T", " ");
}

function keyStatus(key: KeyWire): string {
  if (key.revoked_at !== null) return "revoked";
  if (key.expires_at !== null && Date.parse(key.expires_at) <= Date.now()) return "expired";
  return "active";
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)];
}
