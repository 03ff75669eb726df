// What a choice's generator samples with: OpenAI's and vLLM's sampling parameters and the output control's token bias.
import {
  type LlamaModel,
  type SequenceEvaluateMetadataOptions,
  type SequenceEvaluateOptions,
  type Token,
  TokenBias,
} from "node-llama-cpp";
import type { SamplingParams } from "../types.js";
import { priorityOf } from "./batching.js";
import type { ChoiceStream } from "./choice-stream.js";
import { findBiasMap, setLogit } from "./llama-internals.js";
import type { OutputControl, PreparedOutput } from "./output-control.js";

export interface ChoiceSampling {
  model: LlamaModel;
  control: OutputControl;
  /** Every end-of-generation token of the vocabulary. */
  eogTokens: () => readonly Token[];
  /** The `topK` that leaves top-k out of the chain (`unboundedTopK`): OpenAI has no top-k. */
  noTopK: number;
}

/**
 * Options of `sequence.evaluate` for choice `choice` of a request whose prompt is `prompt`, generated on sequence
 * `sequenceId`.
 */
export function evaluateOptions(
  { model, control, eogTokens, noTopK }: ChoiceSampling,
  sampling: SamplingParams,
  prepared: PreparedOutput | undefined,
  choice: ChoiceStream,
  sequenceId: number,
  prompt: readonly Token[],
): SequenceEvaluateOptions {
  const repeatPenalty = penalties(sampling, prompt, choice);
  let tokenBias: TokenBias | (() => TokenBias) | undefined;
  const output = choice.output;
  const requested = sampling.logitBias;
  if (sampling.ignoreEos === true) {
    const bias = new TokenBias(model.tokenizer);
    for (const token of eogTokens()) bias.set(token, "never");
    tokenBias = withLogitBias(model, bias, requested);
  } else if (prepared !== undefined && output !== undefined) {
    // Read at every sampling: steers a reasoning block or a JSON structure closed as the budget runs out.
    tokenBias = () => withLogitBias(model, control.bias(prepared, output, choice.remaining), requested);
  } else if (requested !== undefined) {
    tokenBias = withLogitBias(model, new TokenBias(model.tokenizer), requested);
  }
  const grammarEvaluationState = output?.grammarState;
  return {
    temperature: sampling.temperature,
    topP: sampling.topP,
    // Without top_k (OpenAI has none) the whole vocabulary, unsorted. A draw needs no sort; top_p < 1 sorts only the
    // head it keeps, and temperature 0 is an argmax.
    topK: sampling.topK !== undefined && sampling.topK > 0 ? sampling.topK : noTopK,
    minP: engineMinP(sampling),
    seed: (sampling.seed + choice.index) >>> 0,
    yieldEogToken: true,
    evaluationPriority: priorityOf(sequenceId),
    ...(tokenBias === undefined ? {} : { tokenBias }),
    ...(grammarEvaluationState === undefined ? {} : { grammarEvaluationState }),
    ...(repeatPenalty === undefined ? {} : { repeatPenalty }),
  };
}

/**
 * Whether a generator with these options and metadata draws each token as an argmax over the model's logits and
 * nothing else: temperature 0 with no bias, grammar, penalty or other stage in the chain, and no probabilities
 * asked for. The step loop may then decode the choice itself and draw the argmax natively (direct steps).
 */
export function isArgmaxDraw(
  options: SequenceEvaluateOptions,
  metadata: SequenceEvaluateMetadataOptions,
): boolean {
  return (
    options.temperature === 0 &&
    options.tokenBias === undefined &&
    options.grammarEvaluationState === undefined &&
    options.repeatPenalty === undefined &&
    options.dryRepeatPenalty === undefined &&
    options.xtc === undefined &&
    metadata.probabilities !== true &&
    metadata.confidence !== true
  );
}

/**
 * vLLM's min_p keeps the tokens whose probability after temperature is at least min_p × the most likely one's:
 * (logit − max) / T ≥ ln(min_p). llama.cpp's chain compares the logits before its temperature stage
 * (logit − max ≥ ln(minP)), so the same set is kept with minP = min_p^T. Temperature 0 is an argmax either way.
 */
export function engineMinP(sampling: SamplingParams): number {
  const minP = sampling.minP ?? 0;
  return minP === 0 || sampling.temperature === 0 ? minP : minP ** sampling.temperature;
}

/**
 * llama.cpp's penalties sampler, which takes ONE token list for all three penalties, whereas vLLM applies
 * repetition_penalty over the prompt and the output and frequency/presence over the output only (as OpenAI
 * defines them). Each alone is exact: repetition over prompt + output, frequency/presence over the output. Both
 * together: the output only, so OpenAI's penalties keep their meaning (counting the prompt would penalise every
 * word of a long prompt) and the repetition penalty misses tokens that appear only in the prompt
 * (docs/compatibility.md). The list's bound is the prompt plus the whole budget (the library's default is 64
 * tokens), fixed so the library keeps its sampler and adds one token per step.
 */
export function penalties(
  sampling: SamplingParams,
  prompt: readonly Token[],
  choice: Pick<ChoiceStream, "generated" | "remaining">,
): SequenceEvaluateOptions["repeatPenalty"] {
  const repetition = sampling.repetitionPenalty ?? 1;
  const { frequencyPenalty, presencePenalty } = sampling;
  const openAi = frequencyPenalty !== 0 || presencePenalty !== 0;
  if (!openAi && repetition === 1) return undefined;
  const budget = choice.generated.length + choice.remaining;
  return {
    punishTokens: openAi ? () => choice.generated : () => [...prompt, ...choice.generated],
    maxPunishTokens: openAi ? budget : prompt.length + budget,
    penalty: repetition,
    frequencyPenalty,
    presencePenalty,
  };
}

/** The vocabulary's end-of-generation tokens, listed on first use (a scan of the whole vocabulary). */
export function lazyEogTokens(model: LlamaModel): () => readonly Token[] {
  let tokens: Token[] | undefined;
  return () => {
    if (tokens === undefined) {
      tokens = [];
      const vocabulary = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
      for (let t = 0; t < vocabulary; t++) if (model.isEogToken(t as Token)) tokens.push(t as Token);
    }
    return tokens;
  };
}

/**
 * `bias` plus the request's `logit_bias` (OpenAI adds each value to the token's logit; the two add up where both
 * name a token), as a new TokenBias: `bias` may be one the output control shares between requests. Without the
 * library's bias map `bias` cannot be read, and the output control's steering is kept over the request's bias.
 */
export function withLogitBias(
  model: LlamaModel,
  bias: TokenBias,
  requested: ReadonlyMap<number, number> | undefined,
): TokenBias {
  if (requested === undefined) return bias;
  const own = findBiasMap(bias);
  if (own === undefined) return bias;
  const combined = new TokenBias(model.tokenizer);
  for (const [token, value] of requested) setLogit(combined, token as Token, value);
  for (const [token, value] of own) setLogit(combined, token, value + (requested.get(token) ?? 0));
  return combined;
}
