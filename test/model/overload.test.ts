// Overload against a real `hearth serve` through the official client: a flood gets 200 or 503 (never another 5xx),
// queue timeouts, clients that leave while queued, and a queue shared fairly between organizations.
import type OpenAI from "openai";
import { APIError, APIUserAbortError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createKeyWithCli,
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
/** Greedy SmolLM2 never ends this one before 1500 tokens: it holds a sequence until the client leaves. */
const HOLD_PROMPT = "Write the numbers from one to five hundred in words, separated by commas.";

/** One sample of the server's /metrics (0 when the series is absent), e.g. hearth_queue_depth{model="…"}. */
async function metric(
  server: ServerProcess,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)/.exec(line);
    if (match?.[1] !== name) continue;
    const body = match[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => body.includes(`${k}="${v}"`))) return Number(match[3]);
  }
  return 0;
}

async function until(what: string, condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const queueDepth = (server: ServerProcess) => metric(server, "hearth_queue_depth", { model: MODEL });
const busySequences = (server: ServerProcess) => metric(server, "hearth_busy_sequences", { model: MODEL });

/** A streamed request that would generate for long: resolves with the stream once admitted (the 200). */
function holdingRequest(client: OpenAI, signal: AbortSignal) {
  return client.chat.completions.create(
    {
      model: MODEL,
      messages: [{ role: "user", content: HOLD_PROMPT }],
      max_tokens: 1500,
      temperature: 0,
      stream: true,
    },
    { signal },
  );
}

/** A streamed request that holds a sequence: resolves once admitted (the 200), ends when `leave()` is called. */
async function hold(client: OpenAI): Promise<{ leave: () => Promise<void> }> {
  const controller = new AbortController();
  const stream = await holdingRequest(client, controller.signal);
  const reading = (async () => {
    for await (const _ of stream) {
      // Read, so the server is never held up by a full socket.
    }
  })().catch((err: unknown) => {
    if (!(err instanceof APIUserAbortError)) throw err;
  });
  return {
    leave: async () => {
      controller.abort();
      await reading;
    },
  };
}

interface Outcome {
  status: number | undefined;
  /** Accepted: every choice's finish_reason. */
  reasons: (string | null)[];
  error?: APIError;
}

/**
 * One short request, streamed or not; an APIError becomes an outcome, anything else fails the test.
 * `onAdmitted` runs when a streamed request's 200 arrives, which the server sends once the request left the queue.
 */
async function attempt(
  client: OpenAI,
  content: string,
  stream: boolean,
  onAdmitted?: () => void,
): Promise<Outcome> {
  const body = { model: MODEL, messages: [{ role: "user" as const, content }], max_tokens: 8 };
  try {
    if (!stream) {
      const completion = await client.chat.completions.create(body);
      return { status: 200, reasons: completion.choices.map((c) => c.finish_reason) };
    }
    const chunks = await client.chat.completions.create({ ...body, stream: true });
    onAdmitted?.();
    const reasons: (string | null)[] = [];
    for await (const chunk of chunks) {
      for (const choice of chunk.choices)
        if (choice.finish_reason !== null) reasons.push(choice.finish_reason);
    }
    return { status: 200, reasons };
  } catch (err) {
    if (err instanceof APIError) return { status: err.status, reasons: [], error: err };
    throw err;
  }
}

/** The 503 every refusal for load must be: OpenAI's error body, code engine_overloaded, a retry-after. */
function expectOverloaded(outcome: Outcome, message?: RegExp): void {
  expect(outcome.status).toBe(503);
  const err = outcome.error as APIError;
  expect(err.code).toBe("engine_overloaded");
  expect(err.type).toBe("server_error");
  expect(err.error).toMatchObject({ message: expect.any(String), param: null });
  if (message !== undefined) expect((err.error as { message: string }).message).toMatch(message);
  expect(err.headers?.get("retry-after")).toMatch(/^[1-9]\d*$/);
}

describe("a server with 2 sequences and 2 queue places", () => {
  let server: ServerProcess;

  beforeAll(async () => {
    // Queued requests wait for others to generate; on a loaded test machine that can take longer than the
    // default 30 s queue timeout, which these tests do not look at.
    server = await startServerProcess({
      args: ["--parallel", "2", "--max-queue", "2"],
      env: { HEARTH_QUEUE_TIMEOUT_MS: "300000" },
    });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("answers a flood of 24 requests with 200 or 503 engine_overloaded; every accepted one finishes", async () => {
    const client = openaiClient(server);
    const outcomes = await Promise.all(
      Array.from({ length: 24 }, (_, i) => attempt(client, `Say the number ${i}.`, i % 2 === 0)),
    );
    for (const outcome of outcomes) expect([200, 503]).toContain(outcome.status);
    const accepted = outcomes.filter((o) => o.status === 200);
    const refused = outcomes.filter((o) => o.status === 503);
    // Two sequences and the whole queue (2 places: nobody else waits) are taken before any refusal.
    expect(accepted.length).toBeGreaterThanOrEqual(4);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const outcome of accepted) {
      expect(outcome.reasons).toHaveLength(1);
      expect(["stop", "length"]).toContain(outcome.reasons[0]);
    }
    for (const outcome of refused) expectOverloaded(outcome);
    expect(await metric(server, "hearth_overloaded_total")).toBe(refused.length);
    expect(await metric(server, "hearth_requests_total", { model: MODEL, status: "503" })).toBe(
      refused.length,
    );
    await until("the flood has drained", async () => (await busySequences(server)) === 0);
    expect(await queueDepth(server)).toBe(0);
  });

  it("drops a request whose client leaves while it is queued, using no sequence", async () => {
    const client = openaiClient(server);
    const holders = [await hold(client), await hold(client)];
    expect(await busySequences(server)).toBe(2);
    const promptTokensBefore = await metric(server, "hearth_prompt_tokens_total", { model: MODEL });
    const leaving = new AbortController();
    const queued = client.chat.completions
      .create(
        { model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 },
        { signal: leaving.signal },
      )
      .then(
        () => "answered",
        (err: unknown) => (err instanceof APIUserAbortError ? "left" : err),
      );
    await until("the request is queued", async () => (await queueDepth(server)) === 1);
    leaving.abort();
    expect(await queued).toBe("left");
    await until("the queue is empty again", async () => (await queueDepth(server)) === 0);
    await until("the server answered the request that left", async () => {
      return (await metric(server, "hearth_requests_total", { model: MODEL, status: "499" })) === 1;
    });
    // Never admitted: no sequence, no tokens accounted (the holders are still generating).
    expect(await busySequences(server)).toBe(2);
    expect(await metric(server, "hearth_prompt_tokens_total", { model: MODEL })).toBe(promptTokensBefore);
    for (const h of holders) await h.leave();
    await until("the holders' sequences are free", async () => (await busySequences(server)) === 0);
  });

  it("lets one organization fill the queue, and gives its newest waiting place to another organization that comes", async () => {
    await hearthCli(server, ["orgs", "create", "beta", "--models", MODEL]);
    const alpha = openaiClient(server);
    const beta = openaiClient(server, await createKeyWithCli(server, "beta"));

    // Admissions (streamed 200s) and refusals, in the order they happen.
    const order: string[] = [];
    const send = (name: string, client: OpenAI, content: string) =>
      attempt(client, content, true, () => order.push(name)).then((o) => {
        if (o.status !== 200) order.push(`${name}:${o.status}`);
        return o;
      });
    const holders = [await hold(alpha), await hold(alpha)];
    const a1 = send("a1", alpha, "Say one.");
    await until("a1 is queued", async () => (await queueDepth(server)) === 1);
    // Nobody else waits: the default organization may take the last place too.
    const a2 = send("a2", alpha, "Say two.");
    await until("a2 is queued", async () => (await queueDepth(server)) === 2);
    // beta arrives at the full queue: alpha's newest waiting request is refused (it never got a 200)...
    const b1 = send("b1", beta, "Say three.");
    expectOverloaded(await a2);
    // ...and beta has its place.
    await until("b1 is queued", async () => (await queueDepth(server)) === 2);
    // A sequence frees: alpha still holds the other one, its share of two while beta waits, so b1 goes first
    // although a1 queued earlier; a1 follows when b1 ends.
    await holders[0]?.leave();
    expect((await a1).status).toBe(200);
    const a3 = send("a3", alpha, "Say four.");
    await holders[1]?.leave();
    for (const outcome of await Promise.all([b1, a3])) expect(outcome.reasons).toHaveLength(1);
    expect(order).toEqual(["a2:503", "b1", "a1", "a3"]);
  });
});

describe("a server with 2 sequences and 4 queue places", () => {
  let server: ServerProcess;

  beforeAll(async () => {
    server = await startServerProcess({ args: ["--parallel", "2", "--max-queue", "4"] });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("admits 6 of a burst of 30 from one organization (2 running, 4 waiting) and refuses 24 at once", async () => {
    const client = openaiClient(server);
    const leaving = Array.from({ length: 30 }, () => new AbortController());
    let refused = 0;
    const outcomes = leaving.map((controller) =>
      holdingRequest(client, controller.signal)
        .then(
          async (stream) => {
            // Admitted: read until this test leaves.
            for await (const _ of stream) {
              // Read, so the server is never held up by a full socket.
            }
            return "admitted" as const;
          },
          (err: unknown) => {
            if (err instanceof APIError && err.status === 503) {
              refused++;
              expectOverloaded({ status: 503, reasons: [], error: err });
              return "refused" as const;
            }
            if (err instanceof APIUserAbortError) return "left while queued" as const;
            throw err;
          },
        )
        .catch((err: unknown) => {
          if (err instanceof APIUserAbortError) return "admitted" as const;
          throw err;
        }),
    );
    await until("24 are refused", async () => refused >= 24);
    await until("2 run and 4 wait", async () => {
      return (await busySequences(server)) === 2 && (await queueDepth(server)) === 4;
    });
    for (const controller of leaving) controller.abort();
    const counts = new Map<string, number>();
    for (const outcome of await Promise.all(outcomes)) counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
    expect(counts.get("refused")).toBe(24);
    expect((counts.get("admitted") ?? 0) + (counts.get("left while queued") ?? 0)).toBe(6);
    await until("every sequence is free", async () => (await busySequences(server)) === 0);
    expect(await queueDepth(server)).toBe(0);
  });
});

describe("a server with a 100 ms queue timeout", () => {
  let server: ServerProcess;

  beforeAll(async () => {
    server = await startServerProcess({
      args: ["--parallel", "1", "--max-queue", "2"],
      env: { HEARTH_QUEUE_TIMEOUT_MS: "100" },
    });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("answers 503 to a request that waited longer, streamed or not, without generating it", async () => {
    const client = openaiClient(server);
    const holder = await hold(client);
    const promptTokensBefore = await metric(server, "hearth_prompt_tokens_total", { model: MODEL });
    for (const stream of [false, true]) {
      expectOverloaded(await attempt(client, "Hello", stream), /waited 100 ms/);
    }
    expect(await queueDepth(server)).toBe(0);
    expect(await busySequences(server)).toBe(1);
    expect(await metric(server, "hearth_overloaded_total")).toBe(2);
    expect(await metric(server, "hearth_prompt_tokens_total", { model: MODEL })).toBe(promptTokensBefore);
    await holder.leave();
  });
});
