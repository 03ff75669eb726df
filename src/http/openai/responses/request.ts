// Parses a POST /v1/responses body: the Responses wire schema, its refusals, and its translation into the chat
// request the chat parser checks (one set of guarantees for both endpoints), with each 400 named as sent here.
import { z } from "zod";
import type { ResponsesConfig } from "../../../config/responses-settings.js";
import { inputBoundExceeded } from "../../../responses/bounds.js";
import { ApiError, InvalidRequestError } from "../../errors/api-error.js";
import { validate } from "../../validation.js";
import { type ParseChatRequestOptions, type ParsedChatRequest, parseChatRequest } from "../chat-request.js";
import {
  type ChatWireMessage,
  dropNullFields,
  type InputItem,
  type ItemPlaces,
  inputItemSchema,
  itemsToMessages,
  type MessageOrigin,
  messageParam,
  type ResolvedItem,
} from "./input-items.js";

/** OpenAI's `include` values: none changes what Hearth returns (it has no hosted tools, logprobs stay empty). */
const INCLUDABLE = [
  "file_search_call.results",
  "web_search_call.results",
  "web_search_call.action.sources",
  "message.input_image.image_url",
  "computer_call_output.output.image_url",
  "code_interpreter_call.outputs",
  "reasoning.encrypted_content",
  "message.output_text.logprobs",
] as const;

const notSupported = (field: string, why: string) => `The '${field}' parameter is not supported: ${why}`;

/** A field refused whenever present (null is absent). */
const refusedField = (message: string) =>
  z
    .unknown()
    .superRefine((_, ctx) => ctx.addIssue({ code: "custom", message }))
    .optional();

/** Built-in tools OpenAI runs on its side; Hearth runs none, so each is a 400 naming `tools[i].type`. */
const builtInTool = (type: string) =>
  `Tools of type '${type}' are not supported: Hearth runs no built-in tools (web search, file search, code ` +
  `interpreter, computer use, image generation, MCP, shell). Declare your own functions as {"type": "function", "name": ...}.`;

const functionTool = z.strictObject({
  type: z.literal("function"),
  name: z.string(),
  description: z.string().optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  strict: z.boolean().optional(),
  // Tool-search loading and callers are OpenAI's hosted features: accepted as sent, without effect.
  defer_loading: z.boolean().optional(),
  allowed_callers: z.array(z.string()).optional(),
  output_schema: z.record(z.string(), z.unknown()).optional(),
});

const toolSchema = z.preprocess(
  dropNullFields,
  z
    .looseObject({ type: z.string() })
    .superRefine((tool, ctx) => {
      if (tool.type !== "function")
        ctx.addIssue({ code: "custom", path: ["type"], message: builtInTool(tool.type) });
    })
    .pipe(functionTool),
);

const textSchema = z.strictObject({
  format: z.unknown().optional(),
  // Accepted and ignored, as in chat (`verbosity` tunes OpenAI's reasoning models).
  verbosity: z.enum(["low", "medium", "high"]).optional(),
});

const reasoningSchema = z.strictObject({
  effort: z.unknown().optional(),
  // Hearth returns the reasoning text itself (`content`), never a summary: `summary` is accepted and ignored.
  summary: z.enum(["auto", "concise", "detailed"]).optional(),
  generate_summary: z.enum(["auto", "concise", "detailed"]).optional(),
});

const responsesRequestSchema = z.preprocess(
  dropNullFields,
  z.strictObject({
    model: z.string().min(1),
    input: z.union([z.string(), z.array(inputItemSchema)]).optional(),
    instructions: z.string().optional(),
    tools: z.array(toolSchema).optional(),
    tool_choice: z.unknown().optional(),
    parallel_tool_calls: z.boolean().optional(),
    max_tool_calls: z.int().min(0).optional(),
    text: z.preprocess(dropNullFields, textSchema).optional(),
    reasoning: z.preprocess(dropNullFields, reasoningSchema).optional(),
    // Checked by the chat parser under their chat names (max_completion_tokens, ...), then named back.
    max_output_tokens: z.unknown().optional(),
    temperature: z.unknown().optional(),
    top_p: z.unknown().optional(),
    top_logprobs: z.int().min(0).max(20).optional(),
    metadata: z.unknown().optional(),
    user: z.unknown().optional(),
    safety_identifier: z.unknown().optional(),
    prompt_cache_key: z.unknown().optional(),
    prompt_cache_retention: z.unknown().optional(),
    prompt_cache_options: z.unknown().optional(),
    service_tier: z.unknown().optional(),
    moderation: z.unknown().optional(),
    // Codex sends its turn, session and installation ids here on every request: accepted, never stored or used.
    client_metadata: z.record(z.string(), z.unknown()).optional(),
    // `auto` is accepted and behaves as `disabled`: an input that does not fit is a 400 (docs/responses.md).
    truncation: z.enum(["auto", "disabled"]).optional(),
    store: z.boolean().optional(),
    stream: z.boolean().optional(),
    stream_options: z
      .preprocess(dropNullFields, z.strictObject({ include_obfuscation: z.boolean().optional() }))
      .optional(),
    include: z.array(z.enum(INCLUDABLE)).optional(),
    background: z
      .boolean()
      .refine((background) => !background, {
        message: notSupported(
          "background",
          "Hearth answers every response in the request that asks for it; send false or leave it out.",
        ),
      })
      .optional(),
    previous_response_id: z.string().min(1).max(256).optional(),
    conversation: refusedField(
      notSupported(
        "conversation",
        "Hearth keeps no conversation objects; continue with 'previous_response_id'.",
      ),
    ),
    prompt: refusedField(
      notSupported("prompt", "Hearth has no stored prompt templates; send 'instructions' and 'input'."),
    ),
    context_management: refusedField(
      notSupported("context_management", "Hearth does not compact conversations."),
    ),
  }),
);

export type ResponsesRequestBody = z.output<typeof responsesRequestSchema>;

export interface ParseResponsesOptions extends ParseChatRequestOptions {
  /** Input items and stored bytes per request at most (hearth.yaml `responses:`; a 400 naming `input` beyond). */
  responses: Pick<ResponsesConfig, "maxInputItems" | "maxStoredBytes">;
}

/** The wire body validated, its items, before the conversation of a `previous_response_id` is known. */
export interface ResponsesBody {
  body: ResponsesRequestBody;
  /** This request's own items (`input` as a string is one user message); references not yet resolved. */
  items: InputItem[];
}

/** Validates the body's shape and bounds; nothing here renders, tokenizes or compiles. */
export function parseResponsesBody(raw: unknown, options: ParseResponsesOptions): ResponsesBody {
  if (!isRecord(raw)) throw new InvalidRequestError("The request body must be a JSON object.");
  // Before validating the items: how many there are bounds the work of everything after.
  const exceeded = inputBoundExceeded(raw.input, options.responses);
  if (exceeded !== undefined) throw new InvalidRequestError(exceeded.message, exceeded.param);
  const body = validate(raw, responsesRequestSchema);
  const input = body.input ?? [];
  const items: InputItem[] =
    typeof input === "string" ? [{ type: "message", role: "user", content: input }] : input;
  return { body, items };
}

/** The completions service's request, plus what the Responses reply needs: the body and its resolved items. */
export interface ParsedResponsesRequest extends ParsedChatRequest {
  responses: { body: ResponsesRequestBody; items: ResolvedItem[] };
}

/**
 * The Responses request as a chat request, checked by the chat parser; a 400 from it names the Responses field
 * (`messages[3].content` → `input[2].content`, `response_format` → `text.format`). `history`: the items of the
 * `previous_response_id` conversation, oldest first (their instructions are not carried over, as at OpenAI).
 */
export function parseResponsesRequest(
  parsed: { body: ResponsesRequestBody; items: ResolvedItem[] },
  history: readonly ResolvedItem[],
  options: ParseResponsesOptions,
): ParsedResponsesRequest {
  const { body, items } = parsed;
  const { messages, origins } = itemsToMessages([...history, ...items]);
  const places: ItemPlaces = { history: history.length, inputString: typeof body.input === "string" };
  const allOrigins: MessageOrigin[] = [...origins];
  const chatMessages: ChatWireMessage[] = [...messages];
  // The input string is the one item after the history: its message is the last.
  if (places.inputString) allOrigins[origins.length - 1] = { kind: "input" };
  if (body.instructions !== undefined) {
    chatMessages.unshift({ role: "system", content: body.instructions });
    allOrigins.unshift({ kind: "instructions" });
  }
  if (chatMessages.length === 0) {
    throw new InvalidRequestError("Missing required parameter: 'input'.", "input");
  }
  const chat = chatBody(body, chatMessages);
  try {
    return { ...parseChatRequest(chat, options), stream: body.stream ?? false, responses: parsed };
  } catch (error) {
    throw renamed(error, (param) => messageParam(param, allOrigins, places) ?? chatFieldParam(param));
  }
}

/** The chat body: only fields the request set, so the chat parser's defaults and rules apply unchanged. */
function chatBody(body: ResponsesRequestBody, messages: ChatWireMessage[]): Record<string, unknown> {
  const chat: Record<string, unknown> = { model: body.model, messages };
  const copy = (from: keyof ResponsesRequestBody, to: string = from) => {
    if (body[from] !== undefined) chat[to] = body[from];
  };
  for (const field of [
    "temperature",
    "top_p",
    "metadata",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "service_tier",
    "moderation",
  ] as const) {
    copy(field);
  }
  copy("max_output_tokens", "max_completion_tokens");
  if (body.reasoning?.effort !== undefined) chat.reasoning_effort = body.reasoning.effort;
  if (body.text?.verbosity !== undefined) chat.verbosity = body.text.verbosity;
  if (body.text?.format !== undefined) chat.response_format = responseFormat(body.text.format);
  const tools = body.tools ?? [];
  if (tools.length > 0) {
    chat.tools = tools.map(({ type, name, description, parameters, strict }) => ({
      type,
      function: { name, description, parameters, strict },
    }));
    copy("parallel_tool_calls");
    // At most one call per response: the one bound Hearth can keep (docs/responses.md).
    if (body.max_tool_calls === 1) chat.parallel_tool_calls = false;
  }
  if (body.tool_choice !== undefined) {
    const choice = toolChoice(body.tool_choice);
    // OpenAI's Responses API takes `auto` and `none` without tools (the SDKs send them): nothing to choose from.
    if (tools.length > 0 || (choice !== "auto" && choice !== "none")) chat.tool_choice = choice;
  }
  if (body.max_tool_calls === 0 && tools.length > 0) chat.tool_choice = "none";
  return chat;
}

/** `text.format` (flat: name, schema, strict) as chat's `response_format` (nested under `json_schema`). */
function responseFormat(format: unknown): unknown {
  const flat = dropNullFields(format);
  if (!isRecord(flat) || flat.type !== "json_schema") return flat;
  const { type, ...jsonSchema } = flat;
  return { type, json_schema: jsonSchema };
}

/** Hosted tools a `tool_choice` may name: none is served. */
const HOSTED_CHOICES = new Set([
  "file_search",
  "web_search_preview",
  "web_search_preview_2025_03_11",
  "web_search",
  "computer",
  "computer_use",
  "computer_use_preview",
  "image_generation",
  "code_interpreter",
  "mcp",
  "custom",
  "shell",
  "local_shell",
  "apply_patch",
  "programmatic_tool_calling",
]);

const TOOL_CHOICE_FORMS =
  `'none', 'auto', 'required', {"type": "function", "name": ...}, and ` +
  `{"type": "allowed_tools", "mode": "auto" | "required", "tools": [{"type": "function", "name": ...}, ...]}`;

/** Every Responses `tool_choice` form as chat's; built-in tools and unknown forms are refused here, by name. */
function toolChoice(choice: unknown): unknown {
  if (typeof choice === "string") {
    if (choice === "none" || choice === "auto" || choice === "required") return choice;
  } else if (isRecord(choice) && typeof choice.type === "string") {
    const { type } = choice;
    if (type === "function") return { type, function: { name: choice.name } };
    if (type === "allowed_tools") {
      const { tools } = choice;
      if (Array.isArray(tools)) {
        for (const [i, tool] of tools.entries()) {
          if (isRecord(tool) && tool.type !== "function") {
            throw new InvalidRequestError(
              `Invalid value for 'tool_choice.tools[${i}].type': '${String(tool.type)}'. Hearth runs no built-in tools; only functions may be allowed.`,
              `tool_choice.tools[${i}].type`,
            );
          }
        }
      }
      return {
        type,
        allowed_tools: {
          mode: choice.mode,
          tools: Array.isArray(tools)
            ? tools.map((tool) => ({
                type: "function",
                function: { name: isRecord(tool) ? tool.name : undefined },
              }))
            : tools,
        },
      };
    }
    if (HOSTED_CHOICES.has(type)) {
      throw new InvalidRequestError(
        `Invalid value for 'tool_choice': tools of type '${type}' are not supported: Hearth runs no built-in tools.`,
        "tool_choice",
      );
    }
  }
  throw new InvalidRequestError(
    `Invalid value for 'tool_choice': ${JSON.stringify(choice)?.slice(0, 100)}. Supported values are: ${TOOL_CHOICE_FORMS}.`,
    "tool_choice",
  );
}

/** Chat fields outside `messages` that have another name or place in the Responses API. */
const FIELD_RENAMES: readonly [RegExp, string][] = [
  [/^response_format\.json_schema(?=\.|$)/, "text.format"],
  [/^response_format(?=\.|$)/, "text.format"],
  [/^tools\[(\d+)\]\.function(?=\.|$)/, "tools[$1]"],
  [/^tool_choice\.function\.name$/, "tool_choice.name"],
  [/^tool_choice\.allowed_tools\.tools\[(\d+)\]\.function\.name$/, "tool_choice.tools[$1].name"],
  [/^tool_choice\.allowed_tools\.tools\[(\d+)\]\.function$/, "tool_choice.tools[$1]"],
  [/^tool_choice\.allowed_tools(?=\.|$)/, "tool_choice"],
  [/^max_completion_tokens$/, "max_output_tokens"],
  [/^reasoning_effort$/, "reasoning.effort"],
  [/^verbosity$/, "text.verbosity"],
];

/** A chat parameter outside `messages` as the Responses field; unchanged when both APIs call it the same. */
export function chatFieldParam(param: string): string {
  for (const [pattern, replacement] of FIELD_RENAMES) {
    if (pattern.test(param)) return param.replace(pattern, replacement);
  }
  return param;
}

/**
 * The same error with `param` (and its mention in the message) as the Responses API names it. Errors without a
 * param, and anything that is not an ApiError, pass unchanged.
 */
export function renamed(error: unknown, rename: (param: string) => string): unknown {
  if (!(error instanceof ApiError) || error.param === null) return error;
  const param = rename(error.param);
  if (param === error.param) return error;
  // The bare word "messages" also appears in prose ("the messages may total"): only its quoted mention is renamed.
  const message =
    error.param === "messages"
      ? error.message.replaceAll("'messages'", `'${param}'`)
      : error.message.replaceAll(error.param, param);
  return new ApiError(error.code, message, { param, headers: error.headers, cause: error });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
