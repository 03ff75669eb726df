// Codex CLI (`@openai/codex`, pinned in test/clients/npm-tools.txt, installed in the clients cache), unmodified,
// with Hearth as its model provider (`wire_api = "responses"`): `codex exec` runs a turn to its end against the
// default model, non-interactively, sandboxed read-only, with nothing reaching the network but Hearth.
//
// What a 135M model with a 2,048-token context needs of Codex's configuration: Codex's
// own instructions (~4,500 tokens) replaced by a short model_instructions_file, and the tools and prompt sections a
// small local model has no use for turned off (web search, which Hearth would refuse as a built-in tool; sub-agents;
// goals; the shell and exec tools; images; skills and their instructions; apps and plugins). Left: one developer
// message of instructions, the permissions and environment notes, the prompt, and Codex's request_user_input tool.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { hearth } from "./hearth.js";
import { logMark, routes, type ServedRequest, servedSince } from "./request-log.js";

const { baseURL, apiKey, model } = hearth();

const INSTRUCTIONS = "You are a helpful assistant in a terminal. Answer the user in one short sentence.\n";

/** The config.toml of a CODEX_HOME that points Codex at Hearth and keeps it small and offline. */
function codexConfig(instructionsFile: string): string {
  const toml = (value: string) => JSON.stringify(value);
  return `model = ${toml(model)}
model_provider = "hearth"
model_context_window = ${inject("hearthContextSize")}
model_instructions_file = ${toml(instructionsFile)}
# Hearth runs no built-in tool (it refuses web_search with a 400); no network for the agent either.
web_search = "disabled"
check_for_update_on_startup = false

[model_providers.hearth]
name = "Hearth"
base_url = ${toml(baseURL)}
env_key = "HEARTH_API_KEY"
wire_api = "responses"

[features]
goals = false
shell_tool = false
unified_exec = false
view_image = false
image_generation = false
computer_use = false
browser_use = false
apps = false
plugins = false
skill_search = false
sleep_tool = false
tool_suggest = false
enable_request_compression = false

[agents]
enabled = false

[skills]
include_instructions = false

[skills.bundled]
enabled = false

[analytics]
enabled = false
`;
}

/** A proxy on the discard port: any request Codex makes anywhere but Hearth (127.0.0.1) fails at once. */
const NO_NETWORK = {
  HTTP_PROXY: "http://127.0.0.1:9",
  HTTPS_PROXY: "http://127.0.0.1:9",
  ALL_PROXY: "http://127.0.0.1:9",
  NO_PROXY: "127.0.0.1,localhost",
};

interface CodexRun {
  code: number | null;
  stdout: string;
  stderr: string;
  lastMessage: string;
  events: Record<string, unknown>[];
  served: ServedRequest[];
}

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "hearth-codex-"));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** `codex exec --json PROMPT` in an empty work dir with its own CODEX_HOME and HOME; stdin closed. */
async function codexExec(prompt: string): Promise<CodexRun> {
  const home = mkdtempSync(join(dir, "home-"));
  const codexHome = join(home, ".codex");
  const work = mkdtempSync(join(dir, "work-"));
  const instructions = join(home, "instructions.md");
  const lastMessageFile = join(home, "last-message.txt");
  writeFileSync(instructions, INSTRUCTIONS);
  mkdirSync(codexHome);
  writeFileSync(join(codexHome, "config.toml"), codexConfig(instructions));
  const args = [
    "exec",
    "--json",
    "--ephemeral",
    "--skip-git-repo-check",
    "--strict-config",
    "--sandbox",
    "read-only",
    "--color",
    "never",
    "--cd",
    work,
    "--output-last-message",
    lastMessageFile,
    prompt,
  ];
  const mark = await logMark();
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
    (resolve) => {
      const child = execFile(
        inject("clientsCodex"),
        args,
        {
          cwd: work,
          env: {
            PATH: process.env.PATH ?? "",
            HOME: home,
            CODEX_HOME: codexHome,
            HEARTH_API_KEY: apiKey,
            RUST_LOG: "error",
            ...NO_NETWORK,
          },
          timeout: 150_000,
          maxBuffer: 16 * 1024 * 1024,
        },
        (error, out, err) => {
          const exit = error === null ? 0 : typeof error.code === "number" ? error.code : null;
          resolve({ code: exit, stdout: out, stderr: err });
        },
      );
      child.stdin?.end();
    },
  );
  const served = await servedSince(mark);
  let lastMessage = "";
  try {
    lastMessage = readFileSync(lastMessageFile, "utf8");
  } catch {
    // No last message: the turn did not end; the assertions say so with Codex's output.
  }
  const events = stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { code, stdout, stderr, lastMessage, events, served };
}

describe("Codex CLI (codex exec, model provider Hearth, wire_api responses)", () => {
  it("runs a turn to its end against the default model: exit 0, the final message printed, served by /v1/responses", async () => {
    const run = await codexExec("Say hello to me.");
    const context = `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
    expect(run.code, context).toBe(0);
    const types = run.events.map((event) => event.type);
    expect(types, context).toContain("turn.completed");
    expect(types, context).not.toContain("turn.failed");
    const messages = run.events
      .filter((event) => event.type === "item.completed")
      .map((event) => event.item as { type: string; text?: string })
      .filter((item) => item.type === "agent_message");
    expect(messages.length, context).toBeGreaterThan(0);
    const finalMessage = messages.at(-1)?.text ?? "";
    expect(finalMessage.trim().length, context).toBeGreaterThan(0);
    expect(run.lastMessage.trim()).toBe(finalMessage.trim());
    const completed = run.events.find((event) => event.type === "turn.completed") as {
      usage?: { input_tokens?: number; output_tokens?: number };
    };
    expect(completed.usage?.input_tokens).toBeGreaterThan(0);
    expect(completed.usage?.output_tokens).toBeGreaterThan(0);
    // Every request Codex made was a successful POST /v1/responses (no chat completions, no model listing).
    expect(run.served.length, context).toBeGreaterThan(0);
    for (const request of run.served) {
      expect(`${request.method} ${request.path} ${request.status}`, context).toBe("POST /v1/responses 200");
    }
    expect(routes(run.served)).toContain("POST /v1/responses");
  });
});
