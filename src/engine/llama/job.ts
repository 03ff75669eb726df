// One request inside a runner, from the queue to its usage event: its prompt, lease, choices and stream.
import type { Token } from "node-llama-cpp";
import { cacheScopeOf, scopedCacheKey } from "../cache-scope.js";
import { Channel } from "../channel.js";
import type { Generation, GenerationEvent, GenerationRequest } from "../types.js";
import type { Admittable } from "./admission.js";
import type { ChoiceStream } from "./choice-stream.js";
import type { PreparedOutput } from "./output-control.js";
import type { LlamaPreparedRequest } from "./prepared-request.js";
import type { SlotChoice } from "./slot-choice.js";
import type { SampledToken } from "./token-logprobs.js";

/** A choice's generator (`sequence.evaluateWithMetadata`): each sampled token, with logprob metadata when asked. */
export type TokenGenerator = AsyncGenerator<SampledToken, void, undefined | Token | Token[]>;

/** A choice being generated: its sequence, its output stream and how its tokens are drawn. */
export interface Choice {
  sequenceId: number;
  stream: ChoiceStream;
  /** What its next evaluation appends to its sequence: the prompt's rest at first, then its last sampled token. */
  input: Token[];
  /** Its draw is an argmax over the logits alone (`isArgmaxDraw`): a direct step may decode and draw it. */
  argmax: boolean;
  /** Its node-llama-cpp generator: opened (`open`) at a step through the library, closed before a direct step. */
  generator: TokenGenerator | undefined;
  /** A generator whose first evaluation is `tokens`, with the choice's sampling options. */
  open: (tokens: Token[]) => TokenGenerator;
}

/** Settles `enqueue`: resolved when the job leaves the queue with its sequences, rejected when it never will. */
export interface Settle {
  resolve: (generation: Generation) => void;
  reject: (error: Error) => void;
}

export class Job implements Admittable {
  readonly request: GenerationRequest;
  readonly prompt: Token[];
  readonly maxTokens: number;
  readonly output: PreparedOutput | undefined;
  readonly channel = new Channel<GenerationEvent>();
  state: "queued" | "prefill" | "decode" | "done" = "queued";
  lease: SlotChoice | undefined;
  /** Next prompt index to prefill; the prompt's last token is evaluated by the generators. */
  prefillPos = 0;
  choices: Choice[] = [];
  cachedTokens = 0;
  /** The primary sequence was trimmed to the reusable prefix. */
  prepared = false;
  /** Stop at the next step (client gone, or an evaluation failed): free the sequences, report usage. */
  cancelled = false;
  /** While running: the signal's listener that cancels the job. */
  onAbort: (() => void) | undefined;

  /** The request's prompt_cache_key within its scope (undefined without one): which slot it prefers. */
  readonly cacheKey: string | undefined;

  constructor(
    prepared: LlamaPreparedRequest,
    readonly settle: Settle,
  ) {
    this.request = prepared.request;
    this.prompt = prepared.prompt;
    this.maxTokens = prepared.maxTokensPerChoice;
    this.output = prepared.output;
    this.cacheKey = scopedCacheKey(this.request);
  }

  /** The prefix-cache scope: the organization, narrowed by its salt when the client sent one. */
  get scope(): string {
    return cacheScopeOf(this.request);
  }

  /** The fairness key: the organization (a salt never buys another share of the queue). */
  get tenant(): string {
    return this.request.cacheScope;
  }

  get n(): number {
    return this.request.n;
  }

  get signal(): AbortSignal | undefined {
    return this.request.signal;
  }
}
