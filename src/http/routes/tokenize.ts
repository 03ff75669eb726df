// POST /tokenize, at the server's root as vLLM's: a chat completion's prompt tokens as its model counts them
// (template, tools, the output's instructions), so a Hearth gateway in front of this server pre-charges an
// organization's TPM exactly (docs/fleet.md). The body is a chat completion's; nothing is generated.
import type { Context } from "hono";
import type { CompletionsService } from "../../completions/completions-service.js";
import type { ModelInfo } from "../../engine/types.js";
import type { AppEnv } from "../env.js";
import { InvalidRequestError } from "../errors/api-error.js";
import { clientLeftSignal, readBodyText } from "../node-request.js";
import {
  type ParseChatRequestOptions,
  type ParsedChatRequest,
  parseChatRequest,
} from "../openai/chat-request.js";
import { parseJsonBody } from "../validation.js";

export interface TokenizeDeps {
  completions: CompletionsService;
  models: () => ModelInfo[];
  limits: ParseChatRequestOptions & { maxBodyBytes: number };
}

/** vLLM's answer: `count` and the context (`max_model_len`); `estimated` only when no tokenizer could count. */
export interface TokenizeResponse {
  count: number;
  max_model_len: number;
  estimated?: true;
}

export async function tokenize(c: Context<AppEnv>, deps: TokenizeDeps): Promise<Response> {
  const read = async () =>
    parseTokenizeRequest(parseJsonBody(await readBodyText(c, deps.limits.maxBodyBytes)), deps.limits);
  const { count, request } = await deps.completions.countPromptTokens(read, {
    principal: c.get("principal"),
    requestId: c.get("requestId"),
    startedAt: performance.now(),
    signal: clientLeftSignal(c),
  });
  const contextSize = deps.models().find((m) => m.id === request.model)?.contextSize ?? 0;
  const body: TokenizeResponse = {
    count: count.tokens,
    max_model_len: contextSize,
    ...(count.exact ? {} : { estimated: true as const }),
  };
  return c.json(body);
}

/**
 * A chat completion's body, as /v1/chat/completions validates it, plus vLLM's `add_generation_prompt`: the count
 * is always of the prompt a completion would run, so only `true` is accepted.
 */
export function parseTokenizeRequest(body: unknown, options: ParseChatRequestOptions): ParsedChatRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new InvalidRequestError("The request body must be a JSON object.");
  }
  const { add_generation_prompt: addGenerationPrompt, ...chat } = body as Record<string, unknown>;
  if (addGenerationPrompt !== undefined && addGenerationPrompt !== null && addGenerationPrompt !== true) {
    throw new InvalidRequestError(
      "Invalid value for 'add_generation_prompt': only true is supported (the count is of the prompt a chat completion runs).",
      "add_generation_prompt",
    );
  }
  return parseChatRequest(chat, options);
}
