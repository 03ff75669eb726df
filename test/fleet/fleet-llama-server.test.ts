// A Hearth gateway in front of llama.cpp's own llama-server (a foreign engine with its own dialect: its finish
// reason on a chunk of its own or with content, `timings`, per-slot context in `/v1/models`, a tokenize route),
// driven through the official openai client.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type OpenAI from "openai";
import { APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultModelPath, type LlamaServer, startLlamaServer } from "../support/llama-server.js";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";

const MODEL = "fleet-llama";
let upstream: LlamaServer;
let gateway: ServerProcess;
let client: OpenAI;
let configDir: string;

beforeAll(async () => {
  upstream = await startLlamaServer({
    modelPath: await defaultModelPath(),
    parallel: 2,
    contextSize: 4096,
    alias: "smollm2-135m-instruct",
  });
  configDir = mkdtempSync(join(tmpdir(), "hearth-fleet-llama-"));
  const config = join(configDir, "hearth.yaml");
  writeFileSync(
    config,
    [
      "models:",
      `  - id: ${MODEL}`,
      "    upstream:",
      "      model: smollm2-135m-instruct",
      "      endpoints:",
      `        - url: ${upstream.baseUrl}`,
      "      kind: auto",
      "      maxInFlight: 2",
      "      probeIntervalMs: 500",
      "",
    ].join("\n"),
  );
  gateway = await startServerProcess({ args: ["--config", config] });
  client = openaiClient(gateway);
}, 2_400_000);

afterAll(async () => {
  await gateway?.stop();
  await upstream?.stop();
  if (configDir !== undefined) rmSync(configDir, { recursive: true, force: true });
});

const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Name three colours." }];

describe("a Hearth gateway in front of llama-server", () => {
  it("lists the model with the context llama-server reports per slot, and is healthy", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    // -c 4096 shared by -np 2: llama-server's meta.n_ctx is each slot's 2048.
    expect((models.data[0] as unknown as { context_length: number }).context_length).toBe(2048);
    const health = (await (await fetch(`${gateway.url}/health`)).json()) as {
      status: string;
      models: { id: string; status: string; endpoints: { url: string; status: string }[] }[];
    };
    expect(health.status).toBe("ok");
    expect(health.models).toMatchObject([
      { id: MODEL, status: "ok", endpoints: [{ url: upstream.baseUrl, status: "ok" }] },
    ]);
  });

  it("answers non-streamed in Hearth's own shape, with llama-server's exact usage", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 12,
      temperature: 0,
    });
    expect(completion.model).toBe(MODEL);
    expect(completion.id).toMatch(/^chatcmpl-[A-Za-z0-9]{29}$/);
    expect(completion.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(completion.choices[0]?.finish_reason);
    // The same request straight to llama-server reports the same counts (temperature 0, same prompt).
    const direct = (await (
      await fetch(`${upstream.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "smollm2-135m-instruct", messages, max_tokens: 12, temperature: 0 }),
      })
    ).json()) as {
      usage: { prompt_tokens: number; completion_tokens: number };
      choices: { message: { content: string } }[];
    };
    expect(completion.usage?.prompt_tokens).toBe(direct.usage.prompt_tokens);
    expect(completion.usage?.completion_tokens).toBe(direct.usage.completion_tokens);
    expect(completion.choices[0]?.message.content).toBe(direct.choices[0]?.message.content);
  });

  it("streams with the finish reason in its own empty-delta chunk and the usage chunk only when asked", async () => {
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) chunks.push(chunk);
    const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishes).toHaveLength(1);
    expect(finishes[0]?.choices[0]?.delta).toEqual({});
    const usage = chunks.at(-1);
    expect(usage?.choices).toEqual([]);
    expect(usage?.usage?.completion_tokens).toBeGreaterThan(0);
    expect(chunks.every((c) => c.model === MODEL && c.id === chunks[0]?.id)).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text.length).toBeGreaterThan(0);

    const plain = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 4,
      stream: true,
    });
    const plainChunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of plain) plainChunks.push(chunk);
    expect(plainChunks.some((c) => c.usage !== undefined && c.usage !== null)).toBe(false);
  });

  it("relays llama-server's logprobs in OpenAI's shape, streamed and not, and forwards logit_bias", async () => {
    const asked = { model: MODEL, messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 };
    const completion = await client.chat.completions.create(asked);
    const entries = completion.choices[0]?.logprobs?.content ?? [];
    expect(entries).toHaveLength(completion.usage?.completion_tokens ?? -1);
    expect(Buffer.from(entries.flatMap((e) => e.bytes ?? [])).toString("utf8")).toBe(
      completion.choices[0]?.message.content,
    );
    for (const entry of entries) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(2);
      // Greedy: the chosen token is llama-server's most likely one.
      expect(entry.top_logprobs[0]?.token).toBe(entry.token);
      expect(Object.keys(entry).sort()).toEqual(["bytes", "logprob", "token", "top_logprobs"]);
    }
    // The same request straight to llama-server: the same tokens and values.
    const direct = (await (
      await fetch(`${upstream.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...asked, model: "smollm2-135m-instruct" }),
      })
    ).json()) as { choices: { logprobs: { content: { token: string; logprob: number }[] } }[] };
    const directEntries = direct.choices[0]?.logprobs.content ?? [];
    expect(entries.map((e) => e.token)).toEqual(directEntries.map((e) => e.token));
    entries.forEach((e, i) => {
      expect(e.logprob).toBeCloseTo(directEntries[i]?.logprob as number, 4);
    });

    const stream = await client.chat.completions.create({ ...asked, stream: true });
    const streamed: string[] = [];
    for await (const chunk of stream) {
      for (const e of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(e.token);
    }
    expect(streamed).toEqual(entries.map((e) => e.token));

    // llama-server judges the ids of its own vocabulary: banning the first token changes the reply.
    const tokenized = (await (
      await fetch(`${upstream.url}/tokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ content: entries[0]?.token }),
      })
    ).json()) as { tokens: number[] };
    expect(tokenized.tokens).toHaveLength(1);
    const banned = await client.chat.completions.create({
      ...asked,
      logit_bias: { [String(tokenized.tokens[0])]: -100 },
    });
    expect(banned.choices[0]?.logprobs?.content?.[0]?.token).not.toBe(entries[0]?.token);
  });

  it("records the usage llama-server reported, for the gateway's organization and the request's user", async () => {
    const before = JSON.parse((await hearthCli(gateway, ["usage", "--org", "default", "--json"])).stdout) as {
      completion_tokens: number;
      requests: number;
    };
    // The gateway forwards `user`; llama-server takes the request with it (it ignores the field).
    const user = "llama-server-end-user";
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 7,
      temperature: 0,
      user,
    });
    let after = before;
    for (let i = 0; i < 40 && after.requests === before.requests; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = JSON.parse(
        (await hearthCli(gateway, ["usage", "--org", "default", "--json"])).stdout,
      ) as typeof before;
    }
    expect(after.requests).toBe(before.requests + 1);
    expect(after.completion_tokens - before.completion_tokens).toBe(completion.usage?.completion_tokens);
    const byUser = JSON.parse(
      (await hearthCli(gateway, ["usage", "--org", "default", "--user", user, "--json"])).stdout,
    ) as typeof before;
    expect(byUser).toMatchObject({ requests: 1, completion_tokens: completion.usage?.completion_tokens });
  });

  it("refuses tools with a 400 naming why, not a plain-text answer: this llama-server's template cannot call tools", async () => {
    // llama-server itself answers such a request in plain text, tools and tool_choice ignored (its /props says
    // supports_tool_calls: false for SmolLM2's template): a client asking for a call would silently get none.
    const props = (await (await fetch(`${upstream.url}/props`)).json()) as {
      chat_template_caps: { supports_tool_calls: boolean };
    };
    expect(props.chat_template_caps.supports_tool_calls).toBe(false);
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    const ask = [{ role: "user" as const, content: "What is the weather in Paris?" }];
    for (const tool_choice of ["required", "auto"] as const) {
      const refused = await client.chat.completions
        .create({ model: MODEL, messages: ask, tools, tool_choice, max_tokens: 8 })
        .catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(APIError);
      expect((refused as APIError).status).toBe(400);
      expect((refused as APIError).param).toBe("tools");
      expect((refused as APIError).message).toContain("cannot call tools");
    }
    // tool_choice "none" asks for no call: served.
    const none = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      tools,
      tool_choice: "none",
      max_tokens: 4,
    });
    expect(none.choices[0]?.message.tool_calls ?? []).toEqual([]);
  });
});
