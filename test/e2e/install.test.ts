// The install reproduces (issue 24, item 3): a fresh `npm ci` of the tracked files accepts package-lock.json,
// runs the project's install scripts (`prepare` builds dist/) and leaves `git status` clean; engines.node admits
// no Node older than a runtime dependency accepts. After a change to the dependencies, `npm run lock` writes a
// lock that passes (scripts/lock.sh says why npm alone does not). Dependencies' install scripts do not run: npm 11
// runs none without an `allowScripts` entry, and none is needed (esbuild's binary comes from its platform
// package; node-llama-cpp's postinstall is skipped by package.json's config).
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const REPO = join(import.meta.dirname, "..", "..");
const dirs: string[] = [];

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** This process's environment less what `npm test` adds (npm_config_*, npm_package_*, …): a shell's npm. */
function plainEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && key !== "INIT_CWD" && key !== "NODE_ENV") env[key] = value;
  }
  return env;
}

async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run("git", args, { cwd, maxBuffer: 64 << 20 });
  return stdout;
}

/** A new git repository of one commit holding the tracked files as they are in this working tree. */
async function freshCheckout(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "hearth-install-"));
  dirs.push(dir);
  const tracked = (await git(REPO, "ls-files", "-z")).split("\0").filter((path) => path !== "");
  for (const path of tracked) {
    // A tracked file deleted in the working tree is absent from the checkout, as it will be from the commit.
    if (existsSync(join(REPO, path))) cpSync(join(REPO, path), join(dir, path), { verbatimSymlinks: true });
  }
  await git(dir, "init", "--quiet");
  await git(dir, "add", "--all");
  await git(
    dir,
    "-c",
    "user.name=hearth",
    "-c",
    "user.email=hearth@localhost",
    "commit",
    "--quiet",
    "-m",
    "fresh",
  );
  return dir;
}

/** The lowest version a node range admits, as [major, minor, patch] (`^20.17.0 || >=22.9.0` → 20.17.0). */
function lowerBound(range: string): [number, number, number] {
  const bounds = range.split("||").map((alternative) => {
    const [major = 0, minor = 0, patch = 0] = (alternative.match(/\d+(?:\.(?:\d+|[x*]))*/)?.[0] ?? "0")
      .split(".")
      .map((part) => Number.parseInt(part, 10) || 0);
    return [major, minor, patch] as [number, number, number];
  });
  return bounds.sort(compareVersions)[0] ?? [0, 0, 0];
}

function compareVersions(a: readonly number[], b: readonly number[]): number {
  return (a[0] ?? 0) - (b[0] ?? 0) || (a[1] ?? 0) - (b[1] ?? 0) || (a[2] ?? 0) - (b[2] ?? 0);
}

/** npm's first lines (the reason: "Missing: … from lock file") and its last (a failed script's error). */
function excerpt(output: string): string {
  return output.length <= 6000 ? output : `${output.slice(0, 3000)}\n…\n${output.slice(-3000)}`;
}

describe("install", () => {
  it("a fresh npm ci of the tracked files succeeds and leaves git status clean", async () => {
    const dir = await freshCheckout();
    const started = Date.now();
    const result = await run("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund"], {
      cwd: dir,
      env: plainEnvironment(),
      maxBuffer: 64 << 20,
      timeout: 290_000,
    }).then(
      ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
      (error: { code?: number | string; stdout?: string; stderr?: string }) => ({
        code: error.code ?? "failed",
        output: `${error.stdout ?? ""}${error.stderr ?? ""}`,
      }),
    );
    expect(result.code, `npm ci failed:\n${excerpt(result.output)}`).toBe(0);
    // The project's install script ran: `prepare` built dist/ (git-ignored).
    expect(existsSync(join(dir, "dist", "main.js"))).toBe(true);
    expect(await git(dir, "status", "--porcelain", "--untracked-files=all")).toBe("");
    console.info(`npm ci (prepare included) took ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }, 300_000);

  it("engines.node admits no Node older than a runtime dependency accepts", () => {
    const manifest = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
      engines: { node: string };
    };
    const lock = JSON.parse(readFileSync(join(REPO, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean; engines?: { node?: string } }>;
    };
    const declared = lowerBound(manifest.engines.node);
    const tooOld = Object.entries(lock.packages)
      .filter(([path, meta]) => path !== "" && meta.dev !== true && typeof meta.engines?.node === "string")
      .filter(([, meta]) => compareVersions(lowerBound(meta.engines?.node ?? ""), declared) > 0)
      .map(([path, meta]) => `${path} needs node ${meta.engines?.node}`);
    expect(tooOld, `engines.node "${manifest.engines.node}" is too low`).toEqual([]);
  });
});
