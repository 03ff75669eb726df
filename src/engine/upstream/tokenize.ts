// Counting a request's prompt tokens before it is sent (the TPM pre-charge): the engine's tokenize route, else an estimate.
import type { ChatMessage, GenerationRequest, OutputRequest } from "../types.js";
import { isRecord } from "./upstream-error.js";
import { type UpstreamKind, upstreamRequestBody } from "./wire.js";

/** One POST of a tokenize route; the caller does the fetch (JSON body, the endpoint's key) and calls `read`. */
export interface TokenizeCall {
  /** Absolute URL (tokenize routes live at the server's root, beside `/v1`). */
  url: string;
  body: Record<string, unknown>;
  /**
   * The response's JSON body → the prompt's token count, or the next call of the route (llama-server renders the
   * template, then tokenizes), or undefined when the body is not what the engine documents (use the estimate).
   */
  read(response: unknown): number | TokenizeCall | undefined;
}

export interface TokenizeRequestOptions {
  /** The endpoint's configured URL, e.g. `http://gpu1:8000/v1`. */
  endpointUrl: string;
  /** The name the endpoint serves. */
  model: string;
  request: GenerationRequest;
}

/**
 * How to count `request`'s prompt tokens on an endpoint of `kind`, undefined when the engine has no route for
 * it (use `estimatePromptTokens`):
 * - vLLM: `POST /tokenize` with the chat (`messages`, `tools`, `chat_template_kwargs`, the generation prompt
 *   added) → `count`.
 * - llama-server: `POST /apply-template` (its chat parser, so the same template and tools) → `prompt`, then
 *   `POST /tokenize` with `add_special` and `parse_special` as its chat path tokenizes → `tokens.length`.
 * - Hearth: `POST /tokenize` with the chat completion's own body (its output instructions count too) → `count`.
 * - SGLang documents no chat form of its tokenizer; Ollama and OpenAI have none: the estimate.
 */
export function tokenizeRequest(
  kind: UpstreamKind,
  options: TokenizeRequestOptions,
): TokenizeCall | undefined {
  const root = serverRoot(options.endpointUrl);
  const chat = upstreamRequestBody(options.request, { model: options.model, kind, cacheSalt: "" });
  const pick = (...fields: string[]) =>
    Object.fromEntries(
      fields.filter((field) => chat[field] !== undefined).map((field) => [field, chat[field]]),
    );
  switch (kind) {
    case "vllm":
      return {
        url: `${root}/tokenize`,
        body: {
          ...pick("model", "messages", "tools", "chat_template_kwargs"),
          add_generation_prompt: true,
        },
        read: readTokenizeResponse,
      };
    case "llama-server":
      return {
        url: `${root}/apply-template`,
        body: pick("messages", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs"),
        read: (response) => {
          if (!isRecord(response) || typeof response.prompt !== "string") return undefined;
          return {
            url: `${root}/tokenize`,
            body: { content: response.prompt, add_special: true, parse_special: true },
            read: readTokenizeResponse,
          };
        },
      };
    case "hearth":
      return { url: `${root}/tokenize`, body: chat, read: readTokenizeResponse };
    case "sglang":
    case "ollama":
    case "openai":
      return undefined;
    default:
      return kind satisfies never;
  }
}

/**
 * A tokenize answer → its count: vLLM's `count`, else the length of `tokens` (llama-server, vLLM). A Hearth node
 * that could only estimate says `estimated` (a gateway whose endpoint has no tokenizer): undefined, estimate here.
 */
export function readTokenizeResponse(response: unknown): number | undefined {
  if (!isRecord(response) || response.estimated === true) return undefined;
  const { count, tokens } = response;
  if (typeof count === "number" && Number.isInteger(count) && count >= 0) return count;
  return Array.isArray(tokens) ? tokens.length : undefined;
}

/** The server's root: the endpoint URL without a trailing slash and `/v1`. */
export function serverRoot(endpointUrl: string): string {
  return endpointUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
}

/** Tokens every message costs beyond its text: role markers and separators of chat templates. */
const TOKENS_PER_MESSAGE = 4;
/** The assistant turn the template opens for the reply. */
const REPLY_PRIMING_TOKENS = 3;
/** UTF-8 bytes per token assumed. */
const BYTES_PER_TOKEN = 3;

/**
 * A conservative estimate of the prompt's tokens when the engine cannot count them: one token per 3 UTF-8 bytes
 * of every text the template renders (contents, names, tool calls, tool definitions), plus 4 per message and 3
 * for the reply's opening. BPE tokenizers average about 4 bytes per token on English and code, so this overcounts
 * there by about a third; CJK text (3 bytes a character, about a token each) comes out about right. An estimate
 * only pre-charges the TPM limit: the usage the upstream reports settles the request exactly.
 */
export function estimatePromptTokens(messages: readonly ChatMessage[], output?: OutputRequest): number {
  let bytes = 0;
  for (const message of messages) {
    bytes += Buffer.byteLength(message.content, "utf8");
    if (message.name !== undefined) bytes += Buffer.byteLength(message.name, "utf8");
    if (message.toolCallId !== undefined) bytes += Buffer.byteLength(message.toolCallId, "utf8");
    for (const call of message.toolCalls ?? []) {
      bytes += Buffer.byteLength(call.name, "utf8") + Buffer.byteLength(call.arguments, "utf8");
    }
  }
  for (const tool of output?.tools ?? []) {
    bytes += Buffer.byteLength(
      JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters }),
      "utf8",
    );
  }
  return Math.ceil(bytes / BYTES_PER_TOKEN) + messages.length * TOKENS_PER_MESSAGE + REPLY_PRIMING_TOKENS;
}
