// Response wire shapes of the OpenAI surface (completion, chunk, usage, model list) and their small pure builders.

import type { FinishReason, TokenLogprob, UsageCounts } from "../../engine/types.js";
import { idBytes } from "../../store/ids.js";

/** `function_call`: the legacy `functions` API's name for `tool_calls` (src/http/openai/legacy-functions.ts). */
export type WireFinishReason = FinishReason | "function_call";

/** The legacy `functions` API's one call (no id). */
export interface FunctionCall {
  name: string;
  arguments: string;
}

export interface Usage {
  prompt_tokens: number;
  /** Includes reasoning tokens. */
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  completion_tokens_details: { reasoning_tokens: number };
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ResponseMessage {
  role: "assistant";
  /** null only when the message carries tool_calls. */
  content: string | null;
  /** OpenAI always sends the field; Hearth never refuses, so it is always null. */
  refusal: null;
  /** Only when reasoning is enabled; never inside content. */
  reasoning?: string;
  tool_calls?: ToolCall[];
  /** Instead of tool_calls when the request used the legacy `functions`. */
  function_call?: FunctionCall;
}

export interface TopLogprob {
  token: string;
  logprob: number;
  /** The token's UTF-8 bytes: a token may hold part of a character, which `token` then shows as U+FFFD. */
  bytes: number[];
}

export interface WireTokenLogprob extends TopLogprob {
  /** The most likely tokens at this position, most likely first; `top_logprobs` of them (empty for 0). */
  top_logprobs: TopLogprob[];
}

/** With `logprobs: true`: the content's tokens (null when the message content is null); Hearth never refuses. */
export interface ChoiceLogprobs {
  content: WireTokenLogprob[] | null;
  refusal: null;
}

export interface Choice {
  index: number;
  message: ResponseMessage;
  /** null unless the request asked for `logprobs`. */
  logprobs: ChoiceLogprobs | null;
  finish_reason: WireFinishReason;
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  system_fingerprint: null;
  choices: Choice[];
  usage: Usage;
}

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function?: { name?: string; arguments?: string };
}

/** First chunk of a choice: role; then content (or reasoning) fragments; the finishing chunk's delta is empty. */
export interface ChunkDelta {
  role?: "assistant";
  /** null only in the first chunk of a reply that must be tool calls. */
  content?: string | null;
  reasoning?: string;
  tool_calls?: ToolCallDelta[];
  /** The legacy `functions` API's call: the name on the first fragment, then arguments. */
  function_call?: Partial<FunctionCall>;
}

export interface ChunkChoice {
  index: number;
  delta: ChunkDelta;
  /** With `logprobs`: on the chunks that carry content, its tokens; null on the others. */
  logprobs: ChoiceLogprobs | null;
  /** null on every chunk but the last of its choice. */
  finish_reason: WireFinishReason | null;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  system_fingerprint: null;
  /** Empty in the final usage chunk. */
  choices: ChunkChoice[];
  /** Only with stream_options.include_usage: null on every chunk except the final usage chunk. */
  usage?: Usage | null;
}

/** What every chunk and the body of one completion share. */
export interface CompletionMeta {
  /** Hearth's own `chatcmpl-` id. */
  id: string;
  /** Unix seconds. */
  created: number;
  /** The id the client asked for. */
  model: string;
}

export interface Model {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
  /** Hearth's addition: tokens per sequence, so clients can budget prompt + max_tokens. */
  context_length: number;
}

export interface ModelList {
  object: "list";
  data: Model[];
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A prefix plus `length` random base62 characters. */
function randomId(prefix: string, length: number): string {
  let id = prefix;
  while (id.length < prefix.length + length) {
    for (const byte of idBytes(length)) {
      // 248 = 4 × 62: bytes above it are skipped so every character is equally likely.
      if (byte < 248 && id.length < prefix.length + length) id += BASE62[byte % 62];
    }
  }
  return id;
}

/** `chatcmpl-` plus 29 random base62 characters, the length OpenAI's ids have. */
export function completionId(): string {
  return randomId("chatcmpl-", 29);
}

/** `call_` plus 24 random base62 characters, as OpenAI's tool call ids. */
export function toolCallId(): string {
  return randomId("call_", 24);
}

/** Engine logprobs → wire logprobs. */
export function toWireLogprobs(tokens: readonly TokenLogprob[]): WireTokenLogprob[] {
  return tokens.map((t) => ({
    token: t.token,
    logprob: t.logprob,
    bytes: t.bytes,
    top_logprobs: t.topLogprobs.map(({ token, logprob, bytes }) => ({ token, logprob, bytes })),
  }));
}

/** Engine counts → wire usage; reasoning tokens are part of completion_tokens and also reported apart. */
export function toUsage(counts: UsageCounts): Usage {
  return {
    prompt_tokens: counts.promptTokens,
    completion_tokens: counts.completionTokens,
    total_tokens: counts.promptTokens + counts.completionTokens,
    prompt_tokens_details: { cached_tokens: counts.cachedTokens },
    completion_tokens_details: { reasoning_tokens: counts.reasoningTokens ?? 0 },
  };
}

/** The engine's finish reason as the request's API names it: the legacy `functions` API says `function_call`. */
export function wireFinishReason(reason: FinishReason, legacyFunctions: boolean): WireFinishReason {
  return legacyFunctions && reason === "tool_calls" ? "function_call" : reason;
}
