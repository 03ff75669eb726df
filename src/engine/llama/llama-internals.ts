// Every use of a node-llama-cpp private member, each with its fallback (test/model/llama-internals.test.ts).
import type {
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaGrammarEvaluationState,
  Token,
  TokenBias,
} from "node-llama-cpp";

/**
 * The private members Hearth relies on (node-llama-cpp 3.22.1), by what they do for us. None is required: each
 * helper below falls back to the public API, slower or less precise, when an upgrade removes one.
 */
export const LLAMA_INTERNALS = Object.freeze({
  /** n > 1: llama_memory_seq_cp (0.8 ms). Fallback: evaluate the prompt again in each other sequence. */
  copyState: "LlamaContextSequence._copyStateFromOtherSequence",
  /** Budget steering writes logits directly. Fallback: `TokenBias.set(token, { logit })`, which skips EOG tokens. */
  biasMap: "TokenBias._biases",
  /** The native state of a grammar evaluation, for the check below. Fallback: every candidate is biased. */
  grammarState: "LlamaGrammarEvaluationState._state",
  /** Whether the grammar accepts a token now. Fallback: every candidate is biased. */
  grammarCheck: "Llama._bindings.AddonSampler.canBeNextTokenForGrammarEvaluationState",
  /**
   * llama_set_n_threads, which the library calls before every decode with the threads it allocates: wrapped so a
   * one-token decode takes a thread fewer. Fallback: every decode uses the configured threads.
   */
  setThreads: "LlamaContext._ctx.setThreads",
  /**
   * Sampling with no top-k stage at all: the library drops options set to null before its sampler sees them (an
   * absent `topK` would default to 40). Fallback: `topK: 0`, a top-k over the whole vocabulary, which sorts every
   * logit on every token.
   */
  noTopK: "LlamaContextSequence._resolveSamplerConfig",
  /**
   * The addon's decode and sampling calls, timed by the step profile (bench/step-profile.ts) only. Fallback: no
   * trace (the profile then says so).
   */
  nativeCalls: "LlamaContext._ctx.decodeBatch/sampleToken",
  /**
   * Steps the step loop decodes itself (greedy draws on the tuned build, `DirectDecoder`): the addon's batch calls
   * (`_ctx.initBatch/addToBatch/decodeBatch`, with the tuned build's `hearthArgmax`), the library's thread splitter
   * (the context's reservation, its allocation, the threads other contexts want), and each sequence's token list
   * and next position, kept as the library keeps them; `hearthDecodeHere` decodes on the JS thread. Fallback: every
   * step through node-llama-cpp's generators.
   */
  directSteps:
    "LlamaContext._ctx.initBatch/addToBatch/decodeBatch/hearthArgmax/hearthDecodeHere, LlamaContext._reserveThreads/" +
    "_threadSplitterConsumer/_scheduleToFreeReservedThreads/_llama._threadsSplitter._totalWantedThreads, " +
    "LlamaContextSequence._sequenceId/_contextTokens/_nextTokenIndex/_loadedTokenPredictions",
} as const);

export type LlamaInternal = keyof typeof LLAMA_INTERNALS;

type CopyState = (other: LlamaContextSequence, upToTokenIndex: number) => Promise<boolean>;
type GrammarCheck = (state: object, token: Token) => boolean;

/** The sequence's state-copy method, bound, or undefined when the library no longer has it. */
export function findCopyState(target: LlamaContextSequence): CopyState | undefined {
  const method = (target as unknown as { _copyStateFromOtherSequence?: unknown })._copyStateFromOtherSequence;
  return typeof method === "function" ? (method as CopyState).bind(target) : undefined;
}

/** The token → logit map behind a TokenBias, or undefined when the library no longer has it. */
export function findBiasMap(bias: TokenBias): Map<Token, number> | undefined {
  const map = (bias as unknown as { _biases?: unknown })._biases;
  return map instanceof Map ? (map as Map<Token, number>) : undefined;
}

/** The addon object of a grammar evaluation state, or undefined when the library no longer exposes it. */
export function findGrammarState(state: LlamaGrammarEvaluationState): object | undefined {
  const native = (state as unknown as { _state?: unknown })._state;
  return typeof native === "object" && native !== null ? native : undefined;
}

/** The addon's grammar check for one token, or undefined when the library no longer exposes it. */
export function findGrammarCheck(llama: Llama): GrammarCheck | undefined {
  const bindings = (llama as unknown as { _bindings?: { AddonSampler?: Record<string, unknown> } })._bindings;
  const check = bindings?.AddonSampler?.canBeNextTokenForGrammarEvaluationState;
  return typeof check === "function" ? (check as GrammarCheck) : undefined;
}

/**
 * Routes the threads the library sets before each decode through `choose` (given the library's own count). False
 * when the library no longer has the setter: its own count then stands.
 */
export function overrideDecodeThreads(context: LlamaContext, choose: (requested: number) => number): boolean {
  const native = (context as unknown as { _ctx?: { setThreads?: unknown } })._ctx;
  const setThreads = native?.setThreads;
  if (native === undefined || typeof setThreads !== "function") return false;
  try {
    // The addon's methods are read-only on its prototype: an own property on the instance shadows it.
    Object.defineProperty(native, "setThreads", {
      value: (requested: number) => setThreads.call(native, choose(requested)),
      configurable: true,
    });
    return true;
  } catch {
    return false;
  }
}

/** One addon call the step profile timed: which, and when it started and settled (performance.now()). */
export interface NativeCall {
  kind: "decode" | "sample";
  start: number;
  end: number;
}

/**
 * Reports every decode and sampling call of `context` to `onCall` once it settles: the library's (`decodeBatch`,
 * `sampleToken`) and, on the tuned build, the direct steps' (`hearthDecodeHere` on the JS thread, `hearthArgmax`).
 * For the benchmark's step profile, never the service. False when the library no longer has the library's calls.
 */
export function traceNativeCalls(context: LlamaContext, onCall: (call: NativeCall) => void): boolean {
  const native = (context as unknown as { _ctx?: Record<string, unknown> })._ctx;
  if (
    native === undefined ||
    typeof native.decodeBatch !== "function" ||
    typeof native.sampleToken !== "function"
  )
    return false;
  const traced = [
    ["decode", "decodeBatch"],
    ["decode", "hearthDecodeHere"],
    ["sample", "sampleToken"],
    ["sample", "hearthArgmax"],
  ] as const;
  try {
    for (const [kind, name] of traced) {
      const original = native[name];
      if (typeof original !== "function") continue;
      Object.defineProperty(native, name, {
        value: (...args: unknown[]) => {
          const start = performance.now();
          const settled = () => onCall({ kind, start, end: performance.now() });
          const result: unknown = original.apply(native, args);
          // The direct steps' calls return at once; the library's settle later.
          if (result instanceof Promise) result.then(settled, settled);
          else settled();
          return result;
        },
        configurable: true,
      });
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * The `topK` option that leaves top-k out of the sampler chain (OpenAI has no top-k): null when the library drops
 * it, else 0 (a top-k over the whole vocabulary: the same draw, after a sort of every logit). Read once per model.
 */
export function unboundedTopK(sequence: LlamaContextSequence): number {
  const resolve = (sequence as unknown as { _resolveSamplerConfig?: unknown })._resolveSamplerConfig;
  if (typeof resolve !== "function") return 0;
  try {
    const config = (resolve as (options: { topK: null }) => unknown).call(sequence, { topK: null });
    const dropped = typeof config === "object" && config !== null && !("topK" in config);
    // The library types topK as a number; null is what its own option resolver removes.
    return dropped ? (null as unknown as number) : 0;
  } catch {
    return 0;
  }
}

/**
 * Copies `source`'s evaluated tokens up to `upTo` into `target` (both sequences of one context). False when the
 * copy is unavailable or failed: the caller then evaluates the prompt in `target` itself.
 */
export async function copySequenceState(
  target: LlamaContextSequence,
  source: LlamaContextSequence,
  upTo: number,
): Promise<boolean> {
  const copy = findCopyState(target);
  if (copy === undefined) return false;
  try {
    return await copy(source, upTo);
  } catch {
    return false;
  }
}

/**
 * Adds a logit to a token. `TokenBias.set(token, number)` reads the number as a probability (>= 1 is +Infinity,
 * which turns sampling into NaN) and its `{ logit }` form skips end-of-generation tokens, so the map is written
 * directly; without it, the public form (EOG tokens then keep their logit).
 */
export function setLogit(bias: TokenBias, token: Token, logit: number): void {
  const map = findBiasMap(bias);
  if (map !== undefined) map.set(token, logit);
  else bias.set(token, { logit });
}

/**
 * Whether the grammar accepts `token` next. Without the addon's check every token counts as accepted (a bias on
 * a token the grammar rejects is only wasted); a check that throws counts as a rejection.
 */
export function grammarAccepts(llama: Llama, state: LlamaGrammarEvaluationState, token: Token): boolean {
  const check = findGrammarCheck(llama);
  const native = check === undefined ? undefined : findGrammarState(state);
  if (check === undefined || native === undefined) return true;
  try {
    return check(native, token) === true;
  } catch {
    return false;
  }
}

/** One sequence's part of a direct decode: tokens appended at its next position, and whether to draw after them. */
export interface DirectItem {
  sequence: LlamaContextSequence;
  tokens: readonly Token[];
  /** Draw the argmax token after the last of `tokens`. */
  draw: boolean;
}

/**
 * One llama_decode of the step loop's own making, without node-llama-cpp's generators: the items' tokens in one
 * batch (in the given order), then the argmax token of each item that draws. The sequences' token lists advance as
 * the library's own evaluations advance them, so the library (slot views, copies, erasures) sees what was decoded.
 */
export interface DirectDecoder {
  /**
   * Decodes `items`, at most `maxTokens` tokens in all; resolves with the drawn token of each item (undefined for
   * those that do not draw). Rejects when llama_decode fails; nothing is recorded then.
   */
  decode(items: readonly DirectItem[], options?: { here?: boolean }): Promise<(Token | undefined)[]>;
  /**
   * Whether `decode` can run llama_decode on the calling JS thread (`here`: the tuned build's `hearthDecodeHere`),
   * the thread pool's first worker then, instead of handing it to the context's decode thread and back. The event
   * loop waits for the whole decode.
   */
  readonly canDecodeHere: boolean;
  /**
   * The loop stops decoding directly for now (it has gone idle, or the library is about to decode): the context's
   * share of the cores, kept between direct decodes, is given back (the library gives its own back after each batch
   * it dispatches).
   */
  idle(): void;
  /** The most tokens one decode may take (the context's batch size). */
  readonly maxTokens: number;
}

interface AddonContext {
  initBatch(size: number): void;
  addToBatch(
    sequenceId: number,
    firstPosition: number,
    tokens: Uint32Array,
    logitIndexes: Uint32Array,
  ): Uint32Array;
  decodeBatch(): Promise<void>;
  hearthArgmax(logitIndexes: Uint32Array): Uint32Array;
  hearthDecodeHere?: () => void;
  setThreads(threads: number): void;
}

interface ThreadConsumer {
  _wantedThreads: number;
  getAllocationToConsume():
    | [number, { dispose(): void }]
    | Promise<[number, { dispose(): void }] | undefined>
    | undefined;
}

interface ContextThreads {
  _llama?: { _threadsSplitter?: { _totalWantedThreads?: number } };
  _reserveThreads(): void;
  _threadSplitterConsumer?: ThreadConsumer;
  _scheduleToFreeReservedThreads(): void;
}

interface SequenceTokens {
  _sequenceId: number;
  _contextTokens: Token[];
  _nextTokenIndex: number;
  _loadedTokenPredictions: unknown[];
}

const NO_LOGITS = new Uint32Array(0);
const LAST_TOKEN = (tokens: readonly Token[]) => Uint32Array.of(tokens.length - 1);

/** A sequence's token list and next position, when the library keeps them where Hearth reads them. */
function sequenceTokens(sequence: LlamaContextSequence): SequenceTokens | undefined {
  const state = sequence as unknown as Partial<SequenceTokens>;
  return typeof state._sequenceId === "number" &&
    Array.isArray(state._contextTokens) &&
    typeof state._nextTokenIndex === "number" &&
    Array.isArray(state._loadedTokenPredictions)
    ? (state as SequenceTokens)
    : undefined;
}

/**
 * The direct decoder of `context` for `sequences` (all the runner uses), or undefined: the prebuilt binaries (no
 * `hearthArgmax`), a library without one of the members above, or sequences that keep checkpoints (their prefix
 * reuse depends on the library's checkpoint after each batch).
 */
export function findDirectDecoder(
  context: LlamaContext,
  sequences: readonly LlamaContextSequence[],
  maxTokens: number,
): DirectDecoder | undefined {
  const native = (context as unknown as { _ctx?: Partial<AddonContext> })._ctx;
  const threads = context as unknown as Partial<ContextThreads>;
  const calls = ["initBatch", "addToBatch", "decodeBatch", "hearthArgmax", "setThreads"] as const;
  if (native === undefined || calls.some((name) => typeof native[name] !== "function")) return undefined;
  if (
    typeof threads._reserveThreads !== "function" ||
    typeof threads._scheduleToFreeReservedThreads !== "function"
  )
    return undefined;
  if (sequences.some((s) => s.needsCheckpoints || sequenceTokens(s) === undefined)) return undefined;
  const addon = native as AddonContext;
  const reserved = threads as ContextThreads;
  const contextSize = context.contextSize;
  /** Threads allocated to this context and kept between direct decodes while no other context wants any. */
  let held: { consumer: ThreadConsumer; threads: number; release: () => void } | undefined;
  /** Whether this context's consumer is the only one of the library's thread splitter (no other context decodes). */
  const alone = (consumer: ThreadConsumer | undefined) =>
    consumer !== undefined &&
    reserved._llama?._threadsSplitter?._totalWantedThreads === consumer._wantedThreads;
  const giveBack = () => {
    held?.release();
    held = undefined;
  };

  const canDecodeHere = typeof addon.hearthDecodeHere === "function";
  return {
    maxTokens,
    canDecodeHere,
    async decode(items, options) {
      const states = items.map(({ sequence, tokens }) => {
        const state = sequenceTokens(sequence);
        if (state === undefined || state._loadedTokenPredictions.length > 0)
          throw new Error("the sequence's token list is not where the direct decoder reads it");
        // The library would shift the context here; Hearth's requests never reach the end (prompt + max_tokens fit).
        if (state._nextTokenIndex + tokens.length > contextSize - 1)
          throw new Error("the sequence has no room left for the tokens");
        return state;
      });
      const size = items.reduce((sum, item) => sum + item.tokens.length, 0);
      if (size === 0 || size > maxTokens) throw new Error(`a direct decode of ${size} tokens`);
      addon.initBatch(size);
      const logitIndexes: number[] = [];
      items.forEach(({ tokens, draw }, i) => {
        const logits = draw ? LAST_TOKEN(tokens) : NO_LOGITS;
        const state = states[i] as SequenceTokens;
        const indexes = addon.addToBatch(
          state._sequenceId,
          state._nextTokenIndex,
          Uint32Array.from(tokens),
          logits,
        );
        if (draw) logitIndexes.push(indexes[0] as number);
      });
      // The library shares the cores between contexts: each reserves its share and is allocated threads for each
      // batch. Alone, this context keeps its threads from one direct decode to the next (the allocation is an
      // async call and a handle per decode); another context that wants threads gets them after this decode.
      reserved._reserveThreads();
      const consumer = reserved._threadSplitterConsumer;
      if (held !== undefined && (held.consumer !== consumer || !alone(consumer))) giveBack();
      if (held === undefined && consumer !== undefined) {
        const pending = consumer.getAllocationToConsume();
        const allocation = pending instanceof Promise ? await pending : pending;
        if (allocation !== undefined) {
          const [allocated, handle] = allocation;
          held = { consumer, threads: allocated, release: () => handle.dispose() };
        }
      }
      try {
        if (held !== undefined) addon.setThreads(held.threads);
        // Through the addon at each call, as decodeBatch: what is there now (the step profile traces it).
        if (options?.here === true && canDecodeHere) addon.hearthDecodeHere?.();
        else await addon.decodeBatch();
      } finally {
        if (!alone(consumer)) giveBack();
      }
      items.forEach(({ tokens }, i) => {
        const state = states[i] as SequenceTokens;
        for (const token of tokens) state._contextTokens.push(token);
        state._nextTokenIndex += tokens.length;
      });
      const drawn = addon.hearthArgmax(Uint32Array.from(logitIndexes));
      let next = 0;
      return items.map((item) => (item.draw ? (drawn[next++] as Token) : undefined));
    },
    idle() {
      giveBack();
      reserved._scheduleToFreeReservedThreads();
    },
  };
}
