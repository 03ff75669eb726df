// Parses and validates a POST /v1/chat/completions body into the engine's request fields, with OpenAI-style 400s.
import { z } from "zod";
import { isWellFormedApiKey } from "../../auth/api-key.js";
import type { SchemaBudget } from "../../chat/schema/budget.js";
import { samplingFields } from "../../completions/model-defaults.js";
import type { CompletionRequest } from "../../completions/types.js";
import { SAMPLING_FIELDS } from "../../config/sampling-defaults.js";
import { type RequestLimits, requestLimitsSchema } from "../../config/schema.js";
import type { ChatMessage } from "../../engine/types.js";
import { InvalidRequestError } from "../errors/api-error.js";
import { validate } from "../validation.js";
import {
  assistantToolCallSchema,
  parseOutputRequest,
  responseFormatSchema,
  toolChoiceSchema,
  toolEntrySchema,
  toToolCall,
} from "./chat-request-output.js";
import { legacyParam, rewriteLegacyFunctions } from "./legacy-functions.js";
import { openAiFieldsShape, refused, thinkingOf } from "./openai-fields.js";
import { checkAssistantMessages, checkPromptChars, checkRequestSize, checkStop } from "./request-limits.js";

/** The completions service's request plus what only the HTTP reply needs (streaming and its usage chunk). */
export interface ParsedChatRequest extends CompletionRequest {
  stream: boolean;
  includeUsage: boolean;
  /** The request used the deprecated `functions`: the reply's call is `message.function_call` (docs/compatibility.md). */
  legacyFunctions: boolean;
}

export interface ParseChatRequestOptions {
  /** Largest n a request may ask for (config server.maxN). */
  maxN: number;
  /** What the request's schemas may cost (config server.schemaBudget); default SCHEMA_BUDGET_DEFAULTS. */
  schemaBudget?: SchemaBudget;
  /** Bounds on the request's size (config server.requestLimits); default: the config's defaults. */
  requestLimits?: RequestLimits;
}

const DEFAULT_REQUEST_LIMITS = requestLimitsSchema.parse({});

/** OpenAI's bounds on `metadata` ("16 key-value pairs … keys 64 characters … values 512 characters"). */
const METADATA_PAIRS = 16;
const METADATA_KEY_CHARS = 64;
/** OpenAI documents 64 characters for `safety_identifier`, which supersedes `user`; both are held to it. */
const USER_ID_CHARS = 64;

/**
 * `user` is stored with the usage record and shown to operators and the org's members, so it must not be a secret:
 * one with the form of a Hearth API key (a client passing its key by mistake) is refused, never stored.
 */
const endUserSchema = z
  .string()
  .max(USER_ID_CHARS)
  .refine((user) => !isWellFormedApiKey(user.trim()), {
    message:
      "Invalid 'user': it has the form of an API key. Send a stable identifier of your end user (a hash of their username or email), never a secret.",
  });

/** OpenAI accepts null for every optional field and treats it as absent; dropping null keys keeps null out of the types. */
function dropNullFields(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null));
}

const nullAsAbsent = <T extends z.ZodType>(schema: T) => z.preprocess(dropNullFields, schema);

/** OpenAI's bounds: at most 20 alternatives per position; at most 300 biased tokens, each by −100..100. */
const TOP_LOGPROBS = 20;
const LOGIT_BIAS_ENTRIES = 300;
const LOGIT_BIAS = 100;

/** Token id (a decimal integer, as a JSON key) → bias; ids beyond the vocabulary are the engine's to refuse. */
const logitBiasSchema = z.record(z.string(), z.number()).superRefine((bias, ctx) => {
  const entries = Object.entries(bias);
  if (entries.length > LOGIT_BIAS_ENTRIES) {
    ctx.addIssue({
      code: "custom",
      message: `Invalid 'logit_bias': expected at most ${LOGIT_BIAS_ENTRIES} tokens, but got ${entries.length} instead.`,
    });
  }
  for (const [key, value] of entries) {
    if (!/^(0|[1-9][0-9]{0,9})$/.test(key) || Number(key) > 2 ** 31 - 1) {
      ctx.addIssue({
        code: "custom",
        message: `Invalid key in 'logit_bias': '${key.slice(0, 32)}'. Keys must be token ids (non-negative integers).`,
      });
    } else if (value < -LOGIT_BIAS || value > LOGIT_BIAS) {
      ctx.addIssue({
        code: "custom",
        message: `Invalid value for 'logit_bias' token ${key}: expected a number from -${LOGIT_BIAS} to ${LOGIT_BIAS}, but got ${value} instead.`,
      });
    }
  }
});

const never = (field: string, why: string) => `The '${field}' parameter is not supported: ${why}`;

const textPartSchema = z.strictObject({
  type: z.literal("text"),
  text: z.string(),
  // OpenAI's explicit cache breakpoint: Hearth caches every prefix anyway, so it is accepted and ignored.
  prompt_cache_breakpoint: z.unknown().optional(),
});

/** An earlier reply's refusal, sent back in an assistant message: accepted, and (like `refusal`) not rendered. */
const refusalPartSchema = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });

/** Names a non-text part as unsupported instead of the literal mismatch a plain text-part schema would report. */
const contentPartSchema = z
  .looseObject({ type: z.string() })
  .superRefine((part, ctx) => {
    if (part.type !== "text") {
      ctx.addIssue({
        code: "custom",
        path: ["type"],
        message: `Content parts of type '${part.type}' are not supported; Hearth accepts only 'text' parts.`,
      });
    }
  })
  .pipe(textPartSchema);

const assistantPartSchema = z
  .looseObject({ type: z.string() })
  .superRefine((part, ctx) => {
    if (part.type !== "text" && part.type !== "refusal") {
      ctx.addIssue({
        code: "custom",
        path: ["type"],
        message: `Content parts of type '${part.type}' are not supported in assistant messages; Hearth accepts 'text' and 'refusal' parts.`,
      });
    }
  })
  .pipe(z.discriminatedUnion("type", [textPartSchema, refusalPartSchema]))
  .transform((part) => (part.type === "text" ? part : { type: "text" as const, text: "" }));

const contentSchema = z.union([z.string(), z.array(contentPartSchema).min(1)]);
const assistantContentSchema = z.union([z.string(), z.array(assistantPartSchema).min(1)]);

const messageSchema = nullAsAbsent(
  z.discriminatedUnion("role", [
    z.strictObject({ role: z.literal("system"), content: contentSchema, name: z.string().optional() }),
    z.strictObject({ role: z.literal("developer"), content: contentSchema, name: z.string().optional() }),
    z.strictObject({ role: z.literal("user"), content: contentSchema, name: z.string().optional() }),
    z.strictObject({
      role: z.literal("assistant"),
      content: assistantContentSchema.optional(),
      name: z.string().optional(),
      // Accepted so an earlier response can be sent back as it came; none is put back into the prompt.
      refusal: z.string().optional(),
      // OpenAI's reference to an earlier audio reply: Hearth never made one, so there is nothing it could name.
      audio: refused(never("messages[].audio", "Hearth produces text only.")),
      function_call: refused(never("messages[].function_call", "use 'tool_calls' instead.")),
      reasoning: z.string().optional(),
      reasoning_content: z.string().optional(),
      tool_calls: z.array(assistantToolCallSchema).optional(),
      // What openai-node's `parse` adds to a reply (the parsed object) and what OpenAI's replies carry (URL
      // citations): apps send the message back as they got it. Neither is put into the prompt.
      parsed: z.unknown().optional(),
      annotations: z.array(z.unknown()).optional(),
    }),
    // `name` (the function's name) is what LangChain sends on every tool result; templates that render it get it.
    z.strictObject({
      role: z.literal("tool"),
      content: contentSchema,
      tool_call_id: z.string(),
      name: z.string().optional(),
    }),
  ]),
);

const chatRequestSchema = nullAsAbsent(
  z.strictObject({
    model: z.string().min(1),
    messages: z.array(messageSchema).min(1),
    temperature: SAMPLING_FIELDS.temperature.optional(),
    top_p: SAMPLING_FIELDS.top_p.optional(),
    // vLLM's sampling extensions (sent through `extra_body` by OpenAI's SDKs): vLLM's ranges and meaning.
    top_k: SAMPLING_FIELDS.top_k.optional(),
    min_p: SAMPLING_FIELDS.min_p.optional(),
    repetition_penalty: SAMPLING_FIELDS.repetition_penalty.optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    n: z.int().min(1).optional(),
    max_tokens: SAMPLING_FIELDS.max_tokens.optional(),
    max_completion_tokens: SAMPLING_FIELDS.max_tokens.optional(),
    seed: z.int().optional(),
    stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
    stream: z.boolean().optional(),
    stream_options: nullAsAbsent(
      // include_obfuscation: accepted and ignored (Hearth's chunks carry no `obfuscation` padding).
      z.strictObject({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() }),
    ).optional(),
    chat_template_kwargs: nullAsAbsent(
      z.strictObject({ enable_thinking: z.boolean().optional() }),
    ).optional(),
    response_format: responseFormatSchema.optional(),
    tools: z.array(toolEntrySchema).min(1).optional(),
    tool_choice: toolChoiceSchema.optional(),
    parallel_tool_calls: z.boolean().optional(),
    logprobs: z.boolean().optional(),
    top_logprobs: z.int().min(0).max(TOP_LOGPROBS).optional(),
    logit_bias: logitBiasSchema.optional(),
    // Accepted and ignored: Hearth keeps no completions to list or fetch later, whatever `store` says.
    store: z.boolean().optional(),
    ...openAiFieldsShape,
    // None of these changes what is generated; `user` is recorded with the usage (docs/compatibility.md).
    user: endUserSchema.optional(),
    safety_identifier: z.string().max(USER_ID_CHARS).optional(),
    prompt_cache_key: z.string().optional(),
    // vLLM's: narrows prefix-cache reuse to requests with the same salt, within the caller's organization.
    cache_salt: z.string().min(1).max(256).optional(),
    metadata: z
      .record(z.string(), z.string().max(512))
      .superRefine((metadata, ctx) => {
        const keys = Object.keys(metadata);
        if (keys.length > METADATA_PAIRS) {
          ctx.addIssue({
            code: "custom",
            message: `Invalid 'metadata': expected at most ${METADATA_PAIRS} key-value pairs, but got ${keys.length} instead.`,
          });
        }
        const long = keys.find((key) => key.length > METADATA_KEY_CHARS);
        if (long !== undefined) {
          ctx.addIssue({
            code: "custom",
            message: `Invalid 'metadata': keys must be at most ${METADATA_KEY_CHARS} characters, but one has ${long.length}.`,
          });
        }
      })
      .optional(),
    // Accepted and ignored: Hearth has one tier.
    service_tier: z.enum(["auto", "default", "flex", "scale", "priority", "fast"]).optional(),
    prediction: z.strictObject({ type: z.literal("content"), content: contentSchema }).optional(),
  }),
);

export type ChatRequestBody = z.infer<typeof chatRequestSchema>;
type RequestMessage = ChatRequestBody["messages"][number];

export function parseChatRequest(body: unknown, options: ParseChatRequestOptions): ParsedChatRequest {
  if (!isPlainObject(body)) throw new InvalidRequestError("The request body must be a JSON object.");
  const rewritten = rewriteLegacyFunctions(body);
  if (!rewritten.legacy) return { ...parseRequest(rewritten.body, options), legacyFunctions: false };
  try {
    return { ...parseRequest(rewritten.body, options), legacyFunctions: true };
  } catch (error) {
    // A refusal of a rewritten field names it as the client sent it (`functions[0].parameters`).
    if (!(error instanceof InvalidRequestError) || error.param === null) throw error;
    const param = legacyParam(error.param);
    throw new InvalidRequestError(error.message.replaceAll(error.param, param), param, error.code);
  }
}

function parseRequest(
  body: Record<string, unknown>,
  options: ParseChatRequestOptions,
): Omit<ParsedChatRequest, "legacyFunctions"> {
  const limits = options.requestLimits ?? DEFAULT_REQUEST_LIMITS;
  checkRequestSize(body, limits);
  const req = validate(body, chatRequestSchema);
  checkAssistantMessages(body);
  checkPromptChars(req.messages, req.tools, limits);
  checkStop(req.stop, limits);

  const n = req.n ?? 1;
  if (n > options.maxN) {
    throw new InvalidRequestError(
      `Invalid 'n': expected a value <= ${options.maxN}, but got ${n} instead. This server allows at most ${options.maxN} choices per request.`,
      "n",
    );
  }
  const stream = req.stream ?? false;
  if (req.stream_options !== undefined && !stream) {
    throw new InvalidRequestError(
      "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
      "stream_options",
    );
  }
  if (req.top_logprobs !== undefined && req.logprobs !== true) {
    throw new InvalidRequestError(
      "Invalid 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.",
      "top_logprobs",
    );
  }
  if (req.max_tokens !== undefined && req.max_completion_tokens !== undefined) {
    throw new InvalidRequestError("Use either max_tokens or max_completion_tokens, not both.", "max_tokens");
  }

  const parsed: Omit<ParsedChatRequest, "legacyFunctions"> = {
    model: req.model,
    messages: req.messages.map(toChatMessage),
    stream,
    includeUsage: req.stream_options?.include_usage ?? false,
    n,
    sampling: {
      // Left out when the request leaves them out: the model's `defaults` fill them (src/completions/).
      ...samplingFields(req),
      frequencyPenalty: req.frequency_penalty ?? 0,
      presencePenalty: req.presence_penalty ?? 0,
      // The engine's seed is unsigned 32-bit; any safe integer (negative too) maps onto it deterministically.
      seed: req.seed === undefined ? undefined : req.seed >>> 0,
      maxTokens: req.max_tokens ?? req.max_completion_tokens,
      // An empty stop string would match at once and end every generation: dropping it is the useful reading.
      stop: (typeof req.stop === "string" ? [req.stop] : (req.stop ?? [])).filter((s) => s !== ""),
    },
    enableThinking: thinkingOf(req.reasoning_effort, req.chat_template_kwargs?.enable_thinking),
  };
  if (req.reasoning_effort !== undefined) parsed.reasoningEffort = req.reasoning_effort;
  if (req.logprobs === true) parsed.sampling.logprobs = req.top_logprobs ?? 0;
  const bias = Object.entries(req.logit_bias ?? {});
  if (bias.length > 0)
    parsed.sampling.logitBias = new Map(bias.map(([token, value]) => [Number(token), value]));
  const output = parseOutputRequest(req, options.schemaBudget);
  if (output !== undefined) parsed.output = output;
  if (req.user !== undefined) parsed.user = req.user;
  if (req.cache_salt !== undefined) parsed.cacheSalt = req.cache_salt;
  if (req.prompt_cache_key !== undefined && req.prompt_cache_key !== "")
    parsed.promptCacheKey = req.prompt_cache_key;
  return parsed;
}

function toChatMessage(message: RequestMessage): ChatMessage {
  const { content } = message;
  const text =
    content === undefined ? "" : typeof content === "string" ? content : content.map((p) => p.text).join("");
  // OpenAI's developer role is its newer name for system; chat templates know only system.
  const out: ChatMessage = { role: message.role === "developer" ? "system" : message.role, content: text };
  if ("name" in message && message.name !== undefined) out.name = message.name;
  if (message.role === "tool") out.toolCallId = message.tool_call_id;
  if (message.role === "assistant" && message.tool_calls !== undefined && message.tool_calls.length > 0) {
    out.toolCalls = message.tool_calls.map(toToolCall);
  }
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
