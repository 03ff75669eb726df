// What the completions service takes and gives: a validated request, who asks, and the admitted completion.
import type { Principal } from "../auth/principal.js";
import type {
  ChatMessage,
  Generation,
  OutputRequest,
  ReasoningEffort,
  SamplingParams,
} from "../engine/types.js";
import type { RateSnapshot } from "../limits/types.js";
import type { UsageEndpoint } from "../usage/types.js";

/** The sampling fields a request or a model's defaults may leave out, by their engine names. */
export interface SamplingFields {
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  repetitionPenalty?: number;
}

/**
 * The request's sampling: the fields a model's `defaults` may fill are absent when the request leaves them out
 * (temperature, top_p, top_k, min_p, repetition_penalty; max_tokens undefined).
 */
export type RequestedSampling = Omit<SamplingParams, "seed" | "temperature" | "topP"> &
  SamplingFields & { seed: number | undefined };

/** A chat completion request, validated by the API layer (wire-independent). */
export interface CompletionRequest {
  model: string;
  messages: ChatMessage[];
  n: number;
  /** `seed` undefined: the service draws a random one (the library's default would be the clock). */
  sampling: RequestedSampling;
  enableThinking: boolean;
  /** The client's `reasoning_effort` (already folded into `enableThinking`), for the template and upstreams. */
  reasoningEffort?: ReasoningEffort;
  /** JSON mode or tools: the reply is constrained (absent for free text). */
  output?: OutputRequest;
  /** The caller's id for its end user (OpenAI's `user`): recorded with the usage, forwarded to upstream engines. */
  user?: string;
  /** Prefix-cache reuse only between requests with the same salt (always within the organization). */
  cacheSalt?: string;
  /** OpenAI's `prompt_cache_key`: prefix affinity among the organization's requests with the same key. */
  promptCacheKey?: string;
  /** The `X-Session-Id` header: affinity of an upstream model's requests after `promptCacheKey` (docs/fleet.md). */
  sessionId?: string;
}

/** Who asks, and the request's life outside the engine. */
export interface CompletionCaller {
  principal: Principal;
  requestId: string;
  /** performance.now() when the request arrived: latency and time to first token count from here. */
  startedAt: number;
  /** Aborted when the client leaves: drops a queued request, cancels a running one. */
  signal: AbortSignal;
  /** The API endpoint the request came through, named in its usage record. Default `chat.completions`. */
  endpoint?: UsageEndpoint | undefined;
  /**
   * Ends the request's count as on its way to the engine (`Engine.expectRequest`, begun where it was received): called
   * as it is queued, or once it was refused. Idempotent.
   */
  arrived?: (() => void) | undefined;
}

/** An admitted completion: it holds its sequences, its charge is settled and its usage recorded when it ends. */
export interface Completion {
  generation: Generation;
  /** The rate-limit windows after this request was charged (the x-ratelimit-* headers). */
  rateLimit: RateSnapshot;
}
