// llama.cpp's own llama-server, built from node-llama-cpp's llama.cpp source, on the default GGUF: it serves the
// OpenAI routes the fleet relies on, and runs node-llama-cpp's prebuilt libraries (the kernels Hearth runs).
import { execFile } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SamplingParams } from "../../src/engine/types.js";
import { upstreamRequestBody } from "../../src/engine/upstream/wire.js";
import { generationRequest, greedySampling } from "../support/generation-request.js";
import {
  defaultModelPath,
  ensureLlamaServer,
  type LlamaServer,
  startLlamaServer,
} from "../support/llama-server.js";

const PREBUILT = realpathSync(
  join(
    import.meta.dirname,
    "..",
    "..",
    "node_modules",
    "@node-llama-cpp",
    `linux-${process.arch}`,
    "bins",
    `linux-${process.arch}`,
  ),
);
const ALIAS = "smollm2-135m-instruct";

let server: LlamaServer;

// A first build compiles llama.cpp (minutes on two cores); CI builds it before the tests (.ci/run).
beforeAll(async () => {
  const modelPath = await defaultModelPath();
  server = await startLlamaServer({ modelPath, alias: ALIAS, parallel: 2, contextSize: 2048 });
}, 40 * 60_000);

afterAll(async () => {
  await server?.stop();
});

interface SseChunk {
  choices?: { delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

/** The `data:` payloads of an SSE body, in order ("[DONE]" included as is). */
function sseData(body: string): string[] {
  return body
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice("data: ".length));
}

async function postJson(path: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

const MESSAGES = [{ role: "user", content: "Name one colour." }];

describe("llama-server built from node-llama-cpp's source", () => {
  it("lists the model under its alias on /v1/models", async () => {
    const response = await fetch(`${server.baseUrl}/models`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { object: string; data: { id: string; object: string }[] };
    expect(body.object).toBe("list");
    expect(body.data.map((m) => m.id)).toContain(ALIAS);
  });

  it("streams a chat completion at temperature 0, with a usage chunk when include_usage is asked", async () => {
    const response = await postJson("/v1/chat/completions", {
      model: ALIAS,
      messages: MESSAGES,
      temperature: 0,
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const data = sseData(await response.text());
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as SseChunk);
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    expect(text.trim().length).toBeGreaterThan(0);
    const finishes = chunks.map((c) => c.choices?.[0]?.finish_reason).filter((reason) => reason != null);
    expect(finishes).toHaveLength(1);
    expect(["length", "stop"]).toContain(finishes[0]);
    const usage = chunks.at(-1)?.usage;
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBeLessThanOrEqual(16);
    expect(usage?.total_tokens).toBe((usage?.prompt_tokens ?? 0) + (usage?.completion_tokens ?? 0));

    // Greedy: the same request gives the same text.
    const again = await postJson("/v1/chat/completions", {
      model: ALIAS,
      messages: MESSAGES,
      temperature: 0,
      max_tokens: 16,
    });
    const completion = (await again.json()) as { choices: { message: { content: string } }[] };
    expect(completion.choices[0]?.message.content).toBe(text);
  });

  it("counts on /tokenize exactly the prompt tokens it bills for the rendered chat", async () => {
    const completion = await postJson("/v1/chat/completions", {
      model: ALIAS,
      messages: MESSAGES,
      max_tokens: 1,
    });
    const { usage } = (await completion.json()) as { usage: { prompt_tokens: number } };

    const rendered = await postJson("/apply-template", { messages: MESSAGES });
    const { prompt } = (await rendered.json()) as { prompt: string };
    const tokenized = await postJson("/tokenize", {
      content: prompt,
      add_special: true,
      parse_special: true,
    });
    expect(tokenized.status).toBe(200);
    const { tokens } = (await tokenized.json()) as { tokens: number[] };
    expect(tokens.length).toBe(usage.prompt_tokens);

    const hello = await postJson("/tokenize", { content: "Hello world" });
    expect(((await hello.json()) as { tokens: number[] }).tokens.length).toBeGreaterThan(0);
  });

  it("runs on node-llama-cpp's prebuilt libllama, libggml, libllama-common and CPU backend", async () => {
    const pid = server.process.pid;
    if (pid === undefined) throw new Error("llama-server has no pid");
    // The kernel names the file that was opened, after symlinks: the prebuilt files themselves.
    const mapped = new Set(
      readFileSync(`/proc/${pid}/maps`, "utf8")
        .split("\n")
        .map((line) => line.split(/\s+/).slice(5).join(" "))
        .filter((path) => /\/lib(llama|ggml|mtmd)[^/]*\.so$/.test(path)),
    );
    const fromPrebuilt = (pattern: RegExp) =>
      [...mapped].filter((p) => pattern.test(p) && p.startsWith(`${PREBUILT}/`));
    expect(fromPrebuilt(/\/libllama\.v[^/]*\.so$/)).toHaveLength(1);
    expect(fromPrebuilt(/\/libggml\.v[^/]*\.so$/)).toHaveLength(1);
    expect(fromPrebuilt(/\/libggml-base\.so$/)).toHaveLength(1);
    expect(fromPrebuilt(/\/libllama-common\.so$/)).toHaveLength(1);
    expect(fromPrebuilt(/\/libggml-cpu-[^/]*\.so$/)).toHaveLength(1);
    // Built here, and only these: what node-llama-cpp does not ship (mtmd) and the server's own code.
    const elsewhere = [...mapped].filter((p) => !p.startsWith(`${PREBUILT}/`)).map((p) => basename(p));
    expect(elsewhere.sort()).toEqual(["libllama-server-impl.so", "libmtmd.so"]);

    // The dynamic linker agrees: the llama and ggml libraries the binary needs resolve to the prebuilt files.
    const { stdout } = await promisify(execFile)("ldd", [await ensureLlamaServer()]);
    const resolved = new Map(
      [
        ...stdout.matchAll(/^\s*(libllama\.so|libllama-common\.so|libggml\.so|libggml-base\.so) => (\S+)/gm),
      ].map(([, name, path]) => [name, realpathSync(path ?? "")]),
    );
    expect([...resolved.keys()].sort()).toEqual([
      "libggml-base.so",
      "libggml.so",
      "libllama-common.so",
      "libllama.so",
    ]);
    for (const path of resolved.values()) expect(path.startsWith(`${PREBUILT}/`)).toBe(true);
  });

  /** The text llama-server streams for the body Hearth's wire builds for a llama-server upstream. */
  async function viaHearthsWire(sampling: Partial<SamplingParams>): Promise<string> {
    const request = generationRequest(ALIAS, {
      messages: [{ role: "user", content: "Tell me about the sea." }],
      sampling: greedySampling({ maxTokens: 24, ...sampling }),
    });
    // As the upstream engine sends it: the window is the prompt's count plus max_tokens (here a bound on both).
    const body = upstreamRequestBody(request, {
      model: ALIAS,
      kind: "llama-server",
      cacheSalt: "",
      penaltyWindow: 2048,
    });
    const response = await postJson("/v1/chat/completions", body);
    const text = await response.text();
    expect(response.status, text).toBe(200);
    const chunks = sseData(text)
      .slice(0, -1)
      .map((d) => JSON.parse(d) as SseChunk);
    return chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
  }

  it("takes vLLM's sampling extensions by the names Hearth sends a llama-server upstream", async () => {
    const greedy = await viaHearthsWire({ temperature: 0 });
    expect(greedy.length).toBeGreaterThan(0);
    // At temperature 1.5 a draw over the vocabulary wanders; top_k 1, or min_p 1, leaves only the likeliest token.
    for (const seed of [1, 2]) {
      expect(await viaHearthsWire({ temperature: 1.5, topK: 1, seed })).toBe(greedy);
      expect(await viaHearthsWire({ temperature: 1.5, minP: 1, seed })).toBe(greedy);
    }
    const wandering = await Promise.all([1, 2, 3].map((seed) => viaHearthsWire({ temperature: 1.5, seed })));
    expect(wandering.some((text) => text !== greedy)).toBe(true);
    // repeat_penalty (with repeat_last_n covering prompt and output) changes the greedy text; 1 leaves it.
    expect(await viaHearthsWire({ temperature: 0, repetitionPenalty: 1 })).toBe(greedy);
    expect(await viaHearthsWire({ temperature: 0, repetitionPenalty: 3 })).not.toBe(greedy);
  });
});
