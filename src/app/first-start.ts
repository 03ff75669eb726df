// The first start's credentials (the bootstrap API key and the first owner's sign-in): the console text, and the
// same in a 0600 file in the data dir so they are not lost with the console's scrollback.
import { join } from "node:path";
import { writeSecretFile } from "../auth/secret-file.js";
import type { BootstrapResult } from "../tenancy/types.js";

export const FIRST_START_CREDENTIALS_FILE = "first-start-credentials.txt";

export function firstStartCredentialsPath(dataDir: string): string {
  return join(dataDir, FIRST_START_CREDENTIALS_FILE);
}

/** When the bootstrap key stops working, in words. */
function expiryText(expiresAt: Date | null): string {
  return expiresAt === null
    ? "It does not expire."
    : `It expires at ${expiresAt.toISOString()}: create lasting keys in the dashboard or with \`hearth keys create\`.`;
}

/** What is printed once, before the server listens: the org and its first key. */
export function firstKeyAnnouncement(first: BootstrapResult): string {
  return [
    "",
    `Hearth created organization "${first.orgName}" with every configured model.`,
    "Its first API key is shown once, now; store it somewhere safe:",
    "",
    `  ${first.key}`,
    "",
    expiryText(first.keyExpiresAt),
    "",
  ].join("\n");
}

/** What is printed once the dashboard's address is known: the first owner's sign-in. */
export function firstOwnerAnnouncement(owner: { email: string; password: string }, url: string): string {
  return [
    `Sign in to the dashboard at ${url}/dashboard as its first owner (shown once, now):`,
    `  Email:    ${owner.email}`,
    `  Password: ${owner.password}`,
    "",
  ].join("\n");
}

/**
 * Writes everything the console was shown to <dataDir>/first-start-credentials.txt (0600) and returns its path.
 * Delete it once the credentials are stored elsewhere.
 */
export function writeFirstStartCredentials(dataDir: string, first: BootstrapResult, url: string): string {
  const path = firstStartCredentialsPath(dataDir);
  const lines = [
    `# Hearth's first-start credentials, written ${new Date().toISOString()}.`,
    "# Store them somewhere safe, then delete this file.",
    "",
    `Organization: ${first.orgName}`,
    `API key:      ${first.key}`,
    `Key expires:  ${first.keyExpiresAt?.toISOString() ?? "never"}`,
  ];
  if (first.owner !== null) {
    lines.push(
      "",
      `Dashboard:    ${url}/dashboard`,
      `Email:        ${first.owner.email}`,
      `Password:     ${first.owner.password}`,
    );
  }
  writeSecretFile(path, `${lines.join("\n")}\n`);
  return path;
}
