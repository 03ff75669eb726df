// A real fleet: two `hearth serve` workers behind a `hearth serve` gateway whose only model is upstream. The API
// through the gateway, then faults caused for real: kill -9 under load, a restart on the same port, SIGSTOP, a
// client abort, and both workers down.
import { randomUUID } from "node:crypto";
import type OpenAI from "openai";
import { APIError } from "openai";
import type { ChatCompletionCreateParamsStreaming } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { estimatePromptTokens } from "../../src/engine/upstream/tokenize.js";
import {
  endpointStatus,
  FLEET_MODEL,
  freePort,
  type Gateway,
  health,
  metricSum,
  startGateway,
  startWorker,
  WORKER_MODEL,
  waitFor,
} from "../support/fleet.js";
import { createKeyWithCli, hearthCli, openaiClient, type ServerProcess } from "../support/server-process.js";

const ports: number[] = [];
/** workers[i] serves on ports[i]; a restarted worker replaces its entry (the original is kept for cleanup). */
const workers: ServerProcess[] = [];
const replaced: ServerProcess[] = [];
let gateway: Gateway;
let client: OpenAI;

const countPrompt = (i: number) => `Count from ${i + 1} to ${i + 300}, separated by spaces.`;

interface UsageTotals {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

async function usageOf(
  server: Pick<ServerProcess, "url" | "dataDir">,
  ...args: string[]
): Promise<UsageTotals> {
  const { stdout } = await hearthCli(server, ["usage", "--org", "default", "--json", ...args]);
  const { requests, prompt_tokens, completion_tokens, total_tokens } = JSON.parse(stdout) as UsageTotals;
  return { requests, prompt_tokens, completion_tokens, total_tokens };
}

/** The workers' usage added up: what the gateway's records must equal. */
function sumOf(totals: UsageTotals[]): UsageTotals {
  const sum: UsageTotals = { requests: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  for (const t of totals) {
    for (const field of Object.keys(sum) as (keyof UsageTotals)[]) sum[field] += t[field];
  }
  return sum;
}

const requestsServed = (w: ServerProcess) => metricSum(w.url, "hearth_requests_total");
const busySequences = (w: ServerProcess) => metricSum(w.url, "hearth_busy_sequences");

interface StreamOutcome {
  /** When its first chunk arrived (undefined: none did). */
  firstChunkAt: number | undefined;
  text: string;
  finish: string | null;
  /** Whether any chunk carried usage. */
  usage: boolean;
  error: unknown;
}

/** Reads a streamed completion to its end, noting its first chunk's time; a thrown error is kept, not raised. */
async function consume(
  params: Omit<ChatCompletionCreateParamsStreaming, "model" | "stream">,
  onFirstChunk: () => void = () => undefined,
): Promise<StreamOutcome> {
  const outcome: StreamOutcome = {
    firstChunkAt: undefined,
    text: "",
    finish: null,
    usage: false,
    error: undefined,
  };
  try {
    const stream = await client.chat.completions.create({ model: FLEET_MODEL, stream: true, ...params });
    for await (const chunk of stream) {
      if (outcome.firstChunkAt === undefined) {
        outcome.firstChunkAt = Date.now();
        onFirstChunk();
      }
      outcome.text += chunk.choices[0]?.delta.content ?? "";
      outcome.finish = chunk.choices[0]?.finish_reason ?? outcome.finish;
      outcome.usage ||= chunk.usage !== undefined && chunk.usage !== null;
    }
  } catch (err) {
    outcome.error = err;
  }
  return outcome;
}

async function chatOnce(i: number, maxTokens = 8): Promise<string> {
  const completion = await client.chat.completions.create({
    model: FLEET_MODEL,
    messages: [{ role: "user", content: `Say hello to person ${i}.` }],
    max_tokens: maxTokens,
  });
  return completion.choices[0]?.finish_reason ?? "";
}

beforeAll(async () => {
  for (let i = 0; i < 2; i++) ports.push(await freePort());
  workers.push(...(await Promise.all(ports.map((port) => startWorker(port)))));
  gateway = await startGateway(workers.map((w, i) => ({ port: ports[i] ?? 0, apiKey: w.apiKey })));
  client = openaiClient(gateway.server);
});

afterAll(async () => {
  for (const w of [...workers, ...replaced]) {
    if (w.child.exitCode === null) w.child.kill("SIGCONT");
  }
  await gateway?.stop();
  await Promise.all([...workers, ...replaced].map((w) => w.stop("SIGKILL")));
});

describe("the gateway serves an upstream model only", () => {
  it("loads no embedded model and lists only fleet-smol in /health", async () => {
    const output = gateway.server.output();
    expect(output).not.toMatch(/model loaded|download|fetching/i);
    expect(workers[0]?.output()).toMatch(/model loaded/); // what a loading server does say
    const { status, body } = await health(gateway.server.url);
    expect(status).toBe(200);
    expect(body.models.map((m) => m.id)).toEqual([FLEET_MODEL]);
    expect(body.models[0]?.endpoints?.map((e) => e.status)).toEqual(["ok", "ok"]);
  });
});

describe("chat completions through the fleet", () => {
  it("relays exact usage, Hearth's ids and tool calls; usage matches the gateway's records and the workers'", async () => {
    const seen: UsageTotals = { requests: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    const add = (
      u: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | undefined,
    ) => {
      expect(u).toBeDefined();
      seen.requests++;
      seen.prompt_tokens += u?.prompt_tokens ?? 0;
      seen.completion_tokens += u?.completion_tokens ?? 0;
      seen.total_tokens += u?.total_tokens ?? 0;
    };
    const messages = [{ role: "user" as const, content: "Name three colors." }];
    // The end user's id goes upstream with the request: the workers record it too.
    const user = "fleet-end-user-1";
    const seenByUser: UsageTotals = { requests: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

    const plain = await client.chat.completions.create({
      model: FLEET_MODEL,
      messages,
      max_tokens: 16,
      user,
    });
    expect(plain.model).toBe(FLEET_MODEL);
    expect(plain.id).toMatch(/^chatcmpl-/);
    expect(plain.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(plain.usage?.completion_tokens).toBeGreaterThan(0);
    add(plain.usage);
    Object.assign(seenByUser, seen);

    const stream = await client.chat.completions.create({
      model: FLEET_MODEL,
      messages,
      max_tokens: 16,
      user,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0]?.id).toMatch(/^chatcmpl-/);
    expect(chunks.every((c) => c.model === FLEET_MODEL)).toBe(true);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(chunks.slice(0, -1).every((c) => c.usage === null || c.usage === undefined)).toBe(true);
    const deltas = chunks.filter((c) => (c.choices[0]?.delta.content ?? "") !== "").length;
    expect(last?.usage?.completion_tokens).toBeGreaterThanOrEqual(deltas);
    add(last?.usage ?? undefined);
    Object.assign(seenByUser, seen);

    // Without include_usage: no usage chunk (the gateway still asks the worker for usage, for its records).
    const quiet = await consume({ messages, max_tokens: 8 });
    expect(quiet.error).toBeUndefined();
    expect(quiet.finish).not.toBeNull();
    expect(quiet.usage).toBe(false);

    const tools = await client.chat.completions.create({
      model: FLEET_MODEL,
      messages: [{ role: "user", content: "What is the weather in Paris?" }],
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          },
        },
      ],
      tool_choice: "required",
      max_tokens: 64,
    });
    const call = tools.choices[0]?.message.tool_calls?.[0];
    expect(tools.choices[0]?.finish_reason).toBe("tool_calls");
    expect(call?.type === "function" ? call.function.name : undefined).toBe("get_weather");
    const args = call?.type === "function" ? (JSON.parse(call.function.arguments) as { city?: unknown }) : {};
    expect(typeof args.city).toBe("string");
    add(tools.usage);

    // The quiet stream's usage is known only from the records: gateway = workers' sum ⊇ what clients saw.
    let gatewayUsage: UsageTotals | undefined;
    let workerSum: UsageTotals | undefined;
    await waitFor("the usage records of 4 requests", async () => {
      gatewayUsage = await usageOf(gateway.server);
      workerSum = sumOf(await Promise.all(workers.map((w) => usageOf(w))));
      return gatewayUsage.requests === 4 && workerSum.requests === 4;
    });
    expect(gatewayUsage).toEqual(workerSum);
    const quietTokens = (gatewayUsage?.total_tokens ?? 0) - seen.total_tokens;
    expect(quietTokens).toBeGreaterThan(0);
    expect((gatewayUsage?.completion_tokens ?? 0) - seen.completion_tokens).toBeGreaterThan(0);

    // The two requests that sent `user`: exactly what their responses reported, at the gateway and the workers.
    expect(await usageOf(gateway.server, "--user", user)).toEqual(seenByUser);
    expect(sumOf(await Promise.all(workers.map((w) => usageOf(w, "--user", user))))).toEqual(seenByUser);
  });

  it("relays a worker's logprobs (and forwards logit_bias): the same tokens and values as the worker's own", async () => {
    const asked = {
      messages: [{ role: "user" as const, content: "Name a colour." }],
      max_tokens: 6,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
      // A bias the worker validates against its vocabulary: id 0 is <|endoftext|> on the default model.
      logit_bias: { "0": -1 },
      // A new salt: both requests evaluate the whole prompt cold, in one batch. A prompt partly served from cache
      // is computed in other batch shapes, and its logprobs differ in the second decimal.
      cache_salt: `logprobs-${randomUUID()}`,
    };
    const relayed = await client.chat.completions.create({ ...asked, model: FLEET_MODEL });
    const direct = await openaiClient(workers[0] as ServerProcess).chat.completions.create({
      ...asked,
      model: WORKER_MODEL,
    });
    const entries = relayed.choices[0]?.logprobs?.content ?? [];
    expect(entries.length).toBeGreaterThan(0);
    expect(entries).toEqual(direct.choices[0]?.logprobs?.content);
    // An id beyond the worker's vocabulary: the worker's 400, relayed with its param.
    const err = await client.chat.completions
      .create({ ...asked, model: FLEET_MODEL, logit_bias: { "999999": 1 } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(400);
    expect((err as APIError).param).toBe("logit_bias");
  });

  it("lists fleet-smol with the workers' context length; 404 without a grant; 429 before any worker", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([FLEET_MODEL]);
    const workerModels = await openaiClient(workers[0] as ServerProcess).models.list();
    const contextOf = (m: unknown) => (m as { context_length?: number }).context_length;
    expect(contextOf(models.data[0])).toBe(contextOf(workerModels.data[0]));
    expect(contextOf(models.data[0])).toBeGreaterThan(0);

    await hearthCli(gateway.server, ["orgs", "create", "no-grant"]);
    const stranger = openaiClient(gateway.server, await createKeyWithCli(gateway.server, "no-grant"));
    const notFound = await stranger.chat.completions
      .create({ model: FLEET_MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })
      .catch((err: unknown) => err);
    expect(notFound).toBeInstanceOf(APIError);
    expect((notFound as APIError).status).toBe(404);
    expect((notFound as APIError).code).toBe("model_not_found");

    await hearthCli(gateway.server, ["orgs", "create", "limited", "--models", FLEET_MODEL, "--rpm", "1"]);
    const limited = openaiClient(gateway.server, await createKeyWithCli(gateway.server, "limited"));
    const before = (await Promise.all(workers.map(requestsServed))).reduce((a, b) => a + b, 0);
    const ask = () =>
      limited.chat.completions
        .create({ model: FLEET_MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })
        .catch((err: unknown) => err);
    expect(await ask()).not.toBeInstanceOf(Error);
    const refused = await ask();
    expect((refused as APIError).status).toBe(429);
    const after = (await Promise.all(workers.map(requestsServed))).reduce((a, b) => a + b, 0);
    expect(after - before).toBe(1);
  });

  it("pre-charges an organization with a TPM limit the workers' own prompt count (their POST /tokenize)", async () => {
    const tpm = 100_000;
    await hearthCli(gateway.server, [
      "orgs",
      "create",
      "metered",
      "--models",
      FLEET_MODEL,
      "--tpm",
      String(tpm),
    ]);
    const key = await createKeyWithCli(gateway.server, "metered");
    const body = {
      model: FLEET_MODEL,
      messages: [
        { role: "system", content: "You are the assistant of a small bakery. Answer in one sentence." },
        { role: "user", content: "When do you open on Sundays, and do you sell rye bread?" },
      ],
      max_tokens: 4,
      temperature: 0,
    };
    const response = await fetch(`${gateway.server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    const { usage } = (await response.json()) as { usage: { prompt_tokens: number } };
    // The headers show the window right after the pre-charge: prompt (as the worker counted it) + max_tokens.
    const remaining = Number(response.headers.get("x-ratelimit-remaining-tokens"));
    expect(tpm - remaining).toBe(usage.prompt_tokens + body.max_tokens);
    // The estimate (what the gateway charges without a tokenizer) would have charged something else.
    const estimate = estimatePromptTokens(
      body.messages.map((m) => ({ role: m.role as "system" | "user", content: m.content })),
    );
    expect(estimate).not.toBe(usage.prompt_tokens);
  });
});

describe("faults", () => {
  it("kill -9 of a worker under load: only the streams it had started fail, with an error frame", async () => {
    const killed = workers[0] as ServerProcess;
    let started = 0;
    let ended = 0;
    const outcomes = Array.from({ length: 8 }, (_, i) =>
      consume(
        { messages: [{ role: "user", content: countPrompt(i) }], max_tokens: 48, temperature: 0 },
        () => {
          started++;
        },
      ).finally(() => {
        ended++;
      }),
    );
    // 4 per worker (maxInFlight), 2 decoding on each (--parallel 2), 2 queued in each. Kill once 4 streams are
    // live and both workers decode 2, with no stream ending in between: exactly 2 started streams are on it.
    let busyOnKilled = -1;
    let killedAt = 0;
    await waitFor(
      "four live streams, two on each worker",
      async () => {
        if (started - ended !== 4) return false;
        const endedBefore = ended;
        const busy = await Promise.all(workers.map(busySequences));
        if (busy.join() !== "2,2" || ended !== endedBefore || started - ended !== 4) return false;
        busyOnKilled = busy[0] ?? -1;
        killedAt = Date.now();
        killed.child.kill("SIGKILL");
        return true;
      },
      60_000,
    );
    const results = await Promise.all(outcomes);
    const startedBefore = results.filter((r) => r.firstChunkAt !== undefined && r.firstChunkAt < killedAt);
    const failed = results.filter((r) => r.error !== undefined);
    console.log(
      `kill -9: ${results.length} streams, ${startedBefore.length} started before the kill, ${busyOnKilled} on the killed worker, ${failed.length} failed, finished in ${Date.now() - killedAt} ms`,
    );
    // On failure: each stream's start (ms from the kill), end and error, and the gateway's log.
    const summary = results
      .map((r) => {
        const started = r.firstChunkAt === undefined ? "never" : `${r.firstChunkAt - killedAt} ms`;
        return `started ${started}, finish ${r.finish}, error ${(r.error as Error | undefined)?.message}`;
      })
      .join("\n");
    const context = `${summary}\n${gateway.server.output()}`;
    expect(busyOnKilled).toBe(2);
    expect(failed, context).toHaveLength(busyOnKilled);
    for (const r of failed) {
      expect(r.error).toBeInstanceOf(APIError);
      expect(startedBefore).toContain(r);
    }
    for (const r of results.filter((x) => !startedBefore.includes(x))) {
      expect(r.error).toBeUndefined();
      expect(r.finish).not.toBeNull();
    }
    expect(await endpointStatus(gateway.server.url, ports[0] ?? 0)).toBe("ejected");
    expect(await chatOnce(100)).not.toBe("");
  });

  it("a worker restarted on the same port is used again", async () => {
    const old = workers[0] as ServerProcess;
    const restarted = await startWorker(ports[0] ?? 0, old.dataDir);
    replaced.push(old);
    workers[0] = restarted;
    const readmitted = await waitFor(
      "the restarted endpoint to be ok",
      async () => (await endpointStatus(gateway.server.url, ports[0] ?? 0)) === "ok",
      10_000,
    );
    console.log(`restart: endpoint ok ${readmitted} ms after the worker was healthy`);
    const before = await requestsServed(restarted);
    await Promise.all(Array.from({ length: 6 }, (_, i) => chatOnce(200 + i)));
    expect(await requestsServed(restarted)).toBeGreaterThan(before);
  });

  it("a stopped worker is routed around and comes back after SIGCONT", async () => {
    const stopped = workers[1] as ServerProcess;
    stopped.child.kill("SIGSTOP");
    try {
      const start = Date.now();
      const answered = Promise.all(
        Array.from(
          { length: 4 },
          async (_, i) => `${await chatOnce(300 + i)} after ${Date.now() - start} ms`,
        ),
      );
      // A stopped process still accepts connections: only the probe's time-out (500 ms here) can tell.
      const ejectedAfter = await waitFor(
        "the stopped endpoint to be ejected",
        async () => (await endpointStatus(gateway.server.url, ports[1] ?? 0)) === "ejected",
        3_000,
      );
      const finishes = await answered;
      const took = Date.now() - start;
      console.log(
        `SIGSTOP: ejected after ${ejectedAfter} ms; ${finishes.length} requests answered in ${took} ms: ${finishes.join(", ")}`,
      );
      expect(finishes.every((f) => !f.startsWith(" "))).toBe(true);
      // Well under the first-token time-out (60 s): no request waited for the stopped worker to time out.
      expect(took).toBeLessThan(30_000);
    } finally {
      stopped.child.kill("SIGCONT");
    }
    const back = await waitFor(
      "the continued endpoint to be ok",
      async () => (await endpointStatus(gateway.server.url, ports[1] ?? 0)) === "ok",
      40_000,
    );
    console.log(`SIGCONT: endpoint ok after ${back} ms`);
  });

  it("a client abort frees the worker's sequence within a second", async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      {
        model: FLEET_MODEL,
        messages: [{ role: "user", content: countPrompt(0) }],
        max_tokens: 400,
        // Greedy: a sampled answer can end within four chunks, and the abort would then free nothing.
        temperature: 0,
        stream: true,
      },
      { signal: controller.signal },
    );
    let chunks = 0;
    let finished = false;
    try {
      for await (const chunk of stream) {
        finished ||= chunk.choices[0]?.finish_reason != null;
        if (++chunks === 4) break;
      }
    } finally {
      controller.abort();
    }
    expect(finished).toBe(false);
    const freed = await waitFor(
      "no busy sequence on either worker",
      async () => (await Promise.all(workers.map(busySequences))).every((n) => n === 0),
      1_000,
    );
    console.log(`abort: busy sequences 0 after ${freed} ms`);
  });

  it("both workers down: fast 503 engine_overloaded with retry-after; /health names what is down", async () => {
    for (const w of workers) w.child.kill("SIGKILL");
    const times: number[] = [];
    for (let i = 0; i < 4; i++) {
      const start = Date.now();
      const err = await client.chat.completions
        .create({ model: FLEET_MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })
        .catch((e: unknown) => e);
      times.push(Date.now() - start);
      expect(err).toBeInstanceOf(APIError);
      expect((err as APIError).status).toBe(503);
      expect((err as APIError).code).toBe("engine_overloaded");
      expect(Number((err as APIError).headers?.get("retry-after"))).toBeGreaterThan(0);
    }
    console.log(`both down: 503s in ${times.join(", ")} ms`);
    expect(Math.max(...times)).toBeLessThan(3_000);
    const { status, body } = await health(gateway.server.url);
    expect(status).toBe(503);
    const model = body.models.find((m) => m.id === FLEET_MODEL);
    expect(model?.status).toMatch(/no healthy endpoint/);
    expect(model?.endpoints?.map((e) => e.status)).toEqual(["ejected", "ejected"]);
    for (const port of ports) expect(JSON.stringify(body)).toContain(`127.0.0.1:${port}`);
  });
});
