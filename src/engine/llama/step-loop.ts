// The continuous-batching loop of one context: each step, a prefill chunk and every generating choice's next token.
import { setImmediate as nextTurn } from "node:timers/promises";
import type { LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { MAX_BACKLOG } from "../channel.js";
import { countDecode, priorityOf, type RunnerStats } from "./batching.js";
import { ChoiceStream, usageOf } from "./choice-stream.js";
import type { Choice, Job, TokenGenerator } from "./job.js";
import { copySequenceState, type DirectDecoder, type DirectItem } from "./llama-internals.js";
import type { OutputControl } from "./output-control.js";
import { PrefillBudget } from "./prefill-budget.js";
import type { PromptStore } from "./prompt-store.js";
import { type ChoiceSampling, evaluateOptions, isArgmaxDraw } from "./sampling-options.js";
import { commonPrefixLength, MIN_COPY_GAIN, type SlotChoice } from "./slot-choice.js";
import type { Slot, SlotPool } from "./slot-pool.js";
import { logprobMetadata, TokenLogprobs, type Vocabulary } from "./token-logprobs.js";

export interface StepLoopOptions {
  model: LlamaModel;
  pool: SlotPool<LlamaContextSequence>;
  control: OutputControl;
  eogTokens: () => readonly Token[];
  /** The `topK` that leaves top-k out of the sampler chain (`unboundedTopK`). */
  noTopK: number;
  /** The model's tokens as text and bytes (logprobs). */
  vocabulary: Vocabulary;
  /** Most prompt tokens per step while other choices generate (they wait for the whole step). */
  prefillChunk: number;
  /** How much longer than a generation-only step a step carrying prompt tokens may take (prefill-budget.ts). */
  prefillStretch: number;
  /** Prompt tokens per step when nothing generates. */
  batchSize: number;
  stats: RunnerStats;
  /** Leases sequences to queued requests (run before every step). */
  admit: () => void;
  /** Requests still waiting for sequences. */
  queued: () => number;
  /** Requests being prepared for this model, not yet queued (arrivals.ts). */
  arriving: () => number;
  /** Shutting down: the loop ends once nothing runs, even with requests queued. */
  stopping: () => boolean;
  /** A job has left the loop: its sequences freed, its stream closed. */
  ended: (job: Job) => void;
  /** Prompt states kept in host memory beyond the slots (prompt-store.ts); none when absent. */
  store?: PromptStore | undefined;
  /**
   * Decodes a step without node-llama-cpp's generators when every choice in it draws an argmax (the tuned build);
   * absent, every step goes through the library.
   */
  direct?: DirectDecoder | undefined;
  /**
   * The longest decode the event loop may wait for (ms): a direct step that only generates, no larger than the last
   * one and as long as it took at most this, is decoded on the JS thread itself (no hand-off to the decode thread
   * and back). 0: never.
   */
  blockingDecodeMs?: number | undefined;
}

/** One evaluation of a step, on one sequence. */
interface Work {
  job: Job;
  sequenceId: number;
  /** Through node-llama-cpp: a generator's next token, or a prompt chunk evaluated. */
  run: () => Promise<void>;
  /** The same evaluation for a direct step; `choice` takes the drawn token. Absent: only the library can run it. */
  direct: { item: DirectItem; choice?: Choice } | undefined;
}

/**
 * Longest a step waits, from the moment it could start, for requests still being prepared (`gather`), while other
 * choices generate (they wait too). Requests sent together reach the queue 1–2 ms apart here, one after another on
 * the event loop.
 */
export const GATHER_MS = 5;

/**
 * The same while nothing generates: only the new jobs wait, and the others would wait a whole step for them. A
 * burst of sixteen requests takes about 40 ms to be prepared on two loaded cores (rendered, tokenized, one after
 * another on the event loop).
 */
export const GATHER_IDLE_MS = 40;

/**
 * After a step in which streams ended, longest the next step waits from that step's end for their clients' next
 * requests (the follow-ups of closed-loop clients and agents, which send the next request once a response ends),
 * and only while no more choices generate than streams ended. The follow-ups of a wave reached the queue 13–50 ms
 * after the step's end at sixteen streams here; one that misses the next step waits for the whole of it.
 */
export const FOLLOW_UP_MS = 25;

export class StepLoop {
  /** Admitted jobs, in admission order. */
  private readonly active: Job[] = [];
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private readonly sampling: ChoiceSampling;
  private readonly budget: PrefillBudget;
  /** The last direct decode that only generated: its tokens and how long it took (`blockingDecodeMs`). */
  private lastGeneration: { tokens: number; ms: number } | undefined;
  /**
   * Tokens were pushed to their streams with no event-loop turn since: their writes (flushed on `process.nextTick`,
   * after the step loop's chain of promises) are still waiting.
   */
  private unwritten = false;
  /** When the first job admitted since the last step was added (`gather`). */
  private freshSince: number | undefined;
  /** When the last step ended, and the jobs that ended in it (`gather`: their follow-ups). */
  private stepEnd: number | undefined;
  private followUps = 0;
  /** Jobs admitted since the last step ended. */
  private addedSinceStep = 0;

  constructor(private readonly options: StepLoopOptions) {
    this.sampling = {
      model: options.model,
      control: options.control,
      eogTokens: options.eogTokens,
      noTopK: options.noTopK,
    };
    this.budget = new PrefillBudget({ maxChunk: options.prefillChunk, stretch: options.prefillStretch });
  }

  /** Jobs holding sequences. */
  get running(): readonly Job[] {
    return this.active;
  }

  /** A job left the queue with its lease: it starts prefilling at the next step. */
  add(job: Job): void {
    this.active.push(job);
    this.freshSince ??= performance.now();
    this.addedSinceStep++;
  }

  /** Starts the loop, or wakes it from an idle wait. */
  kick(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
    if (this.loop === undefined) {
      this.loop = this.run().finally(() => {
        this.loop = undefined;
        if (this.active.length > 0 || this.options.queued() > 0) this.kick();
      });
    }
  }

  /** Resolves once the loop has ended (nothing running, or shutting down). */
  async stopped(): Promise<void> {
    await this.loop;
  }

  private async run(): Promise<void> {
    try {
      while (true) {
        await this.reapCancelled();
        this.options.admit();
        if (this.active.length === 0) {
          if (this.options.stopping() || this.options.queued() === 0) return;
        }
        if (this.freshSince !== undefined || this.followUps > 0) await this.gather();
        await this.step();
      }
    } finally {
      this.options.direct?.idle();
    }
  }

  /**
   * Requests sent together (a burst, or clients whose streams ended in the same step) reach the queue one after
   * another: the first is admitted before the event loop has even read the others, and a step started for it alone
   * would make them wait a whole step for their first token (and keep their streams a step apart from then on). So
   * before a step that would start newly admitted jobs, the loop lets the event loop turn once (requests already
   * received run up to the queue), then waits while requests for this model are still being prepared and nothing
   * is queued, until GATHER_MS after the loop could have stepped (the first new job's admission, or the last
   * step's end for jobs admitted while it ran; GATHER_IDLE_MS while nothing generates). After a step in which
   * streams ended, while no more choices generate than ended, it also waits for their follow-ups (`FOLLOW_UP_MS`)
   * until as many jobs were admitted since. Generating choices wait with it, once per burst.
   */
  private async gather(): Promise<void> {
    await nextTurn();
    this.options.admit();
    const { arriving, queued, stopping } = this.options;
    const generating = this.active.reduce(
      (sum, job) => sum + (job.state === "decode" && !job.cancelled ? job.choices.length : 0),
      0,
    );
    const ready = Math.max(this.freshSince ?? 0, this.stepEnd ?? 0);
    const until = ready + (generating > 0 ? GATHER_MS : GATHER_IDLE_MS);
    const followUps = this.followUps > 0 && this.followUps >= generating ? this.followUps : 0;
    const followUntil = (this.stepEnd ?? 0) + FOLLOW_UP_MS;
    while (queued() === 0 && !stopping()) {
      let deadline = arriving() > 0 ? until : 0;
      if (this.addedSinceStep < followUps) deadline = Math.max(deadline, followUntil);
      const left = deadline - performance.now();
      if (left <= 0) break;
      await this.sleep(left);
      this.options.admit();
    }
    this.freshSince = undefined;
    this.followUps = 0;
  }

  /** Waits `ms`, or less if `kick` comes first (a job admitted or cancelled). */
  private async sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      this.wake = resolve;
      setTimeout(resolve, ms);
    });
    this.wake = undefined;
  }

  private async reapCancelled(): Promise<void> {
    for (const job of [...this.active]) {
      if (job.cancelled) await this.release(job);
    }
  }

  /** One engine step: a prefill chunk for waiting prompts and one token for every generating choice, one decode. */
  private async step(): Promise<void> {
    const { pool, stats } = this.options;
    const work: Work[] = [];
    for (const job of this.active) {
      if (job.state !== "decode" || job.cancelled) continue;
      // Its reader has fallen behind (a client that stopped reading): paused, holding its sequences, until the
      // reader catches up or the SSE drain timeout cancels it. Other jobs' steps go on without it.
      if (job.channel.backlog >= MAX_BACKLOG) continue;
      for (const choice of job.choices) if (!choice.stream.finished) work.push(this.decodeWork(job, choice));
    }
    await this.prepareNewJobs();
    const prefilling = this.active.filter((job) => job.state === "prefill" && !job.cancelled);
    // Prompt tokens wait for nobody while nothing generates; otherwise every generating choice waits for them.
    const generating = work.length;
    const longest = Math.max(0, ...prefilling.map((job) => job.prompt.length - job.cachedTokens));
    let budget = generating > 0 ? this.budget.allowance(generating, longest) : this.options.batchSize;
    let promptTokens = 0;
    let promptWork = false;
    let jobsStarted = 0;

    for (const job of prefilling) {
      if (job.cancelled) continue; // while a slot was being prepared
      const lease = job.lease as SlotChoice;
      const primary = pool.slot(lease.primary);
      const end = job.prompt.length - 1;
      const rest = job.prompt.length - job.prefillPos;
      // Generation starts once the rest of the prompt fits this step: it is the generators' first evaluation, so
      // the first token is sampled in this same decode. n > 1 first evaluates up to the last token (copied into
      // its other sequences), then starts with that token alone.
      if (job.prefillPos === end || (lease.others.length === 0 && rest <= budget)) {
        if (job.prefillPos < end) {
          budget -= rest;
          promptTokens += rest;
        }
        await this.startChoices(job, primary, lease, job.prefillPos);
        jobsStarted++;
        job.prefillPos = end;
        promptWork = true;
        for (const choice of job.choices) work.push(this.decodeWork(job, choice));
        continue;
      }
      if (budget <= 0) continue;
      const chunk = job.prompt.slice(job.prefillPos, Math.min(end, job.prefillPos + budget));
      budget -= chunk.length;
      promptTokens += chunk.length;
      job.prefillPos += chunk.length;
      promptWork = true;
      work.push({
        job,
        sequenceId: primary.id,
        run: () =>
          primary.sequence.evaluateWithoutGeneratingNewTokens(chunk, {
            evaluationPriority: priorityOf(primary.id),
          }),
        direct: { item: { sequence: primary.sequence, tokens: chunk, draw: false } },
      });
    }
    if (work.length === 0) {
      // Every job is paused for its reader, or waiting on something outside the loop: never spin (nor keep threads
      // another model's context may want).
      this.options.direct?.idle();
      await this.sleep(50);
      return;
    }
    work.sort((a, b) => a.sequenceId - b.sequenceId);
    stats.steps++;
    if (jobsStarted > 0) {
      stats.startSteps++;
      stats.startedJobs += jobsStarted;
    }
    const decodesBefore = stats.decodes;
    const runsBefore = stats.sequenceRuns;
    const started = performance.now();
    const direct = this.options.direct;
    if (direct !== undefined && directable(work, direct)) await this.decodeDirect(work, direct);
    else await this.decodeThroughLibrary(work);
    this.budget.record({ generating, promptTokens, ms: performance.now() - started });
    if (!promptWork) {
      stats.generationSteps++;
      stats.generationStepTokens += work.length;
      stats.generationStepDecodes += stats.decodes - decodesBefore;
      stats.generationStepRuns += stats.sequenceRuns - runsBefore;
    }
    let ended = 0;
    for (const job of [...this.active]) {
      if (job.state === "decode" && job.choices.every((c) => c.stream.finished)) {
        await this.release(job);
        if (!job.cancelled) ended++;
      }
    }
    this.stepEnd = performance.now();
    this.followUps = ended;
    this.addedSinceStep = 0;
  }

  /**
   * The step through node-llama-cpp: every evaluation started in the same tick, in ascending sequence id, so the
   * library puts them all into one llama_decode (its dispatcher runs on the next macrotask).
   */
  private async decodeThroughLibrary(work: readonly Work[]): Promise<void> {
    // The library allocates the context's threads for each batch itself.
    this.options.direct?.idle();
    const results = await Promise.allSettled(work.map((w) => w.run()));
    this.unwritten = true;
    results.forEach((result, i) => {
      if (result.status === "rejected") failJob((work[i] as Work).job, result.reason);
    });
  }

  /**
   * Prepares the primary slot of every job admitted since the last step. A lease may hold a free slot as its copy
   * source until its primary is filled: the copies done free those slots, so requests still queued for want of a
   * slot are admitted then and prepared too, to start in this step rather than after it (a burst of sixteen on
   * sixteen slots: the last one waited a whole step for a source to be let go).
   */
  private async prepareNewJobs(): Promise<void> {
    const { pool, queued, admit } = this.options;
    while (true) {
      const fresh = this.active.filter((job) => job.state === "prefill" && !job.cancelled && !job.prepared);
      if (fresh.length === 0) return;
      for (const job of fresh) {
        const lease = job.lease as SlotChoice;
        await this.preparePrimary(job, pool.slot(lease.primary), lease);
      }
      if (queued() === 0) return;
      admit();
      // Whatever that admitted starts in this step: no gather waits on its account after it.
      this.freshSince = undefined;
    }
  }

  /**
   * The step as one llama_decode of the loop's own (every choice in it draws an argmax): no generator, lock or
   * sampler per choice. A choice that ran through the library before closes its generator first (the sequence then
   * holds everything but its last sampled token, which is its input).
   */
  private async decodeDirect(work: readonly Work[], decoder: DirectDecoder): Promise<void> {
    for (const w of work) {
      const choice = w.direct?.choice;
      const generator = choice?.generator;
      if (choice === undefined || generator === undefined) continue;
      choice.generator = undefined;
      // Its finally blocks release the library's sampler; a failure there leaves nothing for this step to undo.
      await generator.return().catch(() => undefined);
    }
    const items = work.map((w) => (w.direct as { item: DirectItem }).item);
    const tokens = items.reduce((sum, item) => sum + item.tokens.length, 0);
    const generationOnly = items.every((item) => item.draw && item.tokens.length === 1);
    const here = generationOnly && this.mayDecodeHere(decoder, tokens);
    // The event loop is about to wait for a whole decode: the last step's tokens go out first, or their clients
    // would get them with this step's, a step late (the step before ran on the decode thread, or was the first).
    if (here && this.unwritten) await this.turn();
    countDecode(
      this.options.stats,
      tokens,
      work.map((w) => w.sequenceId),
    );
    this.options.stats.directDecodes++;
    let drawn: (Token | undefined)[];
    const started = performance.now();
    try {
      drawn = await decoder.decode(items, { here });
    } catch (error) {
      for (const w of work) failJob(w.job, error);
      return;
    }
    if (generationOnly) this.lastGeneration = { tokens, ms: performance.now() - started };
    if (here) this.options.stats.decodesHere++;
    work.forEach((w, i) => {
      const choice = w.direct?.choice;
      const token = drawn[i];
      if (choice === undefined || token === undefined || w.job.cancelled) return;
      choice.stream.push(token);
      choice.input = [token];
    });
    // The event loop waited for that decode: it writes the tokens out and takes its I/O before the next step.
    if (here) await this.turn();
    else this.unwritten = true;
  }

  /** Lets the event loop turn: pending writes go out, I/O is read. */
  private async turn(): Promise<void> {
    await nextTurn();
    this.unwritten = false;
  }

  /**
   * Whether a generation step of `tokens` tokens may be decoded on the JS thread: the last generation step was at
   * least as large and took at most `blockingDecodeMs` (the first one is measured on the decode thread).
   */
  private mayDecodeHere(decoder: DirectDecoder, tokens: number): boolean {
    const bound = this.options.blockingDecodeMs ?? 0;
    const last = this.lastGeneration;
    return (
      decoder.canDecodeHere && bound > 0 && last !== undefined && tokens <= last.tokens && last.ms <= bound
    );
  }

  /** The next token of one choice: evaluates its input (the prompt's rest, then the token it sampled last). */
  private decodeWork(job: Job, choice: Choice): Work {
    const sequence = this.options.pool.slot(choice.sequenceId).sequence;
    return {
      job,
      sequenceId: choice.sequenceId,
      run: async () => {
        let generator = choice.generator;
        if (generator === undefined) {
          generator = choice.open(choice.input);
          choice.generator = generator;
        }
        // A new generator evaluates what it was opened with; one that yielded takes the input as its next tokens.
        const result = await generator.next(choice.input);
        if (job.cancelled) return;
        if (result.done === true) {
          choice.stream.push(undefined);
          return;
        }
        choice.stream.push(result.value.token, result.value);
        choice.input = [result.value.token];
      },
      direct: choice.argmax ? { item: { sequence, tokens: choice.input, draw: true }, choice } : undefined,
    };
  }

  /**
   * Keeps the cached prefix the lease found (copied from its source slot, when it has one), erases the rest of the
   * sequence, records the cache scope.
   */
  private async preparePrimary(
    job: Job,
    primary: Slot<LlamaContextSequence>,
    lease: SlotChoice,
  ): Promise<void> {
    const sequence = primary.sequence;
    let reusable = lease.reusable;
    await this.keepInStore(primary, lease);
    // The prefix comes from a stored state or another slot's copy (a library internal, whose source may have
    // changed since the lease was chosen). Neither should ever miss; unless the sequence then holds exactly the
    // prompt's prefix, the whole prompt is evaluated instead.
    let filled: boolean | undefined;
    if (lease.restore !== undefined) {
      filled = (await this.options.store?.load(lease.restore, sequence)) ?? false;
      delete lease.restore;
    } else if (lease.source !== undefined) {
      const source = this.options.pool.slot(lease.source.slot).sequence;
      filled = await copySequenceState(sequence, source, reusable);
      this.options.pool.releaseSource(lease);
    }
    if (filled === false || (filled && commonPrefixLength(sequence.contextTokens, job.prompt) < reusable)) {
      await sequence.clearHistory();
      reusable = 0;
    }
    if (sequence.nextTokenIndex > reusable) {
      await sequence.eraseContextTokenRanges([{ start: reusable, end: sequence.nextTokenIndex }]);
    }
    primary.scope = job.scope;
    primary.key = job.cacheKey;
    job.prefillPos = reusable;
    job.cachedTokens = reusable;
    job.prepared = true;
  }

  /**
   * Before the primary slot is overwritten: saves what it holds to the store when the lease would lose at least
   * MIN_COPY_GAIN of its tokens and no other slot of its scope holds them all.
   */
  private async keepInStore(primary: Slot<LlamaContextSequence>, lease: SlotChoice): Promise<void> {
    const store = this.options.store;
    if (store === undefined || primary.scope === undefined) return;
    const tokens = primary.sequence.contextTokens;
    const kept = lease.source === undefined && lease.restore === undefined ? lease.reusable : 0;
    if (tokens.length - kept < MIN_COPY_GAIN) return;
    const scope = primary.scope;
    // A view shows no tokens for a busy slot whose request has not started: what it holds is about to go.
    const twin = this.options.pool
      .views()
      .some(
        (other) =>
          other.id !== primary.id &&
          other.scope === scope &&
          commonPrefixLength(other.tokens, tokens) === tokens.length,
      );
    if (!twin) await store.save(primary.sequence, scope);
  }

  /**
   * Prompt evaluated up to `from`: copy it into the other leased sequences (n > 1: `from` is the last token) and
   * create the generators, whose first evaluation is the prompt's tokens from `from` on.
   */
  private async startChoices(
    job: Job,
    primary: Slot<LlamaContextSequence>,
    lease: SlotChoice,
    from: number,
  ): Promise<void> {
    const upTo = job.prompt.length - 1;
    const slots = [primary, ...lease.others.map((id) => this.options.pool.slot(id))];
    for (const slot of slots.slice(1)) {
      slot.scope = job.scope;
      slot.key = job.cacheKey;
      const copied = await copySequenceState(slot.sequence, primary.sequence, upTo);
      if (!copied) {
        // The copy is a library internal: fall back to evaluating the prompt again.
        await slot.sequence.clearHistory();
        if (upTo > 0) await slot.sequence.evaluateWithoutGeneratingNewTokens(job.prompt.slice(0, upTo));
      }
    }
    const first = job.prompt.slice(from);
    const { sampling } = job.request;
    const prepared = job.output;
    const metadata = logprobMetadata(sampling);
    const logprobs =
      sampling.logprobs === undefined
        ? undefined
        : new TokenLogprobs(this.options.vocabulary, sampling.logprobs);
    job.choices = slots.map((slot, index) => {
      const stream = new ChoiceStream({
        index,
        model: this.options.model,
        stop: sampling.stop,
        ignoreEos: sampling.ignoreEos === true,
        maxTokens: job.maxTokens,
        structured:
          prepared === undefined
            ? undefined
            : { plan: prepared.plan, output: this.options.control.startChoice(prepared) },
        emit: (event) => job.channel.push(event),
        ...(logprobs === undefined ? {} : { logprobs }),
      });
      const options = evaluateOptions(this.sampling, sampling, prepared, stream, slot.id, job.prompt);
      return {
        sequenceId: slot.id,
        stream,
        input: first,
        argmax: isArgmaxDraw(options, metadata),
        generator: undefined,
        open: (tokens: Token[]): TokenGenerator =>
          slot.sequence.evaluateWithMetadata(tokens, metadata, options),
      };
    });
    job.state = "decode";
    this.options.pool.markStarted(lease);
  }

  /** Ends a job: closes its generators, frees its sequences (their KV stays as a reusable prefix), reports usage. */
  private async release(job: Job): Promise<void> {
    const i = this.active.indexOf(job);
    if (i >= 0) this.active.splice(i, 1);
    await Promise.allSettled(job.choices.map((c) => c.generator?.return()));
    if (job.lease?.restore !== undefined) this.options.store?.unpin(job.lease.restore);
    if (job.lease !== undefined) this.options.pool.free(job.lease);
    finishJob(job);
    this.options.ended(job);
  }
}

/** Whether the direct decoder can take the whole step: every evaluation has a direct form, and it fits one batch. */
function directable(work: readonly Work[], decoder: DirectDecoder): boolean {
  let tokens = 0;
  for (const w of work) {
    if (w.direct === undefined) return false;
    tokens += w.direct.item.tokens.length;
  }
  return tokens <= decoder.maxTokens;
}

function finishJob(job: Job): void {
  if (job.state === "done") return;
  job.state = "done";
  if (job.onAbort !== undefined) job.request.signal?.removeEventListener("abort", job.onAbort);
  job.channel.push({
    type: "usage",
    usage: usageOf(
      job.prompt.length,
      job.cachedTokens,
      job.choices.map((c) => c.stream),
    ),
  });
  job.channel.close();
}

/** A native evaluation failed: the job's stream errors out and its sequences are freed at the next step. */
function failJob(job: Job, error: unknown): void {
  if (job.cancelled) return;
  job.cancelled = true;
  job.channel.fail(error);
}
