// Parses and validates a POST /v1/chat/completions body into the engine's request fields, with OpenAI-style 400s.
import { z } from "zod";
import type { ChatMessage, OutputRequest, SamplingParams } from "../engine/types.js";
import { InvalidRequestError } from "../errors/api-error.js";
import {
  assistantToolCallSchema,
  parseOutputRequest,
  responseFormatSchema,
  toolChoiceSchema,
  toolSchema,
  toToolCall,
} from "./chat-request-output.js";

export interface ParsedChatRequest {
  model: string;
  messages: ChatMessage[];
  stream: boolean;
  includeUsage: boolean;
  n: number;
  /** seed stays undefined when the client sent none: the handler draws a random one (the library's default is the clock). */
  sampling: Omit<SamplingParams, "seed"> & { seed: number | undefined };
  enableThinking: boolean;
  /** JSON mode or tools: the reply is constrained (absent for free text). */
  output?: OutputRequest;
  user?: string;
}

export interface ParseChatRequestOptions {
  /** Largest n a request may ask for (config server.maxN). */
  maxN: number;
}

/** OpenAI accepts null for every optional field and treats it as absent; dropping null keys keeps null out of the types. */
function dropNullFields(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null));
}

const nullAsAbsent = <T extends z.ZodType>(schema: T) => z.preprocess(dropNullFields, schema);

/** A field Hearth refuses whenever it is present (null already means absent). */
function refused(message: string) {
  return z
    .unknown()
    .superRefine((_, ctx) => ctx.addIssue({ code: "custom", message }))
    .optional();
}

const never = (field: string, why: string) => `The '${field}' parameter is not supported: ${why}`;

const textPartSchema = z.strictObject({ type: z.literal("text"), text: z.string() });

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

const contentSchema = z.union([z.string(), z.array(contentPartSchema).min(1)]);

const messageSchema = nullAsAbsent(
  z.discriminatedUnion("role", [
    z.strictObject({ role: z.literal("system"), content: contentSchema, name: z.string().optional() }),
    z.strictObject({ role: z.literal("developer"), content: contentSchema, name: z.string().optional() }),
    z.strictObject({ role: z.literal("user"), content: contentSchema, name: z.string().optional() }),
    z.strictObject({
      role: z.literal("assistant"),
      content: contentSchema.optional(),
      name: z.string().optional(),
      // Accepted so an earlier response can be sent back as it came; none is put back into the prompt.
      refusal: z.string().optional(),
      reasoning: z.string().optional(),
      reasoning_content: z.string().optional(),
      tool_calls: z.array(assistantToolCallSchema).optional(),
    }),
    z.strictObject({ role: z.literal("tool"), content: contentSchema, tool_call_id: z.string() }),
  ]),
);

const chatRequestSchema = nullAsAbsent(
  z.strictObject({
    model: z.string().min(1),
    messages: z.array(messageSchema).min(1),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    n: z.int().min(1).optional(),
    max_tokens: z.int().min(1).optional(),
    max_completion_tokens: z.int().min(1).optional(),
    seed: z.int().optional(),
    stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
    stream: z.boolean().optional(),
    stream_options: nullAsAbsent(z.strictObject({ include_usage: z.boolean().optional() })).optional(),
    chat_template_kwargs: nullAsAbsent(
      z.strictObject({ enable_thinking: z.boolean().optional() }),
    ).optional(),
    response_format: responseFormatSchema.optional(),
    tools: z.array(toolSchema).min(1).optional(),
    tool_choice: toolChoiceSchema.optional(),
    parallel_tool_calls: z.boolean().optional(),
    functions: refused(never("functions", "use 'tools' instead.")),
    function_call: refused(never("function_call", "use 'tool_choice' instead.")),
    reasoning_effort: refused(never("reasoning_effort", "use chat_template_kwargs.enable_thinking instead.")),
    logprobs: z
      .boolean()
      .refine((on) => !on, never("logprobs", "log probabilities are not returned."))
      .optional(),
    top_logprobs: refused(never("top_logprobs", "log probabilities are not returned.")),
    logit_bias: z
      .record(z.string(), z.number())
      .refine((bias) => Object.keys(bias).length === 0, never("logit_bias", "token biases are not applied."))
      .optional(),
    store: z
      .boolean()
      .refine((on) => !on, never("store", "Hearth does not store completions."))
      .optional(),
    modalities: refused(never("modalities", "Hearth produces text only.")),
    audio: refused(never("audio", "Hearth produces text only.")),
    web_search_options: refused(never("web_search_options", "Hearth has no web search.")),
    // Accepted and ignored: none of these changes what is generated (docs/compatibility.md).
    user: z.string().optional(),
    safety_identifier: z.string().optional(),
    prompt_cache_key: z.string().optional(),
    metadata: z.record(z.string(), z.string()).optional(),
    service_tier: z.enum(["auto", "default"]).optional(),
    prediction: z.strictObject({ type: z.literal("content"), content: contentSchema }).optional(),
  }),
);

export type ChatRequestBody = z.infer<typeof chatRequestSchema>;
type RequestMessage = ChatRequestBody["messages"][number];

/** The route's JSON reader: bad JSON is a 400 with OpenAI's wording, never a 500. */
export function parseJsonBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidRequestError(
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library " +
        "correctly. Hearth expects a JSON payload, but what was sent was not valid JSON.)",
    );
  }
}

export function parseChatRequest(body: unknown, options: ParseChatRequestOptions): ParsedChatRequest {
  if (!isPlainObject(body)) throw new InvalidRequestError("The request body must be a JSON object.");
  const result = chatRequestSchema.safeParse(body);
  if (!result.success) {
    const [first] = result.error.issues;
    throw first === undefined ? new InvalidRequestError("Invalid request body.") : issueToError(first, body);
  }
  const req = result.data;

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
  if (req.max_tokens !== undefined && req.max_completion_tokens !== undefined) {
    throw new InvalidRequestError("Use either max_tokens or max_completion_tokens, not both.", "max_tokens");
  }

  const parsed: ParsedChatRequest = {
    model: req.model,
    messages: req.messages.map(toChatMessage),
    stream,
    includeUsage: req.stream_options?.include_usage ?? false,
    n,
    sampling: {
      temperature: req.temperature ?? 1,
      topP: req.top_p ?? 1,
      frequencyPenalty: req.frequency_penalty ?? 0,
      presencePenalty: req.presence_penalty ?? 0,
      // The engine's seed is unsigned 32-bit; any safe integer (negative too) maps onto it deterministically.
      seed: req.seed === undefined ? undefined : req.seed >>> 0,
      maxTokens: req.max_tokens ?? req.max_completion_tokens,
      // An empty stop string would match at once and end every generation: dropping it is the useful reading.
      stop: (typeof req.stop === "string" ? [req.stop] : (req.stop ?? [])).filter((s) => s !== ""),
    },
    enableThinking: req.chat_template_kwargs?.enable_thinking ?? false,
  };
  const output = parseOutputRequest(req);
  if (output !== undefined) parsed.output = output;
  if (req.user !== undefined) parsed.user = req.user;
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

// --- zod issue → one OpenAI-style message and param ---

function issueToError(
  issue: z.core.$ZodIssue,
  body: unknown,
  prefix: readonly PropertyKey[] = [],
): InvalidRequestError {
  const path = [...prefix, ...issue.path];
  const param = formatParam(path);
  const name = param ?? "body";
  const value = valueAt(body, path);
  switch (issue.code) {
    case "custom":
      return new InvalidRequestError(issue.message, param);
    case "invalid_type":
      return value === undefined
        ? new InvalidRequestError(`Missing required parameter: '${name}'.`, param)
        : typeError(name, [issue.expected], value, param);
    case "too_small":
    case "too_big":
      return new InvalidRequestError(rangeMessage(issue, name, value), param);
    case "invalid_value":
      return new InvalidRequestError(
        `Invalid value for '${name}': ${show(value)}. Supported values are: ${listOf(issue.values)}.`,
        param,
      );
    case "unrecognized_keys": {
      const key = issue.keys[0] ?? "";
      return param === null
        ? new InvalidRequestError(`Unrecognized request argument supplied: ${key}`, key)
        : new InvalidRequestError(
            `Unrecognized argument supplied in '${param}': ${key}`,
            formatParam([...path, key]),
          );
    }
    case "invalid_union": {
      if (issue.discriminator !== undefined) {
        if (value === undefined)
          return new InvalidRequestError(`Missing required parameter: '${name}'.`, param);
        return new InvalidRequestError(
          `Invalid value for '${name}': ${show(value)}. Supported values are: ${listOf("options" in issue ? (issue.options ?? []) : [])}.`,
          param,
        );
      }
      // The branch that got past the type check is the one the client meant (an array for `stop`): report its issue.
      const branches = issue.errors.map((branch) => branch[0]).filter((first) => first !== undefined);
      const meant = branches.find((first) => !(first.code === "invalid_type" && first.path.length === 0));
      if (meant !== undefined) return issueToError(meant, body, path);
      const expected = branches.flatMap((first) => (first.code === "invalid_type" ? [first.expected] : []));
      return value === undefined
        ? new InvalidRequestError(`Missing required parameter: '${name}'.`, param)
        : typeError(name, expected, value, param);
    }
    default:
      return new InvalidRequestError(`Invalid '${name}': ${issue.message}.`, param);
  }
}

function typeError(name: string, expected: readonly string[], value: unknown, param: string | null) {
  const wanted = expected.map((e) => EXPECTED[e] ?? e).join(" or ");
  return new InvalidRequestError(
    `Invalid type for '${name}': expected ${wanted}, but got ${describe(value)} instead.`,
    param,
  );
}

const EXPECTED: Readonly<Record<string, string>> = Object.freeze({
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  array: "an array",
  object: "an object",
  record: "an object",
});

function rangeMessage(
  issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig,
  name: string,
  value: unknown,
) {
  const small = issue.code === "too_small";
  const bound = small ? issue.minimum : issue.maximum;
  const op = (small ? ">" : "<") + (issue.inclusive === false ? "" : "=");
  if (issue.origin === "array" && Array.isArray(value)) {
    return small
      ? `Invalid '${name}': expected an array with at least ${bound} element(s), but got ${value.length === 0 ? "an empty array" : `${value.length}`} instead.`
      : `Invalid '${name}': expected an array with at most ${bound} element(s), but got ${value.length} instead.`;
  }
  if (issue.origin === "string" && typeof value === "string") {
    return `Invalid '${name}': expected a string with ${small ? "at least" : "at most"} ${bound} character(s), but got ${value.length === 0 ? "an empty string" : `${value.length}`} instead.`;
  }
  return `Invalid '${name}': expected a value ${op} ${bound}, but got ${show(value)} instead.`;
}

/** OpenAI's spelling of a parameter path: messages[2].content[0].type. */
function formatParam(path: readonly PropertyKey[]): string | null {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out === "" ? String(key) : `.${String(key)}`;
  }
  return out === "" ? null : out;
}

/** The raw value the client sent at a path: messages name null apart from absent, which the parsed data cannot. */
function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let current = body;
  for (const key of path) {
    if (current === null || typeof current !== "object" || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number") return Number.isInteger(value) ? "an integer" : "a decimal number";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

function show(value: unknown): string {
  return typeof value === "string" ? `'${value}'` : String(JSON.stringify(value));
}

function listOf(values: readonly unknown[]): string {
  const shown = values.map(show);
  return shown.length <= 2 ? shown.join(" and ") : `${shown.slice(0, -1).join(", ")}, and ${shown.at(-1)}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
