// The fake engine keeps the Engine port's contract: errors, queue bounds, aborts, usage as the last event.
import { describe, expect, it } from "vitest";
import {
  ContextOverflowError,
  EngineNotReadyError,
  QueueFullError,
  QueueTimeoutError,
  RequestAbortedError,
  TooManyChoicesError,
  UnknownModelError,
} from "../../src/engine/errors.js";
import { generate } from "../../src/engine/generate.js";
import type { Generation, GenerationEvent, GenerationRequest } from "../../src/engine/types.js";
import {
  callTool,
  DEFAULT_REPLY,
  FAKE_MODEL,
  FakeEngine,
  fail,
  fakePromptTokens,
  fakeTokenCount,
  fakeTokenize,
  finish,
  gate,
  pause,
  say,
  think,
  waitFor,
} from "./fake-engine.js";
import { generationRequest } from "./generation-request.js";

function request(overrides: Partial<GenerationRequest> = {}): GenerationRequest {
  return generationRequest(FAKE_MODEL, overrides);
}

async function collect(generation: Generation): Promise<GenerationEvent[]> {
  const events: GenerationEvent[] = [];
  for await (const event of generation.events) events.push(event);
  return events;
}

const text = (events: GenerationEvent[], choice = 0) =>
  events.map((e) => (e.type === "delta" && e.choice === choice ? e.text : "")).join("");

/** Lets the engine's bookkeeping after a stream's end (sequences released) run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 1));

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (err: unknown) => err,
  );
}

describe("fake tokenizer", () => {
  it("counts words and punctuation marks, whitespace included in the next token", () => {
    expect(fakeTokenize("Hello, world!")).toEqual(["Hello", ",", " world", "!"]);
    expect(fakeTokenCount("")).toBe(0);
    expect(fakeTokenCount(DEFAULT_REPLY)).toBe(6);
    expect(fakePromptTokens({ messages: [{ role: "user", content: "Say hello." }] })).toBe(2 + 3 + 3);
  });
});

describe("FakeEngine.prepare", () => {
  it("counts the prompt and the budget without queueing anything", async () => {
    const engine = new FakeEngine();
    const prepared = await engine.prepare(request());
    expect(prepared.promptTokens).toBe(8);
    expect(prepared.maxTokensPerChoice).toBe(16);
    expect(
      (await engine.prepare(request({ sampling: { ...request().sampling, maxTokens: undefined } })))
        .maxTokensPerChoice,
    ).toBe(2048 - 8);
    expect(engine.modelLoad()).toEqual([{ model: FAKE_MODEL, parallel: 4, busySequences: 0, queueDepth: 0 }]);
    expect(engine.requests).toHaveLength(2);
  });

  it("refuses with the engine's own errors", async () => {
    const engine = new FakeEngine({ models: [{ id: "small", contextSize: 20, parallel: 2 }] });
    const small = (overrides: Partial<GenerationRequest>) => request({ model: "small", ...overrides });
    expect(await rejection(engine.prepare(request()))).toBeInstanceOf(UnknownModelError);
    expect(await rejection(engine.prepare(small({ n: 3 })))).toBeInstanceOf(TooManyChoicesError);
    const overflow = await rejection(engine.prepare(small({})));
    expect(overflow).toBeInstanceOf(ContextOverflowError);
    expect(overflow).toMatchObject({ contextSize: 20, promptTokens: 8, maxTokens: 16 });
    const long = small({ messages: [{ role: "user", content: "word ".repeat(30) }] });
    expect(
      await rejection(engine.prepare({ ...long, sampling: { ...long.sampling, maxTokens: undefined } })),
    ).toBeInstanceOf(ContextOverflowError);
    engine.setReady(false);
    expect(
      await rejection(engine.prepare(small({ sampling: { ...request().sampling, maxTokens: 2 } }))),
    ).toBeInstanceOf(EngineNotReadyError);
    expect(engine.modelLoad()).toEqual([]);
  });

  it("throws a scripted prepare or enqueue error, once", async () => {
    const engine = new FakeEngine();
    const refused = new Error("scripted");
    engine.replyOnce({ prepareError: refused }, { enqueueError: new QueueFullError(FAKE_MODEL) });
    expect(await rejection(engine.prepare(request()))).toBe(refused);
    expect(await rejection(generate(engine, request()))).toBeInstanceOf(QueueFullError);
    expect(text(await collect(await generate(engine, request())))).toBe(DEFAULT_REPLY);
  });

  it("takes back only requests it prepared", async () => {
    const engine = new FakeEngine();
    const foreign = { request: request(), promptTokens: 1, maxTokensPerChoice: 1 };
    expect(await rejection(engine.enqueue(foreign))).toBeInstanceOf(TypeError);
  });
});

describe("scripted generations", () => {
  it("plays the default reply one token per delta, then stop and usage", async () => {
    const engine = new FakeEngine();
    const generation = await generate(engine, request());
    const events = await collect(generation);
    expect(text(events)).toBe(DEFAULT_REPLY);
    expect(events.filter((e) => e.type === "delta")).toHaveLength(6);
    expect(events.at(-2)).toEqual({ type: "finish", choice: 0, reason: "stop" });
    expect(events.at(-1)).toEqual({
      type: "usage",
      usage: { promptTokens: 8, completionTokens: 6, cachedTokens: 0 },
    });
    expect(generation.promptTokens).toBe(8);
  });

  it("routes reasoning and tool calls to their targets and counts reasoning tokens", async () => {
    const engine = new FakeEngine({
      reply: {
        steps: [
          ...think("Let me see."),
          ...callTool(0, "get_weather", '{"city":"Paris"}'),
          finish("tool_calls"),
        ],
      },
    });
    const events = await collect(
      await generate(engine, request({ sampling: { ...request().sampling, maxTokens: 100 } })),
    );
    const deltas = events.filter((e) => e.type === "delta");
    expect(deltas.slice(0, 4).every((e) => e.target?.kind === "reasoning")).toBe(true);
    expect(deltas[4]).toEqual({
      type: "delta",
      choice: 0,
      text: "",
      target: { kind: "tool_call", call: 0, name: "get_weather" },
    });
    const args = deltas
      .slice(5)
      .map((e) => e.text)
      .join("");
    expect(args).toBe('{"city":"Paris"}');
    expect(events.at(-2)).toEqual({ type: "finish", choice: 0, reason: "tool_calls" });
    expect(events.at(-1)).toMatchObject({
      usage: { completionTokens: deltas.length, reasoningTokens: 4 },
    });
  });

  it("plays every choice of n, stops each at max_tokens with length, and takes usage overrides", async () => {
    const engine = new FakeEngine({
      reply: { steps: say("one two three four five"), usage: { cachedTokens: 3 } },
    });
    const events = await collect(
      await generate(engine, request({ n: 2, sampling: { ...request().sampling, maxTokens: 3 } })),
    );
    expect(text(events, 0)).toBe("one two three");
    expect(text(events, 1)).toBe("one two three");
    expect(events.filter((e) => e.type === "finish")).toEqual([
      { type: "finish", choice: 0, reason: "length" },
      { type: "finish", choice: 1, reason: "length" },
    ]);
    expect(events.at(-1)).toEqual({
      type: "usage",
      usage: { promptTokens: 8, completionTokens: 6, cachedTokens: 3 },
    });
  });

  it("fails the stream mid-generation without a usage event", async () => {
    const engine = new FakeEngine({
      reply: { steps: [...say("partial").slice(0, 1), fail(new Error("boom"))] },
    });
    const generation = await generate(engine, request());
    const seen: GenerationEvent[] = [];
    const error = await rejection(
      (async () => {
        for await (const event of generation.events) seen.push(event);
      })(),
    );
    expect((error as Error).message).toBe("boom");
    expect(seen).toEqual([{ type: "delta", choice: 0, text: "partial" }]);
    await settle();
    expect(engine.modelLoad()[0]?.busySequences).toBe(0);
  });

  it("lets observers see every event whether or not anyone reads", async () => {
    const engine = new FakeEngine({ reply: { steps: [pause(5), ...say("a b")] } });
    const generation = await generate(engine, request());
    const observed = await new Promise<GenerationEvent[]>((resolve) => {
      const events: GenerationEvent[] = [];
      generation.events.observe({ value: (e) => events.push(e), end: () => resolve(events) });
    });
    expect(observed.map((e) => e.type)).toEqual(["delta", "delta", "finish", "usage"]);
  });
});

describe("queue and aborts", () => {
  const holding = (held: { opened: Promise<void> }) => ({
    steps: [...say("held").slice(0, 1), waitFor(held.opened)],
  });

  it("queues beyond parallel, refuses beyond maxQueue and admits in order as sequences free", async () => {
    const engine = new FakeEngine({ models: [{ id: FAKE_MODEL, parallel: 1, maxQueue: 1 }] });
    const held = gate();
    engine.replyOnce(holding(held));
    const first = await generate(engine, request());
    const second = generate(engine, request());
    await new Promise((r) => setTimeout(r, 5));
    expect(engine.modelLoad()[0]).toMatchObject({ busySequences: 1, queueDepth: 1 });
    expect(await rejection(generate(engine, request()))).toBeInstanceOf(QueueFullError);
    held.open();
    expect(text(await collect(first))).toBe("held");
    expect(text(await collect(await second))).toBe(DEFAULT_REPLY);
    await settle();
    expect(engine.modelLoad()[0]).toMatchObject({ busySequences: 0, queueDepth: 0 });
  });

  it("refuses after queueTimeoutMs and when the caller aborts while queued", async () => {
    const engine = new FakeEngine({ models: [{ id: FAKE_MODEL, parallel: 1, queueTimeoutMs: 30 }] });
    const held = gate();
    engine.replyOnce(holding(held));
    const first = await generate(engine, request());
    expect(await rejection(generate(engine, request()))).toBeInstanceOf(QueueTimeoutError);

    const controller = new AbortController();
    const queued = generate(engine, request({ signal: controller.signal }));
    await new Promise((r) => setTimeout(r, 5));
    controller.abort();
    expect(await rejection(queued)).toBeInstanceOf(RequestAbortedError);
    expect(engine.modelLoad()[0]?.queueDepth).toBe(0);

    const already = new AbortController();
    already.abort();
    expect(await rejection(generate(engine, request({ signal: already.signal })))).toBeInstanceOf(
      RequestAbortedError,
    );
    held.open();
    await collect(first);
  });

  it("stops a running generation on abort and reports the tokens generated so far", async () => {
    const engine = new FakeEngine();
    const held = gate();
    engine.replyOnce({ steps: [...say("two tokens").slice(0, 2), waitFor(held.opened), ...say("never")] });
    const controller = new AbortController();
    const generation = await generate(engine, request({ signal: controller.signal }));
    const events: GenerationEvent[] = [];
    const reading = (async () => {
      for await (const event of generation.events) {
        events.push(event);
        if (events.length === 2) controller.abort();
      }
    })();
    await reading;
    expect(events).toEqual([
      { type: "delta", choice: 0, text: "two" },
      { type: "delta", choice: 0, text: " tokens" },
      { type: "usage", usage: { promptTokens: 8, completionTokens: 2, cachedTokens: 0 } },
    ]);
    await settle();
    expect(engine.modelLoad()[0]?.busySequences).toBe(0);
  });

  it("drains running requests and refuses queued and new ones on dispose", async () => {
    const engine = new FakeEngine({ models: [{ id: FAKE_MODEL, parallel: 1 }], stepDelayMs: 1 });
    const running = await generate(engine, request());
    const queued = rejection(generate(engine, request()));
    await new Promise((r) => setTimeout(r, 1));
    expect(engine.modelLoad()[0]?.queueDepth).toBe(1);
    await engine.dispose();
    expect(await queued).toBeInstanceOf(QueueFullError);
    expect(text(await collect(running))).toBe(DEFAULT_REPLY);
    expect(engine.isReady()).toBe(false);
  });
});
