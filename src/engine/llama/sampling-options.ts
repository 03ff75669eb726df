// What a choice's generator samples with: OpenAI's sampling parameters and the output control's token bias.
import { type LlamaModel, type SequenceEvaluateOptions, type Token, TokenBias } from "node-llama-cpp";
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

/** Options of `sequence.evaluate` for choice `choice` of a request, generated on sequence `sequenceId`. */
export function evaluateOptions(
  { model, control, eogTokens, noTopK }: ChoiceSampling,
  sampling: SamplingParams,
  prepared: PreparedOutput | undefined,
  choice: ChoiceStream,
  sequenceId: number,
): SequenceEvaluateOptions {
  const penalize = sampling.frequencyPenalty !== 0 || sampling.presencePenalty !== 0;
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
    // OpenAI has no top-k: the whole vocabulary, unsorted. A draw needs no sort; top_p < 1 sorts only the head it
    // keeps, and temperature 0 is an argmax.
    topK: noTopK,
    minP: 0,
    seed: (sampling.seed + choice.index) >>> 0,
    yieldEogToken: true,
    evaluationPriority: priorityOf(sequenceId),
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
