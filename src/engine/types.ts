// The Engine port: what the API asks of an inference engine, independent of HTTP, orgs and node-llama-cpp.

/** One message of the conversation, already validated by the API layer. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  /** tool messages: the call they answer. */
  toolCallId?: string;
}

export interface SamplingParams {
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  frequencyPenalty: number;
  presencePenalty: number;
  /** Seed of choice 0; choice i uses seed + i. Always set (the API draws a random one when absent). */
  seed: number;
  /** Generated tokens per choice; undefined = up to the end of the sequence's context. */
  maxTokens: number | undefined;
  /** Up to 4 strings; generation stops before them and they never appear in the output. */
  stop: string[];
  /** Benchmarks only: never stop on an end-of-generation token. */
  ignoreEos?: boolean;
}

export interface GenerationRequest {
  model: string;
  messages: ChatMessage[];
  enableThinking: boolean;
  n: number;
  sampling: SamplingParams;
  /** Prefix-cache scope (the organization): cached tokens are never reused across scopes. */
  cacheScope: string;
  /** Aborting cancels generation (or drops the request from the queue) and frees its sequences at once. */
  signal?: AbortSignal;
}

export type FinishReason = "stop" | "length";

export interface UsageCounts {
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens not evaluated because a sequence already held them. */
  cachedTokens: number;
}

export type GenerationEvent =
  | { type: "delta"; choice: number; text: string }
  | { type: "finish"; choice: number; reason: FinishReason }
  | { type: "usage"; usage: UsageCounts };

/** An admitted request. Iterate `events` once; the last event is always `usage` (unless the iterator throws). */
export interface Generation {
  readonly promptTokens: number;
  readonly events: AsyncIterable<GenerationEvent>;
}

export interface ModelInfo {
  id: string;
  contextSize: number;
  created: number;
}

export interface Engine {
  /** Every configured model, loaded or not. */
  listModels(): ModelInfo[];
  /** True once every model is loaded. */
  isReady(): boolean;
  /**
   * Renders and tokenizes the prompt and admits the request. Throws synchronously-rejected errors from
   * engine/errors.ts (unknown model, context overflow, queue full) before anything is generated.
   */
  generate(request: GenerationRequest): Promise<Generation>;
  dispose(): Promise<void>;
}
