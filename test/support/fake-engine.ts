// An Engine for tests and the bench without the model: scripted replies, a bounded queue, deterministic tokens.
import { setTimeout as sleep } from "node:timers/promises";
import { Channel, MAX_BACKLOG } from "../../src/engine/channel.js";
import {
  ContextOverflowError,
  EngineNotReadyError,
  QueueFullError,
  QueueTimeoutError,
  RequestAbortedError,
  TooManyChoicesError,
  UnknownModelError,
} from "../../src/engine/errors.js";
import type {
  DeltaTarget,
  Engine,
  FinishReason,
  Generation,
  GenerationEvent,
  GenerationRequest,
  ModelHealth,
  ModelInfo,
  ModelLoad,
  PreparedRequest,
  PromptCount,
  UsageCounts,
} from "../../src/engine/types.js";

/** One model of the fake engine; the defaults are small so queue paths are easy to reach. */
export interface FakeModelOptions {
  id: string;
  contextSize?: number;
  /** Sequences: requests (n choices each) generating at once. */
  parallel?: number;
  /** Requests waiting for sequences before `enqueue` refuses with QueueFullError. */
  maxQueue?: number;
  queueTimeoutMs?: number;
}

/**
 * One step of a scripted reply. Deltas and finishes without `choice` apply to every choice of the request.
 * `delay` and `wait` end early when the request's signal aborts.
 */
export type FakeStep =
  | { type: "delta"; text: string; target?: DeltaTarget; choice?: number; tokens?: number }
  | { type: "finish"; reason: FinishReason; choice?: number; invalid?: string }
  | { type: "delay"; ms: number }
  | { type: "wait"; until: Promise<unknown> }
  | { type: "fail"; error: Error };

export interface FakeReply {
  /** Default: `say(DEFAULT_REPLY)`. Choices not finished by the script finish with "stop" at its end. */
  steps?: FakeStep[];
  /** Replaces fields of the counted usage (e.g. cachedTokens, or a deliberately wrong count). */
  usage?: Partial<UsageCounts>;
  /** Thrown by `prepare` (a 400-class refusal). */
  prepareError?: Error;
  /** Thrown by `enqueue` instead of queueing (a 503-class refusal). */
  enqueueError?: Error;
}

export type FakeScript = FakeReply | ((request: GenerationRequest) => FakeReply);

export interface FakeEngineOptions {
  /** Default: one model, FAKE_MODEL. */
  models?: FakeModelOptions[];
  /** What every request gets unless `replyOnce` queued something (default: `say(DEFAULT_REPLY)`). */
  reply?: FakeScript;
  /** Default true; false mimics models still loading (`setReady` flips it). */
  ready?: boolean;
  /** Pause before every delta, for latency metrics and interleaving (default 0: one macrotask). */
  stepDelayMs?: number;
}

export const FAKE_MODEL = "fake-model";
export const DEFAULT_REPLY = "Hello from the fake engine.";

// A word, or one punctuation mark, with the whitespace before it: one token each.
const TOKEN = /\s*(?:[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_])|\s+$/gu;

/** The fake tokenizer: every word and every punctuation mark is one token (leading whitespace included). */
export function fakeTokenize(text: string): string[] {
  return text.match(TOKEN) ?? [];
}

export function fakeTokenCount(text: string): number {
  return fakeTokenize(text).length;
}

/** Prompt tokens of a request: per message its role, its content and two framing tokens; two to start the reply. */
export function fakePromptTokens(request: Pick<GenerationRequest, "messages">): number {
  let tokens = 2;
  for (const m of request.messages) tokens += 3 + fakeTokenCount(m.content);
  return tokens;
}

/** Content deltas, one token each, then finish "stop". */
export function say(text: string, reason: FinishReason = "stop"): FakeStep[] {
  return [...deltas(text), { type: "finish", reason }];
}

/** Reasoning deltas, one token each (no finish: content or a tool call follows). */
export function think(text: string): FakeStep[] {
  return deltas(text, { kind: "reasoning" });
}

/** A tool call: the name in an empty first fragment, then the arguments one token each (no finish). */
export function callTool(call: number, name: string, args: string): FakeStep[] {
  return [
    { type: "delta", text: "", target: { kind: "tool_call", call, name }, tokens: 1 },
    ...deltas(args, { kind: "tool_call", call }),
  ];
}

export function finish(reason: FinishReason, choice?: number): FakeStep {
  return choice === undefined ? { type: "finish", reason } : { type: "finish", reason, choice };
}

export function pause(ms: number): FakeStep {
  return { type: "delay", ms };
}

export function waitFor(until: Promise<unknown>): FakeStep {
  return { type: "wait", until };
}

export function fail(error: Error): FakeStep {
  return { type: "fail", error };
}

function deltas(text: string, target?: DeltaTarget): FakeStep[] {
  return fakeTokenize(text).map((piece) =>
    target === undefined
      ? { type: "delta", text: piece, tokens: 1 }
      : { type: "delta", text: piece, target, tokens: 1 },
  );
}

/** A promise a test opens when it wants a held generation to go on (`waitFor(gate.opened)`). */
export interface Gate {
  readonly opened: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

class FakePreparedRequest implements PreparedRequest {
  constructor(
    readonly request: GenerationRequest,
    readonly promptTokens: number,
    readonly maxTokensPerChoice: number,
    readonly reply: FakeReply,
  ) {}
}

interface Job {
  prepared: FakePreparedRequest;
  resolve(generation: Generation): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout | undefined;
  onAbort: (() => void) | undefined;
}

interface FakeModel {
  config: Required<FakeModelOptions>;
  busy: number;
  queue: Job[];
  running: Set<Promise<void>>;
}

export class FakeEngine implements Engine {
  private healthOverride: ModelHealth[] | undefined;
  /** Every request `prepare` accepted, in order: what the service asked for (seed, cacheScope, output…). */
  readonly requests: GenerationRequest[] = [];
  /** Tokens generated so far, every request together (a paused generation stops adding to it). */
  tokensGenerated = 0;
  private readonly models: Map<string, FakeModel>;
  private readonly once: FakeScript[] = [];
  private script: FakeScript;
  private ready: boolean;
  private stopping = false;
  private readonly stepDelayMs: number;

  constructor(options: FakeEngineOptions = {}) {
    const models = options.models ?? [{ id: FAKE_MODEL }];
    this.models = new Map(
      models.map((m) => [
        m.id,
        {
          config: {
            id: m.id,
            contextSize: m.contextSize ?? 2048,
            parallel: m.parallel ?? 4,
            maxQueue: m.maxQueue ?? 16,
            queueTimeoutMs: m.queueTimeoutMs ?? 30_000,
          },
          busy: 0,
          queue: [],
          running: new Set(),
        },
      ]),
    );
    this.script = options.reply ?? {};
    this.ready = options.ready ?? true;
    this.stepDelayMs = options.stepDelayMs ?? 0;
  }

  /** Replaces the reply every later request gets. */
  reply(script: FakeScript): void {
    this.script = script;
  }

  /**
   * Replies for the next requests, one each in `prepare` order (every prepare past the ready check takes one),
   * before the default reply applies again.
   */
  replyOnce(...scripts: FakeScript[]): void {
    this.once.push(...scripts);
  }

  setReady(ready: boolean): void {
    this.ready = ready;
  }

  listModels(): ModelInfo[] {
    return [...this.models.values()].map((m) => ({
      id: m.config.id,
      contextSize: m.config.contextSize,
      created: 0,
    }));
  }

  isReady(): boolean {
    return this.ready;
  }

  /** Reports `health` instead of the models' own (an upstream fleet's endpoints, for pages and /health). */
  setHealth(health: ModelHealth[] | undefined): void {
    this.healthOverride = health;
  }

  health(): ModelHealth[] {
    if (this.healthOverride !== undefined) return this.healthOverride;
    return this.listModels().map((m) =>
      this.ready ? { model: m.id, ready: true } : { model: m.id, ready: false, detail: "loading" },
    );
  }

  async prepare(request: GenerationRequest): Promise<PreparedRequest> {
    if (!this.ready) throw new EngineNotReadyError(request.model);
    const model = this.model(request.model);
    const { parallel, contextSize } = model.config;
    const script = this.once.shift() ?? this.script;
    const reply = typeof script === "function" ? script(request) : script;
    if (reply.prepareError !== undefined) throw reply.prepareError;
    if (request.n > parallel) throw new TooManyChoicesError(request.n, parallel);
    const prompt = fakePromptTokens(request);
    const maxTokens = request.sampling.maxTokens ?? contextSize - prompt;
    if (prompt + maxTokens > contextSize || maxTokens < 1) {
      throw new ContextOverflowError(contextSize, prompt, request.sampling.maxTokens);
    }
    this.requests.push(request);
    return new FakePreparedRequest(request, prompt, maxTokens, reply);
  }

  async countPromptTokens(request: GenerationRequest): Promise<PromptCount> {
    if (!this.ready) throw new EngineNotReadyError(request.model);
    this.model(request.model);
    return { tokens: fakePromptTokens(request), exact: true };
  }

  async enqueue(prepared: PreparedRequest): Promise<Generation> {
    if (!(prepared instanceof FakePreparedRequest)) {
      throw new TypeError("FakeEngine.enqueue takes only requests it prepared itself");
    }
    const { request, reply } = prepared;
    const model = this.model(request.model);
    if (reply.enqueueError !== undefined) throw reply.enqueueError;
    const signal = request.signal;
    if (signal?.aborted === true) throw new RequestAbortedError(request.model);
    if (this.stopping) throw new QueueFullError(request.model);
    const canStart = model.queue.length === 0 && model.busy + request.n <= model.config.parallel;
    if (!canStart && model.queue.length >= model.config.maxQueue) throw new QueueFullError(request.model);
    return new Promise<Generation>((resolve, reject) => {
      const job: Job = { prepared, resolve, reject, timer: undefined, onAbort: undefined };
      if (canStart) {
        this.start(model, job);
        return;
      }
      model.queue.push(job);
      const timeoutMs = model.config.queueTimeoutMs;
      job.timer = setTimeout(
        () => this.drop(model, job, new QueueTimeoutError(request.model, timeoutMs)),
        timeoutMs,
      );
      if (signal !== undefined) {
        job.onAbort = () => this.drop(model, job, new RequestAbortedError(request.model));
        signal.addEventListener("abort", job.onAbort, { once: true });
      }
    });
  }

  modelLoad(): ModelLoad[] {
    if (!this.ready) return [];
    return [...this.models.values()].map((m) => ({
      model: m.config.id,
      parallel: m.config.parallel,
      busySequences: m.busy,
      queueDepth: m.queue.length,
    }));
  }

  /** Stops admitting (QueueFullError, like the real engine draining) and waits for running generations. */
  async drain(): Promise<void> {
    this.stopping = true;
    for (const model of this.models.values()) {
      while (model.queue.length > 0 || model.running.size > 0) {
        await Promise.allSettled([...model.running]);
        if (model.queue.length > 0) await sleep(5);
      }
    }
  }

  async dispose(): Promise<void> {
    this.stopping = true;
    this.ready = false;
    for (const model of this.models.values()) {
      for (const job of [...model.queue]) this.drop(model, job, new QueueFullError(model.config.id));
      await Promise.allSettled([...model.running]);
    }
  }

  private model(id: string): FakeModel {
    const model = this.models.get(id);
    if (model === undefined) throw new UnknownModelError(id);
    return model;
  }

  /** A queued job leaves the queue without starting: `enqueue` rejects, nothing was generated. */
  private drop(model: FakeModel, job: Job, error: Error): void {
    const at = model.queue.indexOf(job);
    if (at < 0) return;
    model.queue.splice(at, 1);
    this.forget(job);
    job.reject(error);
    this.admitQueued(model);
  }

  private forget(job: Job): void {
    clearTimeout(job.timer);
    if (job.onAbort !== undefined) job.prepared.request.signal?.removeEventListener("abort", job.onAbort);
  }

  /** FIFO: the oldest queued job starts once its n sequences are free. */
  private admitQueued(model: FakeModel): void {
    for (;;) {
      const head = model.queue[0];
      if (head === undefined || model.busy + head.prepared.request.n > model.config.parallel) return;
      model.queue.shift();
      this.forget(head);
      this.start(model, head);
    }
  }

  private start(model: FakeModel, job: Job): void {
    const { request, promptTokens } = job.prepared;
    model.busy += request.n;
    const events = new Channel<GenerationEvent>();
    const run = this.generate(job.prepared, events).finally(() => {
      model.busy -= request.n;
      model.running.delete(run);
      this.admitQueued(model);
    });
    model.running.add(run);
    job.resolve({ promptTokens, events });
  }

  /** Plays the script into the channel; the last event is usage, also after an abort (what was generated). */
  private async generate(prepared: FakePreparedRequest, events: Channel<GenerationEvent>): Promise<void> {
    try {
      await this.play(prepared, events);
    } catch (err) {
      // A `wait` step whose promise rejected: the stream fails like an engine error mid-generation.
      events.fail(err);
    }
  }

  private async play(prepared: FakePreparedRequest, events: Channel<GenerationEvent>): Promise<void> {
    const { request, reply, promptTokens, maxTokensPerChoice } = prepared;
    const signal = request.signal;
    const choices = Array.from({ length: request.n }, (_, i) => i);
    const generated = choices.map(() => 0);
    const finished = choices.map(() => false);
    let reasoningTokens = 0;
    const aborted = () => signal?.aborted === true;
    const push = (event: GenerationEvent) => events.push(event);

    for (const step of reply.steps ?? say(DEFAULT_REPLY)) {
      // Like the real engines: a generation whose reader has fallen behind pauses until it catches up.
      await events.drained(MAX_BACKLOG, signal);
      // Even a script without delays yields between steps, like a real decode loop.
      await (this.stepDelayMs > 0 && step.type === "delta"
        ? abortable(sleep(this.stepDelayMs), signal)
        : sleep(0));
      if (aborted()) break;
      switch (step.type) {
        case "delay":
          await abortable(sleep(step.ms), signal);
          break;
        case "wait":
          await abortable(step.until, signal);
          break;
        case "fail":
          events.fail(step.error);
          return;
        case "finish":
          for (const c of step.choice === undefined ? choices : [step.choice]) {
            if (finished[c] !== false) continue;
            finished[c] = true;
            push({ type: "finish", choice: c, reason: step.reason, ...invalid(step.invalid) });
          }
          break;
        case "delta": {
          const tokens = step.tokens ?? fakeTokenCount(step.text);
          for (const c of step.choice === undefined ? choices : [step.choice]) {
            if (finished[c] !== false) continue;
            push({
              type: "delta",
              choice: c,
              text: step.text,
              ...(step.target === undefined ? {} : { target: step.target }),
            });
            generated[c] = (generated[c] ?? 0) + tokens;
            this.tokensGenerated += tokens;
            if (step.target?.kind === "reasoning") reasoningTokens += tokens;
            if ((generated[c] ?? 0) >= maxTokensPerChoice) {
              finished[c] = true;
              push({ type: "finish", choice: c, reason: "length" });
            }
          }
          break;
        }
        default:
          step satisfies never;
      }
    }
    if (!aborted()) {
      for (const c of choices) {
        if (finished[c] === false) push({ type: "finish", choice: c, reason: "stop" });
      }
    }
    const usage: UsageCounts = {
      promptTokens,
      completionTokens: generated.reduce((a, b) => a + b, 0),
      cachedTokens: 0,
      ...(reasoningTokens > 0 ? { reasoningTokens } : {}),
      ...reply.usage,
    };
    push({ type: "usage", usage });
    events.close();
  }
}

function invalid(reason: string | undefined): { invalid?: string } {
  return reason === undefined ? {} : { invalid: reason };
}

/** Waits for `promise`, or less if the signal aborts first (never rejects). */
async function abortable(promise: Promise<unknown>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) {
    await promise;
    return;
  }
  if (signal.aborted) return;
  let onAbort = () => {};
  const aborted = new Promise<void>((resolve) => {
    onAbort = resolve;
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    await Promise.race([promise.then(() => undefined), aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}
