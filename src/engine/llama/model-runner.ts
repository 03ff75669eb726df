// One model on one llama.cpp context: the sequence pool, the fair bounded queue and the continuous-batching step loop.
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { TokenBias } from "node-llama-cpp";
import type { OutputPart } from "../../chat/output-parser.js";
import { type GenerationPlan, planGeneration, planPrompt } from "../../chat/output-plan.js";
import { StopMatcher } from "../../chat/stop-matcher.js";
import type { PromptRenderer, PromptSegment } from "../../chat/template.js";
import type { TemplateCapabilities } from "../../chat/tool-format.js";
import { Utf8TokenDecoder } from "../../chat/utf8.js";
import type { ModelConfig } from "../../config/schema.js";
import { Channel } from "../channel.js";
import {
  ContextOverflowError,
  QueueFullError,
  QueueTimeoutError,
  RequestAbortedError,
  TooManyChoicesError,
} from "../errors.js";
import { FairQueue } from "../fair-queue.js";
import type {
  FinishReason,
  Generation,
  GenerationEvent,
  GenerationRequest,
  ModelLoad,
  SamplingParams,
} from "../types.js";
import { type ChoiceOutput, OutputControl, type PreparedOutput } from "./output-control.js";
import { chooseSlots, type SlotChoice } from "./slot-choice.js";

type TokenGenerator = AsyncGenerator<Token, void, undefined | Token | Token[]>;

interface Slot {
  id: number;
  sequence: LlamaContextSequence;
  busy: boolean;
  scope: string | undefined;
}

interface Choice {
  index: number;
  slot: Slot;
  generator: TokenGenerator | undefined;
  /** Token to feed the generator at the next step (the one it last sampled). */
  pending: Token | undefined;
  generated: Token[];
  decoder: Utf8TokenDecoder;
  stop: StopMatcher;
  finished: boolean;
  /** Structured output / reasoning: the parser, grammar state and counts of this choice. */
  output: ChoiceOutput | undefined;
}

interface Job {
  request: GenerationRequest;
  prompt: Token[];
  maxTokens: number;
  output: PreparedOutput | undefined;
  channel: Channel<GenerationEvent>;
  state: "queued" | "prefill" | "decode" | "done";
  /** Settles `submit`: resolved when the job leaves the queue with its sequences, rejected when it never will. */
  admission: { resolve: (generation: Generation) => void; reject: (error: Error) => void };
  /** Queue timeout, while queued. */
  timer: NodeJS.Timeout | undefined;
  lease: SlotChoice | undefined;
  /** Next prompt index to prefill; the prompt's last token is evaluated by the generators. */
  prefillPos: number;
  choices: Choice[];
  cachedTokens: number;
  /** The primary sequence was trimmed to the reusable prefix. */
  prepared: boolean;
  cancelled: boolean;
  onAbort: (() => void) | undefined;
}

/** Counters the tests and the benchmark read: tokens per llama_decode is the batching proof. */
export interface RunnerStats {
  /** llama_decode calls and the tokens they carried, prompts included. */
  decodes: number;
  decodedTokens: number;
  steps: number;
  /** Steps that only generated (no prompt work): their token count and the decodes they took. */
  generationSteps: number;
  generationStepTokens: number;
  generationStepDecodes: number;
}

/** Priority order of the library's batch builder = ascending sequence id, so llama.cpp keeps one ubatch. */
const PRIORITY_BASE = 1_000_000;

export interface ModelRunnerOptions {
  config: ModelConfig;
  model: LlamaModel;
  context: LlamaContext;
  renderer: PromptRenderer;
  /** What the model's chat template can do (tools, thinking): decides prompted vs native formats. */
  capabilities: TemplateCapabilities;
}

export class ModelRunner {
  readonly stats: RunnerStats = {
    decodes: 0,
    decodedTokens: 0,
    steps: 0,
    generationSteps: 0,
    generationStepTokens: 0,
    generationStepDecodes: 0,
  };
  private readonly slots: Slot[];
  private readonly queue: FairQueue<Job>;
  private readonly active: Job[] = [];
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private stopping = false;
  private readonly config: ModelConfig;
  private readonly model: LlamaModel;
  private readonly renderer: PromptRenderer;
  private readonly capabilities: TemplateCapabilities;
  private readonly control: OutputControl;
  private eogTokens: Token[] | undefined;

  constructor(options: ModelRunnerOptions) {
    this.config = options.config;
    this.model = options.model;
    this.renderer = options.renderer;
    this.capabilities = options.capabilities;
    this.control = new OutputControl(options.model.llama, options.model, () => this.endOfGenerationTokens());
    // The organization is the fairness key: the same value that scopes the prefix cache.
    this.queue = new FairQueue<Job>({
      maxQueue: options.config.maxQueue,
      bypassLimit: options.config.parallel,
      tenantOf: (job) => job.request.cacheScope,
    });
    this.slots = [];
    for (let id = 0; id < options.config.parallel; id++) {
      const sequence = options.context.getSequence();
      this.slots.push({ id, sequence, busy: false, scope: undefined });
    }
    instrumentDecodes(options.context, this.stats);
  }

  get contextSize(): number {
    return this.config.contextSize;
  }

  get queueDepth(): number {
    return this.queue.length;
  }

  get busySlots(): number {
    return this.slots.filter((s) => s.busy).length;
  }

  /** Sequences, busy sequences and queued requests right now (the metrics gauges). */
  load(): ModelLoad {
    return {
      model: this.config.id,
      parallel: this.slots.length,
      busySequences: this.busySlots,
      queueDepth: this.queue.length,
    };
  }

  /** Renders the prompt (with the output plan's instructions and tools) and tokenizes it. */
  preparePrompt(request: GenerationRequest): { tokens: Token[]; plan: GenerationPlan | undefined } {
    const structured = request.output !== undefined || request.enableThinking;
    const promptPlan = planPrompt(
      request.messages,
      request.output,
      request.enableThinking,
      this.capabilities,
    );
    const rendered = this.renderer.renderDetailed(promptPlan.messages, {
      enableThinking: request.enableThinking,
      ...(promptPlan.templateTools === undefined ? {} : { tools: promptPlan.templateTools }),
    });
    const segments: PromptSegment[] = [...rendered.segments];
    let plan: GenerationPlan | undefined;
    // Templates that always open <think> need the plan even for plain requests (to close it when reasoning is off).
    if (structured || this.capabilities.nativeThinking) {
      plan = planGeneration(promptPlan, rendered.text, request.output, this.capabilities);
      if (plan.promptSuffix !== "") segments.push({ text: plan.promptSuffix, special: true });
    }
    const tokens: Token[] = [];
    for (const segment of segments) {
      for (const t of this.model.tokenize(segment.text, segment.special)) tokens.push(t);
    }
    return { tokens, plan };
  }

  tokenizePrompt(request: GenerationRequest): Token[] {
    return this.preparePrompt(request).tokens;
  }

  /**
   * Renders, tokenizes, checks the context, compiles the grammar, runs the request's admission hook, then waits
   * in the fair queue; resolves once the request holds its sequences. Rejects before anything is generated:
   * queue full (at once), queue timeout, or the signal aborted while waiting.
   */
  async submit(request: GenerationRequest): Promise<Generation> {
    const model = this.config.id;
    if (request.n > this.slots.length) throw new TooManyChoicesError(request.n, this.slots.length);
    const { tokens: prompt, plan } = this.preparePrompt(request);
    const contextSize = this.config.contextSize;
    const maxTokens = request.sampling.maxTokens ?? contextSize - prompt.length;
    if (prompt.length + maxTokens > contextSize || maxTokens < 1) {
      throw new ContextOverflowError(contextSize, prompt.length, request.sampling.maxTokens);
    }
    const output = plan === undefined ? undefined : await this.control.prepare(plan, maxTokens);
    const signal = request.signal;
    const left = () => signal?.aborted === true;
    if (left()) throw new RequestAbortedError(model);
    // The rate limiter's pre-charge: every choice may use the whole budget.
    await request.admit?.(prompt.length, maxTokens * request.n);
    if (left()) throw new RequestAbortedError(model);
    if (this.stopping) throw new QueueFullError(model);

    return new Promise<Generation>((resolve, reject) => {
      const job: Job = {
        request,
        prompt,
        maxTokens,
        output,
        channel: new Channel<GenerationEvent>(),
        state: "queued",
        admission: { resolve, reject },
        timer: undefined,
        lease: undefined,
        prefillPos: 0,
        choices: [],
        cachedTokens: 0,
        prepared: false,
        cancelled: false,
        onAbort: undefined,
      };
      const room = this.queue.hasRoomFor(request.cacheScope);
      this.queue.push(job);
      this.admit();
      if (job.state !== "queued") {
        this.kick();
      } else if (!room) {
        this.drop(job, new QueueFullError(model));
        return;
      } else {
        const timeoutMs = this.config.queueTimeoutMs;
        job.timer = setTimeout(() => this.drop(job, new QueueTimeoutError(model, timeoutMs)), timeoutMs);
      }
      if (signal !== undefined) {
        job.onAbort = () => this.cancel(job);
        signal.addEventListener("abort", job.onAbort, { once: true });
      }
    });
  }

  /** Stops admitting; resolves when every admitted request has finished. */
  async drain(): Promise<void> {
    this.stopping = true;
    while (this.queue.length > 0 || this.active.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async dispose(): Promise<void> {
    this.stopping = true;
    for (const job of this.queue.items()) this.drop(job, new QueueFullError(this.config.id));
    for (const job of this.active) this.cancel(job);
    this.kick();
    await this.loop;
  }

  /** The client left: a queued job is dropped, a running one stops at the next step and reports its usage. */
  private cancel(job: Job): void {
    if (job.state === "done") return;
    if (job.state === "queued") {
      this.drop(job, new RequestAbortedError(this.config.id));
      return;
    }
    job.cancelled = true;
    this.kick();
  }

  /** Takes a job out of the queue before it started: `submit` rejects with `error`, nothing was generated. */
  private drop(job: Job, error: Error): void {
    if (job.state !== "queued") return;
    this.queue.remove(job);
    job.state = "done";
    clearTimeout(job.timer);
    if (job.onAbort !== undefined) job.request.signal?.removeEventListener("abort", job.onAbort);
    job.admission.reject(error);
    // A large request that held the queue may have left: others may fit now.
    this.admit();
    this.kick();
  }

  /** Leases sequences to queued jobs in the fair queue's order while enough are free; settles their `submit`. */
  private admit(): void {
    // Runs every engine step: with nothing queued, skip copying each sequence's cached tokens.
    while (this.queue.length > 0) {
      const views = this.slots.map((s) => ({
        id: s.id,
        busy: s.busy,
        scope: s.scope,
        tokens: s.busy ? [] : s.sequence.contextTokens,
      }));
      const taken = this.queue.take((job) =>
        chooseSlots(views, job.prompt, job.request.cacheScope, job.request.n),
      );
      if (taken === undefined) return;
      const { item: job, lease } = taken;
      clearTimeout(job.timer);
      job.timer = undefined;
      job.lease = lease;
      job.state = "prefill";
      for (const id of [lease.primary, ...lease.others]) (this.slots[id] as Slot).busy = true;
      this.active.push(job);
      job.admission.resolve({ promptTokens: job.prompt.length, events: job.channel });
    }
  }

  private kick(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
    if (this.loop === undefined) {
      this.loop = this.run().finally(() => {
        this.loop = undefined;
        if (this.active.length > 0 || this.queue.length > 0) this.kick();
      });
    }
  }

  private async run(): Promise<void> {
    while (true) {
      await this.reapCancelled();
      this.admit();
      if (this.active.length === 0) {
        if (this.stopping || this.queue.length === 0) return;
      }
      await this.step();
    }
  }

  private async reapCancelled(): Promise<void> {
    for (const job of [...this.active]) {
      if (job.cancelled) await this.release(job);
    }
  }

  /** One engine step: a prefill chunk for waiting prompts and one token for every generating choice, one decode. */
  private async step(): Promise<void> {
    const work: Work[] = [];
    let promptWork = false;
    const decoding = this.active.some((j) => j.state === "decode");
    let budget = decoding ? this.config.prefillChunk : this.config.batchSize;

    for (const job of [...this.active]) {
      if (job.state !== "prefill" || job.cancelled) continue;
      const lease = job.lease as SlotChoice;
      const primary = this.slots[lease.primary] as Slot;
      if (!job.prepared) await this.preparePrimary(job, primary, lease.reusable);
      const end = job.prompt.length - 1;
      if (job.prefillPos < end && budget > 0) {
        const chunk = job.prompt.slice(job.prefillPos, Math.min(end, job.prefillPos + budget));
        budget -= chunk.length;
        job.prefillPos += chunk.length;
        promptWork = true;
        work.push({
          job,
          slotId: primary.id,
          run: () =>
            primary.sequence.evaluateWithoutGeneratingNewTokens(chunk, {
              evaluationPriority: priorityOf(primary.id),
            }),
        });
        continue;
      }
      if (job.prefillPos < end) continue;
      await this.startChoices(job, primary, lease);
      promptWork = true;
      for (const choice of job.choices) work.push(this.decodeWork(job, choice));
    }
    for (const job of this.active) {
      if (job.state !== "decode" || job.cancelled || job.choices.some((c) => c.generator === undefined))
        continue;
      for (const choice of job.choices) {
        if (!choice.finished && !work.some((w) => w.slotId === choice.slot.id))
          work.push(this.decodeWork(job, choice));
      }
    }
    if (work.length === 0) {
      // Every job is waiting on something outside the loop (nothing should, but never spin).
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 50);
      });
      return;
    }
    work.sort((a, b) => a.slotId - b.slotId);
    this.stats.steps++;
    const decodesBefore = this.stats.decodes;
    // Start every evaluation in the same tick, in ascending sequence id: the library then puts them all
    // into one llama_decode (its dispatcher runs on the next macrotask).
    const results = await Promise.allSettled(work.map((w) => w.run()));
    if (!promptWork) {
      this.stats.generationSteps++;
      this.stats.generationStepTokens += work.length;
      this.stats.generationStepDecodes += this.stats.decodes - decodesBefore;
    }
    results.forEach((result, i) => {
      if (result.status === "rejected") this.failJob((work[i] as Work).job, result.reason);
    });
    for (const job of [...this.active]) {
      if (job.state === "decode" && job.choices.every((c) => c.finished)) await this.release(job);
    }
  }

  /** Keeps the cached prefix the lease found, erases the rest of the sequence, records the cache scope. */
  private async preparePrimary(job: Job, primary: Slot, reusable: number): Promise<void> {
    const sequence = primary.sequence;
    if (sequence.nextTokenIndex > reusable) {
      await sequence.eraseContextTokenRanges([{ start: reusable, end: sequence.nextTokenIndex }]);
    }
    primary.scope = job.request.cacheScope;
    job.prefillPos = reusable;
    job.cachedTokens = reusable;
    job.prepared = true;
  }

  /** Prompt evaluated up to its last token: copy it into the other leased sequences and create the generators. */
  private async startChoices(job: Job, primary: Slot, lease: SlotChoice): Promise<void> {
    const upTo = job.prompt.length - 1;
    const slots = [primary, ...lease.others.map((id) => this.slots[id] as Slot)];
    for (const slot of slots.slice(1)) {
      slot.scope = job.request.cacheScope;
      const copied = await copyState(slot.sequence, primary.sequence, upTo);
      if (!copied) {
        // The copy is a library internal: fall back to evaluating the prompt again.
        await slot.sequence.clearHistory();
        if (upTo > 0) await slot.sequence.evaluateWithoutGeneratingNewTokens(job.prompt.slice(0, upTo));
      }
    }
    const lastToken = job.prompt[upTo] as Token;
    job.choices = slots.map((slot, index) => {
      const choice: Choice = {
        index,
        slot,
        generator: undefined,
        pending: lastToken,
        generated: [],
        decoder: new Utf8TokenDecoder(this.model),
        stop: new StopMatcher(job.request.sampling.stop),
        finished: false,
        output: job.output === undefined ? undefined : this.control.startChoice(job.output),
      };
      choice.generator = slot.sequence.evaluate([lastToken], this.evaluateOptions(job, choice, index));
      return choice;
    });
    job.state = "decode";
  }

  private evaluateOptions(job: Job, choice: Choice, index: number) {
    const sampling: SamplingParams = job.request.sampling;
    const penalize = sampling.frequencyPenalty !== 0 || sampling.presencePenalty !== 0;
    let tokenBias: TokenBias | (() => TokenBias) | undefined;
    const prepared = job.output;
    const output = choice.output;
    if (sampling.ignoreEos === true) {
      const bias = new TokenBias(this.model.tokenizer);
      for (const token of this.endOfGenerationTokens()) bias.set(token, "never");
      tokenBias = bias;
    } else if (prepared !== undefined && output !== undefined) {
      // Read at every sampling: steers a reasoning block or a JSON structure closed as the budget runs out.
      tokenBias = () => this.control.bias(prepared, output, job.maxTokens - choice.generated.length);
    }
    const grammarEvaluationState = output?.grammarState;
    return {
      temperature: sampling.temperature,
      topP: sampling.topP,
      // OpenAI has no top-k: sample over the whole vocabulary.
      topK: 0,
      minP: 0,
      seed: (sampling.seed + index) >>> 0,
      yieldEogToken: true,
      evaluationPriority: priorityOf(choice.slot.id),
      ...(tokenBias === undefined ? {} : { tokenBias }),
      ...(grammarEvaluationState === undefined ? {} : { grammarEvaluationState }),
      ...(penalize
        ? {
            repeatPenalty: {
              // The whole completion so far, as OpenAI defines the penalties (the library's default is 64 tokens).
              punishTokens: () => choice.generated,
              penalty: 1,
              frequencyPenalty: sampling.frequencyPenalty,
              presencePenalty: sampling.presencePenalty,
            },
          }
        : {}),
    } as const;
  }

  private endOfGenerationTokens(): Token[] {
    if (this.eogTokens === undefined) {
      this.eogTokens = [];
      const vocabulary = this.model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
      for (let t = 0; t < vocabulary; t++)
        if (this.model.isEogToken(t as Token)) this.eogTokens.push(t as Token);
    }
    return this.eogTokens;
  }

  private decodeWork(job: Job, choice: Choice): Work {
    return {
      job,
      slotId: choice.slot.id,
      run: async () => {
        const generator = choice.generator as TokenGenerator;
        const input = choice.generated.length === 0 ? undefined : choice.pending;
        const result = await generator.next(input);
        this.onToken(job, choice, result.done === true ? undefined : result.value);
      },
    };
  }

  private onToken(job: Job, choice: Choice, token: Token | undefined): void {
    if (job.cancelled || choice.finished) return;
    if (token === undefined || (this.model.isEogToken(token) && job.request.sampling.ignoreEos !== true)) {
      this.finishChoice(job, choice, "stop");
      return;
    }
    choice.generated.push(token);
    choice.pending = token;
    const text = choice.decoder.push(token);
    const output = choice.output;
    let stopped: boolean;
    if (output === undefined) {
      stopped = this.emitContent(job, choice, text);
    } else {
      if (output.parser.inReasoning) output.reasoningTokens++;
      output.tail = (output.tail + text).slice(-16);
      stopped = this.emitParts(job, choice, output.parser.push(text));
    }
    if (stopped) {
      this.finishChoice(job, choice, "stop", false);
    } else if (choice.generated.length >= job.maxTokens) {
      this.finishChoice(job, choice, "length");
    }
  }

  /** Content through the stop matcher; true when a stop string ended the choice. */
  private emitContent(job: Job, choice: Choice, text: string): boolean {
    const { emit, stopped } = choice.stop.push(text);
    if (emit.length > 0) job.channel.push({ type: "delta", choice: choice.index, text: emit });
    return stopped;
  }

  /** Parsed parts as events. Stop strings apply to free-text content only: cutting JSON or a call would break it. */
  private emitParts(job: Job, choice: Choice, parts: readonly OutputPart[]): boolean {
    const structured = job.output?.plan.parser.json === true;
    for (const part of parts) {
      const index = choice.index;
      switch (part.kind) {
        case "content":
          if (structured) job.channel.push({ type: "delta", choice: index, text: part.text });
          else if (this.emitContent(job, choice, part.text)) return true;
          break;
        case "reasoning":
          job.channel.push({ type: "delta", choice: index, text: part.text, target: { kind: "reasoning" } });
          break;
        case "tool_call":
          job.channel.push({
            type: "delta",
            choice: index,
            text: "",
            target: { kind: "tool_call", call: part.call, name: part.name },
          });
          break;
        case "tool_arguments":
          job.channel.push({
            type: "delta",
            choice: index,
            text: part.text,
            target: { kind: "tool_call", call: part.call },
          });
          break;
        default:
          part satisfies never;
      }
    }
    return false;
  }

  private finishChoice(job: Job, choice: Choice, reason: FinishReason, flush = true): void {
    choice.finished = true;
    const output = choice.output;
    let stoppedByString = !flush;
    if (flush) {
      const text = choice.decoder.flush();
      if (output === undefined) stoppedByString = this.emitContent(job, choice, text);
      else
        stoppedByString = this.emitParts(job, choice, [
          ...output.parser.push(text),
          ...output.parser.finish(),
        ]);
      const rest = stoppedByString ? "" : choice.stop.flush();
      if (rest.length > 0) job.channel.push({ type: "delta", choice: choice.index, text: rest });
    }
    let finalReason = reason;
    let invalid: string | undefined;
    if (output !== undefined && job.output !== undefined && !stoppedByString) {
      const plan = job.output.plan;
      const problem = plan.grammar === undefined ? undefined : plan.validate(output.parser);
      // A reply that carries tool calls ends with "tool_calls" (spec behaviour 4), even when the budget ran out
      // right after the last call closed; likewise a JSON answer that closed on the last token is complete.
      if (output.parser.toolCalls.length > 0) finalReason = "tool_calls";
      else if (
        reason === "length" &&
        plan.parser.json === true &&
        plan.grammar !== undefined &&
        problem === undefined
      )
        finalReason = "stop";
      if (finalReason !== "length") invalid = problem;
    }
    job.channel.push({
      type: "finish",
      choice: choice.index,
      reason: finalReason,
      ...(invalid === undefined ? {} : { invalid }),
    });
  }

  /** Ends a job: closes its generators, frees its sequences (their KV stays as a reusable prefix), reports usage. */
  private async release(job: Job): Promise<void> {
    const i = this.active.indexOf(job);
    if (i >= 0) this.active.splice(i, 1);
    await Promise.allSettled(job.choices.map((c) => c.generator?.return()));
    if (job.lease !== undefined) {
      for (const id of [job.lease.primary, ...job.lease.others]) (this.slots[id] as Slot).busy = false;
    }
    this.finishJob(job);
  }

  private finishJob(job: Job): void {
    if (job.state === "done") return;
    job.state = "done";
    if (job.onAbort !== undefined) job.request.signal?.removeEventListener("abort", job.onAbort);
    const completionTokens = job.choices.reduce((sum, c) => sum + c.generated.length, 0);
    const reasoningTokens = job.choices.reduce((sum, c) => sum + (c.output?.reasoningTokens ?? 0), 0);
    job.channel.push({
      type: "usage",
      usage: {
        promptTokens: job.prompt.length,
        completionTokens,
        cachedTokens: job.cachedTokens,
        reasoningTokens,
      },
    });
    job.channel.close();
  }

  /** A native evaluation failed: the job's stream errors out and its sequences are freed at the next step. */
  private failJob(job: Job, error: unknown): void {
    if (job.cancelled) return;
    job.cancelled = true;
    job.channel.fail(error);
  }
}

interface Work {
  job: Job;
  slotId: number;
  run: () => Promise<void>;
}

/** n > 1: llama_memory_seq_cp through the library's internal method (0.8 ms instead of a new prefill). */
async function copyState(
  target: LlamaContextSequence,
  source: LlamaContextSequence,
  upTo: number,
): Promise<boolean> {
  const internal = target as unknown as {
    _copyStateFromOtherSequence?: (other: LlamaContextSequence, upToTokenIndex: number) => Promise<boolean>;
  };
  if (typeof internal._copyStateFromOtherSequence !== "function") return false;
  try {
    return await internal._copyStateFromOtherSequence(source, upTo);
  } catch {
    return false;
  }
}

function priorityOf(slotId: number): 1 {
  // The library types priority as 1..5 but only compares numbers; our batch strategy sorts by it.
  return (PRIORITY_BASE - slotId) as 1;
}

/**
 * The library's batch builder with one change: items in descending priority (= ascending sequence id) so
 * llama.cpp's split_equal keeps the whole step in one ubatch.
 */
export function sequenceOrderStrategy({
  items,
  size,
}: {
  items: readonly { tokens: readonly Token[]; evaluationPriority: number }[];
  size: number;
}) {
  const ordered = [...items].sort((a, b) => b.evaluationPriority - a.evaluationPriority);
  const result: { item: (typeof items)[number]; processAmount: number }[] = [];
  let left = size;
  for (const item of ordered) {
    if (left <= 0) break;
    const processAmount = Math.min(item.tokens.length, left);
    result.push({ item, processAmount });
    left -= processAmount;
  }
  return result;
}

/**
 * Counts decodes and their tokens: the library calls `_ctx.initBatch(size)` once per llama_decode. The addon
 * object is frozen, so `_ctx` is replaced by a proxy (covered by the batching test).
 */
function instrumentDecodes(context: LlamaContext, stats: RunnerStats): void {
  const holder = context as unknown as { _ctx: object };
  const native = holder._ctx as Record<string | symbol, unknown>;
  holder._ctx = new Proxy(native, {
    get(target, property) {
      const value = target[property];
      if (typeof value !== "function") return value;
      if (property === "initBatch") {
        return (size: number) => {
          stats.decodes++;
          stats.decodedTokens += size;
          return (value as (size: number) => unknown).call(target, size);
        };
      }
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
}
