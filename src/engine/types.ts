// The Engine port: what the API asks of an inference engine, independent of HTTP, orgs and node-llama-cpp.
import type { CompiledSchema } from "../chat/schema/compiled-schema.js";
import type { SamplingDefaults } from "../config/sampling-defaults.js";
import type { Channel } from "./channel.js";

/** One message of the conversation, already validated by the API layer. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  /** tool messages: the call they answer. */
  toolCallId?: string;
  /** assistant messages: the calls it made. */
  toolCalls?: ToolCall[];
}

export interface ToolCall {
  id: string;
  name: string;
  /** JSON text, as the model wrote it (or the client sent it back). */
  arguments: string;
}

/**
 * A function the model may call. The API compiles each schema once, when it checks it is in the supported subset:
 * a local engine builds its grammar from the compiled form, an upstream engine forwards the raw one.
 */
export interface ToolDefinition {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
  /** `parameters` compiled (an object with any properties when absent). */
  compiledParameters: CompiledSchema;
}

export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | {
      type: "json_schema";
      name: string;
      schema: Record<string, unknown> | boolean;
      /** `schema` compiled by the API. */
      compiled: CompiledSchema;
    };

/**
 * `none`, `auto`, `required`; one named function (a call to it is required); or OpenAI's `allowed_tools`: only the
 * listed functions may be called (by grammar), with `mode` auto or required. Every tool is still shown to the model.
 */
export type ToolChoice =
  | "none"
  | "auto"
  | "required"
  | { name: string }
  | { allowed: readonly string[]; mode: "auto" | "required" };

/** Whether the reply must be tool calls: `required`, a named function, or allowed_tools in mode required. */
export function callsRequired(choice: ToolChoice | undefined): boolean {
  if (choice === undefined || typeof choice === "string") return choice === "required";
  return !("mode" in choice) || choice.mode === "required";
}

/** What the reply must look like; absent means free text. Enforced by grammar (src/chat/output/plan.ts). */
export interface OutputRequest {
  format: ResponseFormat;
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  /** false: at most one call. */
  parallelToolCalls: boolean;
}

export interface SamplingParams {
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  /**
   * vLLM's sampling extensions, each absent when neither the request nor the model's `defaults` set it (an embedded
   * model then leaves it out of sampling; an upstream engine is not sent it and applies its own default).
   * `topK`: the k most likely tokens only; 0 = no top-k. `minP`: only tokens at least minP × the most likely
   * token's probability (after temperature). `repetitionPenalty`: tokens of the prompt and the output so far have
   * positive logits divided by it and negative ones multiplied (1 = none).
   */
  topK?: number;
  minP?: number;
  repetitionPenalty?: number;
  frequencyPenalty: number;
  presencePenalty: number;
  /** Seed of choice 0; choice i uses seed + i. Always set (the API draws a random one when absent). */
  seed: number;
  /** Generated tokens per choice; undefined = up to the end of the sequence's context. */
  maxTokens: number | undefined;
  /**
   * The model's default `max_tokens` (its `defaults`), for a request that named none: at most this many tokens, fewer
   * when the context has less room after the prompt (vLLM's rule for its generation config), never a refusal.
   */
  defaultMaxTokens?: number;
  /** Up to 4 strings; generation stops before them and they never appear in the output. */
  stop: string[];
  /** Benchmarks only: never stop on an end-of-generation token. */
  ignoreEos?: boolean;
  /**
   * OpenAI's `logprobs`/`top_logprobs`: absent = no log probabilities; a number = report each content token's log
   * probability with that many (0–20) most likely alternatives.
   */
  logprobs?: number;
  /** OpenAI's `logit_bias`: token id → a value (−100..100) added to its logit before sampling. Absent = none. */
  logitBias?: ReadonlyMap<number, number>;
}

/** OpenAI's `reasoning_effort` values (openai-node 7.x `ReasoningEffort`). */
export const REASONING_EFFORTS = Object.freeze([
  "none",
  "minimal",
  "low",
  "medium",
  "high",
  "xhigh",
  "max",
] as const);
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

export interface GenerationRequest {
  model: string;
  messages: ChatMessage[];
  enableThinking: boolean;
  /**
   * The client's `reasoning_effort`, already folded into `enableThinking` by the API (none/minimal: off, else on).
   * Passed to the chat template as `reasoning_effort` and forwarded to upstream engines in their dialect.
   */
  reasoningEffort?: ReasoningEffort;
  n: number;
  sampling: SamplingParams;
  /**
   * The organization. Prefix-cache scope (cached tokens are never reused across scopes) and fairness key of
   * the queue (turns, places and the sequence share are per scope: src/engine/fair-queue.ts).
   */
  cacheScope: string;
  /**
   * Narrows the prefix-cache scope within `cacheScope` (vLLM's `cache_salt`): cached tokens are reused only between
   * requests with the same salt. Fairness stays per `cacheScope`.
   */
  cacheSalt?: string;
  /**
   * OpenAI's `prompt_cache_key`: requests with the same key (within `cacheScope`, never across organizations)
   * are routed to the same endpoint and prefer the same embedded slot, so their shared prefix stays cached.
   */
  promptCacheKey?: string;
  /**
   * The client's `X-Session-Id` header: routes the session's requests to one endpoint (within `cacheScope`) when no
   * `promptCacheKey` was sent. Routing only: engines never see it.
   */
  sessionId?: string;
  /** JSON mode, tools: the reply is grammar-constrained. Absent: free text. */
  output?: OutputRequest;
  /** OpenAI's `user` (the caller's end-user id): upstream engines receive it; it never changes what is generated. */
  user?: string;
  /** The HTTP request's id, for log lines only: an engine's warn line about this request names it. */
  requestId?: string;
  /**
   * Whether `prepare` must count the prompt exactly (a TPM pre-charge, whose organization has a tokens limit). False:
   * an engine that would have to ask another server for the count (an upstream's tokenize route, a round trip)
   * may estimate instead; the usage the generation reports settles it. Absent: exactly.
   */
  exactPromptCount?: boolean;
  /**
   * Aborting while queued drops the request (`enqueue` rejects with RequestAbortedError, nothing generated);
   * aborting later cancels generation and frees its sequences at once (the last event is still `usage`).
   */
  signal?: AbortSignal;
}

/**
 * A request the engine has rendered, tokenized and checked against its context (`Engine.prepare`): what the
 * caller needs to charge it before it is queued. Engines subclass it with what they keep for `enqueue`.
 */
export interface PreparedRequest {
  readonly request: GenerationRequest;
  readonly promptTokens: number;
  /** Tokens each choice may generate: `max_tokens`, or the rest of the context when absent. */
  readonly maxTokensPerChoice: number;
}

/** A prompt's token count, and whether a tokenizer counted it (else it is an estimate that errs on the large side). */
export interface PromptCount {
  tokens: number;
  exact: boolean;
}

export type FinishReason = "stop" | "length" | "tool_calls";

export interface UsageCounts {
  promptTokens: number;
  /** Every generated token, reasoning included. */
  completionTokens: number;
  /** Prompt tokens not evaluated because a sequence already held them. */
  cachedTokens: number;
  /** Generated tokens that belong to the reasoning block (absent = 0). */
  reasoningTokens?: number;
}

/**
 * Where a delta's text belongs: absent = the reply's content; `reasoning`; or a tool call's arguments (the first
 * fragment of a call carries its name and usually empty text).
 */
export type DeltaTarget = { kind: "reasoning" } | { kind: "tool_call"; call: number; name?: string };

/** A token as OpenAI's logprobs show it: its text, its UTF-8 bytes (a token may hold part of a character). */
export interface TokenText {
  token: string;
  bytes: number[];
}

/**
 * The lowest logprob reported, OpenAI's value for a token of negligible probability: JSON has no -Infinity, which a
 * probability that underflowed float32 (or a token the grammar or a -100 bias ruled out) would otherwise give.
 */
export const LOGPROB_FLOOR = -9999;

/** A candidate token at one position, with its log probability. */
export interface TokenAlternative extends TokenText {
  logprob: number;
}

/** One generated token with its log probability and the `top` most likely tokens at its position. */
export interface TokenLogprob extends TokenAlternative {
  topLogprobs: TokenAlternative[];
}

export type GenerationEvent =
  | {
      type: "delta";
      choice: number;
      text: string;
      target?: DeltaTarget;
      /**
       * With `sampling.logprobs`: the content tokens this delta's text came from (content deltas only; may be empty
       * when the text was held back by an earlier token, e.g. a stop string that did not match).
       */
      logprobs?: TokenLogprob[];
    }
  | {
      type: "finish";
      choice: number;
      reason: FinishReason;
      /** The structured output failed its post-generation check (a grammar bug): why, for the log. */
      invalid?: string;
    }
  | { type: "usage"; usage: UsageCounts };

/**
 * An admitted request, holding its sequences. Iterate `events` once; the last event is always `usage` (unless
 * the stream fails), also after a cancel mid-generation (the tokens actually generated). `events.observe` sees
 * every event as the engine pushes it, whether or not anyone reads the stream (accounting uses it).
 */
export interface Generation {
  readonly promptTokens: number;
  readonly events: Channel<GenerationEvent>;
}

export interface ModelInfo {
  id: string;
  contextSize: number;
  created: number;
  /** The model's sampling defaults (hearth.yaml `defaults`), applied to the fields a request leaves out. */
  defaults?: SamplingDefaults;
}

/** One endpoint of an upstream model right now. `url` has no credentials (keys travel in headers). */
export interface EndpointHealth {
  url: string;
  healthy: boolean;
  /** Requests it is serving now. */
  inFlight: number;
  /** Since start: attempts sent to it, attempts moved from it to another endpoint, and ejections. */
  requests: number;
  retries: number;
  ejections: number;
  /** The last failure that ejected it, in words (no upstream internals beyond status and message). */
  lastError?: string;
  /**
   * Since start: prompt tokens of the streams it served with reported usage, and how many of those it took from its
   * prefix cache (its hit rate is their ratio).
   */
  promptTokens: number;
  cachedTokens: number;
}

/**
 * Why the gateway moved a conversation's pin (src/engine/upstream/cache-affinity.ts): its endpoint lost the cached
 * prefix (restart, eviction; the pin stays), was down, or was busy (over its load bound, full, or answered busy).
 */
export const REPIN_REASONS = Object.freeze(["cache_lost", "endpoint_down", "endpoint_busy"] as const);
export type RepinReason = (typeof REPIN_REASONS)[number];

/** Where an embedded model is in its lifecycle (its ModelSlot in src/engine/llama/llama-engine.ts). */
export const MODEL_STATES = Object.freeze([
  "unloaded",
  "downloading",
  "loading",
  "ready",
  "unloading",
  "failed",
] as const);
export type ModelState = (typeof MODEL_STATES)[number];

/** How far an embedded model's download and load have come (the last ones, while unloaded). */
export interface ModelProgress {
  /** Bytes of the model file fetched so far, and the total when known (0/absent: it was in the cache). */
  downloadedBytes: number;
  totalBytes?: number;
  /** llama.cpp's load progress, 0..1. */
  load: number;
}

/** What loading an embedded model takes, by node-llama-cpp's own resolvers (model + its context). */
export interface MemoryEstimate {
  ramBytes: number;
  vramBytes: number;
}

/** One model's health right now: `/health` and `hearth models list`. */
export interface ModelHealth {
  model: string;
  /** Can serve now: loaded (embedded), or at least one healthy endpoint (upstream). */
  ready: boolean;
  /** Why not, in words, when not ready. */
  detail?: string;
  /** Embedded models: where the model is in its lifecycle, with progress and the memory it takes. */
  state?: ModelState;
  progress?: ModelProgress;
  memory?: MemoryEstimate;
  /** Embedded models: why the last load failed. */
  error?: string;
  /** Upstream models: each endpoint. */
  endpoints?: EndpointHealth[];
  /** Upstream models: conversations re-pinned since start, by reason. */
  repins?: Readonly<Record<RepinReason, number>>;
  /** Embedded models once loaded: layers offloaded to the GPU (0 on the CPU). */
  gpuLayers?: number;
  /** Embedded models once loaded: the llama.cpp build that serves them. */
  engineBuild?: EngineBuildState["build"];
}

/** Which llama.cpp build serves the embedded models, as /health and `hearth models list` show it. */
export interface EngineBuildState {
  /** "tuned": Hearth's build for this CPU; "prebuilt": node-llama-cpp's binaries. */
  build: "tuned" | "prebuilt";
  /** The tuned build's key (also when it is missing: the one that would serve). */
  key?: string;
  /** Why the prebuilt binaries serve, when the tuned build was wanted. */
  reason?: string;
  /** The tuned build was wanted and the engine cache does not have it (a background build can make it). */
  missing?: boolean;
}

/** What the embedded engine computes on: node-llama-cpp's backend, and on a GPU its memory (bytes). */
export interface AcceleratorState {
  /** The backend node-llama-cpp loaded: a GPU type, or false for the CPU. */
  gpu: "cuda" | "vulkan" | "metal" | false;
  /** Which llama.cpp build serves: Hearth's tuned CPU build or node-llama-cpp's prebuilt binaries. */
  build: EngineBuildState;
  /** On a GPU: VRAM of all devices together, as llama.cpp reports it. */
  vram?: { total: number; used: number; free: number };
}

/** One model's load right now (the metrics gauges). */
export interface ModelLoad {
  model: string;
  /** Sequences (slots) of the model's context. */
  parallel: number;
  busySequences: number;
  /** Requests waiting for sequences. */
  queueDepth: number;
}

export interface Engine {
  /** Every configured model, loaded or not. */
  listModels(): ModelInfo[];
  /** True once every model can serve (embedded: loaded; upstream: at least one healthy endpoint). */
  isReady(): boolean;
  /** Each model's health, in `listModels` order. */
  health(): ModelHealth[];
  /**
   * One model's health for a request about to use it: an embedded model that is unloaded starts loading now (on
   * demand), and the request is told to come back (503). Absent: `health()` is read instead.
   */
  demand?(model: string): ModelHealth | undefined;
  /**
   * Renders and tokenizes the prompt, checks it and the output budget against the model's context and compiles
   * the output grammar. Queues nothing and holds nothing. Rejects with errors from engine/errors.ts: unknown
   * model, context overflow, too many choices.
   */
  prepare(request: GenerationRequest): Promise<PreparedRequest>;
  /**
   * A request is on its way, its model not yet known (received by the HTTP edge, its body not yet read); the
   * returned function says it was queued or refused (idempotent). The embedded engine's step loops wait a bounded
   * moment for requests on their way before a step that starts others (requests sent together start together).
   * Absent: nothing waits for them.
   */
  expectRequest?(): () => void;
  /**
   * The prompt's tokens as `prepare` would count them (template, tools, output instructions), without checking the
   * context or compiling anything: the tokenize route. `exact` is false when only an estimate could be made (an
   * upstream without a tokenize route).
   */
  countPromptTokens(request: GenerationRequest): Promise<PromptCount>;
  /**
   * Queues a request this engine prepared; resolves once it has left the queue with its sequences leased.
   * Rejects before anything is generated: queue full (at once), queue timeout (after the model's
   * `queueTimeoutMs`), request aborted (the signal aborted while queued).
   */
  enqueue(prepared: PreparedRequest): Promise<Generation>;
  /** Stops admitting (new requests are refused as queue full); resolves when every admitted request finished. */
  drain(): Promise<void>;
  /** Every loaded model's sequences and queue right now. */
  modelLoad(): ModelLoad[];
  /** The embedded engine's backend once started; engines that compute nothing here do not have it. */
  accelerator?(): Promise<AcceleratorState | undefined>;
  dispose(): Promise<void>;
}
