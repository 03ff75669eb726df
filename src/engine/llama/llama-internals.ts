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
 * Reports every decode and sampling call of `context` to `onCall` once it settles. For the benchmark's step
 * profile, never the service. False when the library no longer has these calls.
 */
export function traceNativeCalls(context: LlamaContext, onCall: (call: NativeCall) => void): boolean {
  const native = (context as unknown as { _ctx?: Record<string, unknown> })._ctx;
  const calls = { decode: native?.decodeBatch, sample: native?.sampleToken } as const;
  if (native === undefined || typeof calls.decode !== "function" || typeof calls.sample !== "function")
    return false;
  try {
    for (const [kind, name] of [
      ["decode", "decodeBatch"],
      ["sample", "sampleToken"],
    ] as const) {
      const original = calls[kind] as (...args: unknown[]) => unknown;
      Object.defineProperty(native, name, {
        value: (...args: unknown[]) => {
          const start = performance.now();
          const settled = () => onCall({ kind, start, end: performance.now() });
          const result = Promise.resolve(original.apply(native, args));
          result.then(settled, settled);
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
