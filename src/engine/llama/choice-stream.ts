// One choice's output: sampled tokens → text (UTF-8, stop strings, output parser) → delta and finish events.
import type { Token } from "node-llama-cpp";
import type { OutputPart } from "../../chat/output/parser.js";
import type { GenerationPlan } from "../../chat/output/plan.js";
import { StopMatcher } from "../../chat/output/stop-matcher.js";
import { type Detokenizer, Utf8TokenDecoder } from "../../chat/output/utf8.js";
import type { FinishReason, GenerationEvent, TokenLogprob, UsageCounts } from "../types.js";
import type { ChoiceOutput } from "./output-control.js";
import type { SampledToken, TokenLogprobs } from "./token-logprobs.js";

export interface ChoiceStreamOptions {
  index: number;
  /** The model (its detokenizer and end-of-generation tokens). */
  model: Detokenizer & { isEogToken(token: Token): boolean };
  stop: readonly string[];
  /** Benchmarks: an end-of-generation token is text like any other. */
  ignoreEos: boolean;
  /** Tokens the choice may generate; it finishes with "length" at the last one. */
  maxTokens: number;
  /** Structured output / reasoning: the request's plan and this choice's parser state; absent for free text. */
  structured: { plan: GenerationPlan; output: ChoiceOutput } | undefined;
  emit: (event: GenerationEvent) => void;
  /** With `logprobs`: turns each sampled token into its entry; absent, content deltas carry no logprobs. */
  logprobs?: TokenLogprobs;
}

export class ChoiceStream {
  readonly index: number;
  /** Every token sampled so far (the completion tokens; the repeat penalties read them). */
  readonly generated: Token[] = [];
  private done = false;
  private readonly decoder: Utf8TokenDecoder;
  private readonly stop: StopMatcher;
  /** Logprobs of content tokens whose text has not come out yet (held by the decoder, parser or stop matcher). */
  private pending: TokenLogprob[] = [];

  constructor(private readonly options: ChoiceStreamOptions) {
    this.index = options.index;
    this.decoder = new Utf8TokenDecoder(options.model);
    this.stop = new StopMatcher(options.stop);
  }

  get finished(): boolean {
    return this.done;
  }

  /** The parser state of a structured choice (budget steering reads it). */
  get output(): ChoiceOutput | undefined {
    return this.options.structured?.output;
  }

  get reasoningTokens(): number {
    return this.output?.reasoningTokens ?? 0;
  }

  /** Tokens left in the budget. */
  get remaining(): number {
    return this.options.maxTokens - this.generated.length;
  }

  /**
   * The next sampled token (with what the sampler said of it, for logprobs); undefined when the generator ended.
   * Ignored once the choice finished.
   */
  push(token: Token | undefined, sample?: SampledToken): void {
    if (this.done) return;
    const { model, ignoreEos } = this.options;
    if (token === undefined || (model.isEogToken(token) && !ignoreEos)) {
      this.finish("stop");
      return;
    }
    this.generated.push(token);
    const text = this.decoder.push(token);
    const output = this.output;
    // A reasoning token (counted as one in usage) is never a content token, nor is its logprob reported.
    if (this.options.logprobs !== undefined && sample !== undefined && output?.parser.inReasoning !== true) {
      this.pending.push(this.options.logprobs.of(sample));
    }
    let stopped: boolean;
    if (output === undefined) {
      stopped = this.emitContent(text);
    } else {
      if (output.parser.inReasoning) output.reasoningTokens++;
      output.tail = (output.tail + text).slice(-16);
      stopped = this.emitParts(output.parser.push(text));
    }
    if (stopped) {
      this.finish("stop", false);
    } else if (this.generated.length >= this.options.maxTokens) {
      this.finish("length");
    }
  }

  /**
   * Ends the choice with its finish event. `flush`: emit the text still held (decoder, parser, stop matcher);
   * false when a stop string ended it (nothing after the stop string is ever output).
   */
  private finish(reason: FinishReason, flush = true): void {
    this.done = true;
    const output = this.output;
    let stoppedByString = !flush;
    if (flush) {
      const text = this.decoder.flush();
      if (output === undefined) stoppedByString = this.emitContent(text);
      else stoppedByString = this.emitParts([...output.parser.push(text), ...output.parser.finish()]);
      const rest = stoppedByString ? "" : this.stop.flush();
      if (rest.length > 0) this.options.emit(this.contentDelta(rest));
    }
    // Tokens whose text never came out (a stop string, a tool call's closing markup) are not reported.
    this.pending = [];
    let finalReason = reason;
    let invalid: string | undefined;
    const plan = this.options.structured?.plan;
    if (output !== undefined && plan !== undefined && !stoppedByString) {
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
    this.options.emit({
      type: "finish",
      choice: this.index,
      reason: finalReason,
      ...(invalid === undefined ? {} : { invalid }),
    });
  }

  /** A content delta, carrying the logprobs of the tokens not yet reported (with logprobs on). */
  private contentDelta(text: string): GenerationEvent {
    if (this.options.logprobs === undefined) return { type: "delta", choice: this.index, text };
    const logprobs = this.pending;
    this.pending = [];
    return { type: "delta", choice: this.index, text, logprobs };
  }

  /** Content through the stop matcher; true when a stop string ended the choice. */
  private emitContent(text: string): boolean {
    const { emit, stopped } = this.stop.push(text);
    if (emit.length > 0) this.options.emit(this.contentDelta(emit));
    return stopped;
  }

  /** Parsed parts as events. Stop strings apply to free-text content only: cutting JSON or a call would break it. */
  private emitParts(parts: readonly OutputPart[]): boolean {
    const structured = this.options.structured?.plan.parser.json === true;
    const choice = this.index;
    const emit = this.options.emit;
    for (const part of parts) {
      switch (part.kind) {
        case "content":
          if (structured) emit(this.contentDelta(part.text));
          else if (this.emitContent(part.text)) return true;
          break;
        case "reasoning":
          this.pending = [];
          emit({ type: "delta", choice, text: part.text, target: { kind: "reasoning" } });
          break;
        case "tool_call":
          this.pending = [];
          emit({
            type: "delta",
            choice,
            text: "",
            target: { kind: "tool_call", call: part.call, name: part.name },
          });
          break;
        case "tool_arguments":
          this.pending = [];
          emit({ type: "delta", choice, text: part.text, target: { kind: "tool_call", call: part.call } });
          break;
        default:
          part satisfies never;
      }
    }
    return false;
  }
}

/** A request's usage from its choices: every generated token, reasoning included. */
export function usageOf(
  promptTokens: number,
  cachedTokens: number,
  choices: readonly ChoiceStream[],
): UsageCounts {
  return {
    promptTokens,
    completionTokens: choices.reduce((sum, c) => sum + c.generated.length, 0),
    cachedTokens,
    reasoningTokens: choices.reduce((sum, c) => sum + c.reasoningTokens, 0),
  };
}
