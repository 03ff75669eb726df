// One model on one llama.cpp context: prepares requests, admits them through the fair queue, runs the step loop.
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import type { AsyncPromptRenderer } from "../../chat/template/thread.js";
import type { TemplateCapabilities } from "../../chat/template/tool-format.js";
import type { ModelConfig } from "../../config/schema.js";
import { QueueFullError, RequestAbortedError } from "../errors.js";
import { IdleSignal } from "../idle-signal.js";
import type { Generation, GenerationRequest, ModelLoad } from "../types.js";
import { Admission } from "./admission.js";
import { Arrivals } from "./arrivals.js";
import type { RunnerStats } from "./batching.js";
import { Job } from "./job.js";
import { findDirectDecoder, unboundedTopK } from "./llama-internals.js";
import { OutputControl } from "./output-control.js";
import { type LlamaPreparedRequest, RequestPreparer } from "./prepared-request.js";
import type { PromptStore } from "./prompt-store.js";
import { lazyEogTokens } from "./sampling-options.js";
import type { SlotChoice, SlotView } from "./slot-choice.js";
import { SlotPool } from "./slot-pool.js";
import { StepLoop } from "./step-loop.js";
import { Vocabulary } from "./token-logprobs.js";

export interface ModelRunnerOptions {
  config: ModelConfig;
  model: LlamaModel;
  /** Created with `countingStrategy(stats)` as its batching strategy. */
  context: LlamaContext;
  /** The counters the context's batching strategy feeds; the step loop adds its own. */
  stats: RunnerStats;
  renderer: AsyncPromptRenderer;
  /** What the model's chat template can do (tools, thinking): decides prompted vs native formats. */
  capabilities: TemplateCapabilities;
  /** Prompt states in host memory beyond the slots; the runner owns it (disposes it with itself). */
  store?: PromptStore | undefined;
  /** Greedy steps decoded by the step loop itself when the build allows (`engine.directSteps`); default off. */
  directSteps?: boolean | undefined;
  /** The longest decode of a direct step the event loop may wait for (`engine.blockingDecodeMs`); default 0. */
  blockingDecodeMs?: number | undefined;
  /** Requests received whose model is not known yet (LlamaEngine's `expectRequest`): arriving here too. */
  incoming?: (() => number) | undefined;
}

export class ModelRunner {
  /** Decodes, steps and tokens so far (the batching test and the benchmark diff them). */
  readonly stats: RunnerStats;
  /** The llama.cpp context the runner decodes on (the benchmark's step profile traces it). */
  readonly context: LlamaContext;
  private readonly config: ModelConfig;
  private readonly pool: SlotPool<LlamaContextSequence>;
  private readonly admission: Admission<Job>;
  private readonly loop: StepLoop;
  private readonly preparer: RequestPreparer;
  /** Requests being prepared for this model and not yet enqueued: a burst's first step waits for them. */
  private readonly arrivals = new Arrivals();
  private readonly store: PromptStore | undefined;
  private stopping = false;
  /** Nothing queued and nothing running: what `drain` waits for, checked whenever a job ends. */
  private readonly idle: IdleSignal;

  constructor(options: ModelRunnerOptions) {
    const { config, model, context } = options;
    this.config = config;
    this.stats = options.stats;
    this.context = context;
    const eogTokens = lazyEogTokens(model);
    const control = new OutputControl(model.llama, model, eogTokens);
    const sequences = Array.from({ length: config.parallel }, () => context.getSequence());
    this.pool = new SlotPool(sequences);
    // A sequence that needs checkpoints to reuse a prefix (sliding-window attention, recurrent layers) saves only a
    // partial cache in its state file: no store for those.
    this.store = sequences[0]?.needsCheckpoints === false ? options.store : undefined;
    if (this.store === undefined) void options.store?.dispose();
    const vocabulary = new Vocabulary(model);
    this.preparer = new RequestPreparer({
      model,
      contextSize: config.contextSize,
      promptCharsPerToken: config.promptCharsPerToken,
      sequences: config.parallel,
      renderer: options.renderer,
      capabilities: options.capabilities,
      control,
      vocabularySize: vocabulary.size,
    });
    this.admission = new Admission<Job>({
      model: config.id,
      maxQueue: config.maxQueue,
      queueTimeoutMs: config.queueTimeoutMs,
      pool: this.pool,
      store: this.store,
      admitted: (job, lease) => this.start(job, lease),
      refused: (job, error) => {
        job.state = "done";
        job.settle.reject(error);
        this.idle.check();
      },
    });
    this.loop = new StepLoop({
      model,
      pool: this.pool,
      control,
      eogTokens,
      noTopK: unboundedTopK(sequences[0] as LlamaContextSequence),
      vocabulary,
      prefillChunk: config.prefillChunk,
      prefillStretch: config.prefillStretch,
      batchSize: config.batchSize,
      stats: this.stats,
      admit: () => this.admission.admit(),
      queued: () => this.admission.depth,
      arriving: () => this.arrivals.pending + (options.incoming?.() ?? 0),
      stopping: () => this.stopping,
      ended: () => this.idle.check(),
      store: this.store,
      direct:
        options.directSteps === true ? findDirectDecoder(context, sequences, config.batchSize) : undefined,
      blockingDecodeMs: options.blockingDecodeMs,
    });
    this.idle = new IdleSignal(() => this.admission.depth === 0 && this.loop.running.length === 0);
  }

  get contextSize(): number {
    return this.config.contextSize;
  }

  get queueDepth(): number {
    return this.admission.depth;
  }

  /** What each slot holds (busy or free, its organization, its tokens): for the model tests and diagnostics. */
  slotViews(): SlotView[] {
    return this.pool.views();
  }

  get busySlots(): number {
    return this.pool.busyCount;
  }

  /** Sequences, busy sequences and queued requests right now (the metrics gauges). */
  load(): ModelLoad {
    return {
      model: this.config.id,
      parallel: this.pool.size,
      busySequences: this.pool.busyCount,
      queueDepth: this.admission.depth,
    };
  }

  /** Renders, tokenizes, checks the context and compiles the grammar; queues nothing. */
  prepare(request: GenerationRequest): Promise<LlamaPreparedRequest> {
    this.arrivals.expect(request);
    return this.preparer.prepare(request).catch((err: unknown) => {
      this.arrivals.arrived(request);
      throw err;
    });
  }

  /** The prompt's tokens as `prepare` counts them, nothing checked or compiled. */
  async countPromptTokens(request: GenerationRequest): Promise<number> {
    return (await this.preparer.preparePrompt(request)).tokens.length;
  }

  /**
   * Waits in the fair queue; resolves once the request holds its sequences. Rejects before anything is
   * generated: queue full (at once), queue timeout, or the signal aborted while waiting.
   */
  async enqueue(prepared: LlamaPreparedRequest): Promise<Generation> {
    this.arrivals.arrived(prepared.request);
    const model = this.config.id;
    if (prepared.request.signal?.aborted === true) throw new RequestAbortedError(model);
    if (this.stopping) throw new QueueFullError(model);
    return new Promise<Generation>((resolve, reject) => {
      this.admission.enqueue(new Job(prepared, { resolve, reject }));
    });
  }

  /**
   * Stops admitting new requests; resolves when the last queued or running one has ended (its stream closed and
   * its sequences freed). The caller bounds the wait (server.shutdownTimeoutMs, then `dispose`).
   */
  async drain(): Promise<void> {
    this.stopping = true;
    await this.idle.wait();
  }

  async dispose(): Promise<void> {
    this.stopping = true;
    this.admission.dropAll(new QueueFullError(this.config.id));
    for (const job of this.loop.running) cancel(job);
    this.loop.kick();
    await this.loop.stopped();
    await this.store?.dispose();
  }

  /** A job left the queue holding `lease`: from now on an abort cancels it at the next step. */
  private start(job: Job, lease: SlotChoice): void {
    job.lease = lease;
    job.state = "prefill";
    this.loop.add(job);
    job.settle.resolve({ promptTokens: job.prompt.length, events: job.channel });
    const signal = job.request.signal;
    if (signal !== undefined) {
      job.onAbort = () => {
        cancel(job);
        this.loop.kick();
      };
      signal.addEventListener("abort", job.onAbort, { once: true });
    }
    this.loop.kick();
  }
}

/** The client left a running job: it stops at the next step and reports its usage. */
function cancel(job: Job): void {
  if (job.state !== "done") job.cancelled = true;
}
