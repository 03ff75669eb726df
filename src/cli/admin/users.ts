// `hearth users create`: a dashboard user in an organization through the admin API.
import type { Command } from "commander";
import type { CreatedUserWire } from "../../http/admin/wire.js";
import { role } from "./arguments.js";
import { pathSegment } from "./client.js";
import type { AdminRunner } from "./runner.js";

export function registerUsersCommands(program: Command, run: AdminRunner): void {
  const users = program.command("users").description("manage dashboard users (needs a running server)");
  createUserCommand(users, run);
}

interface CreateUserOptions {
  org: string;
  email: string;
  password?: string;
  role: string;
  json?: boolean;
}

function createUserCommand(users: Command, run: AdminRunner): void {
  users
    .command("create")
    .description("create a user in an organization; without --password one is generated and printed once")
    .requiredOption("--org <name>", "organization the user belongs to")
    .requiredOption("--email <address>", "the user's email address (their sign-in name)")
    .option("--password <password>", "initial password (at least 8 characters)")
    .option("--role <role>", "owner or member", role, "member")
    .option("--json", "print one JSON object instead")
    .action(
      run(async ({ api, out }, opts: CreateUserOptions) => {
        const body = {
          email: opts.email,
          role: opts.role,
          ...(opts.password === undefined ? {} : { password: opts.password }),
        };
        const user = await api.post<CreatedUserWire>(`/orgs/${pathSegment(opts.org)}/users`, body);
        if (opts.json === true) return out.json(user);
        out.line(`Created user ${user.email} (${user.id}) as ${user.role} of organization "${user.org}".`);
        // The server sends a password only when it generated one; a given password is never echoed.
        if (user.password !== undefined) {
          out.line("The generated password is shown only now; pass it on safely:");
          out.line(user.password);
        }
      }),
    );
}
