// Bounds on the size of one chat completion request, each refused with a 400 naming the limit and the parameter:
// what validation, schema compilation, rendering and tokenizing may cost is bounded before any of it runs.
import type { RequestLimits } from "../../config/schema.js";
import { InvalidRequestError } from "../errors/api-error.js";

/** OpenAI's bound on `tools` ("A max of 128 functions are supported"). */
export const MAX_TOOLS = 128;

/**
 * Levels of JSON nesting a request body may have. A schema may nest 32 levels (SCHEMA_LIMITS.maxDepth), two JSON
 * levels each (`properties`, then the property), inside `tools[i].function.parameters`: well within. Far deeper
 * bodies (10,000 levels, from the fuzz bench) overflowed the call stack of every recursive walk after the parse
 * (`JSON.stringify` of a schema: a 500) and are refused first, by a walk that keeps its own stack.
 */
export const MAX_BODY_DEPTH = 128;

/**
 * On the raw body, before validation: the counts and sizes that decide how much work validating (and compiling the
 * schemas of) the rest would be. Fields of the wrong type are left to validation.
 */
export function checkRequestSize(body: Readonly<Record<string, unknown>>, limits: RequestLimits): void {
  checkNesting(body);
  const { messages, tools } = body;
  if (Array.isArray(messages) && messages.length > limits.maxMessages) {
    throw tooMany("messages", limits.maxMessages, messages.length);
  }
  if (Array.isArray(tools) && tools.length > MAX_TOOLS) throw tooMany("tools", MAX_TOOLS, tools.length);
  let total = 0;
  for (const [param, schema] of schemasOf(body)) {
    total += Buffer.byteLength(JSON.stringify(schema) ?? "");
    if (total > limits.maxSchemaBytes) {
      throw new InvalidRequestError(
        `Invalid '${param}': the JSON schemas of a request (tool parameters and response_format) may total at most ` +
          `${limits.maxSchemaBytes} bytes, but they reach ${total} bytes here.`,
        param,
      );
    }
  }
}

/** Refuses a body nested deeper than MAX_BODY_DEPTH, naming the top-level field; iterative, linear in the body. */
function checkNesting(body: Readonly<Record<string, unknown>>): void {
  for (const [param, value] of Object.entries(body)) {
    const stack: [unknown, number][] = [[value, 2]];
    for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
      const [node, depth] = entry;
      if (node === null || typeof node !== "object") continue;
      if (depth > MAX_BODY_DEPTH) {
        throw new InvalidRequestError(
          `Invalid '${param}': the request body nests deeper than ${MAX_BODY_DEPTH} levels.`,
          param,
        );
      }
      for (const child of Object.values(node)) stack.push([child, depth + 1]);
    }
  }
}

/** The parts of a validated message that become prompt text. */
export interface PromptText {
  content?: string | readonly { text: string }[] | undefined;
  name?: string | undefined;
  tool_calls?: readonly { id: string; function: { name: string; arguments: string } }[] | undefined;
}

/**
 * After validation: the characters of the prompt text the client sent (messages, and the tools' descriptions the
 * template renders beside them; schemas have their own bound), before anything renders them.
 */
export function checkPromptChars(
  messages: readonly PromptText[],
  tools: readonly { function: { description?: string | undefined } }[] | undefined,
  limits: RequestLimits,
): void {
  let chars = 0;
  for (const message of messages) {
    const { content } = message;
    if (typeof content === "string") chars += content.length;
    else for (const part of content ?? []) chars += part.text.length;
    chars += message.name?.length ?? 0;
    for (const call of message.tool_calls ?? []) {
      chars += call.id.length + call.function.name.length + call.function.arguments.length;
    }
  }
  const messageChars = chars;
  for (const tool of tools ?? []) chars += tool.function.description?.length ?? 0;
  if (chars <= limits.maxPromptChars) return;
  if (messageChars > limits.maxPromptChars) {
    throw new InvalidRequestError(
      `Invalid 'messages': the messages may total at most ${limits.maxPromptChars} characters, but they have ${chars}.`,
      "messages",
    );
  }
  throw new InvalidRequestError(
    `Invalid 'tools': the messages and the tools' descriptions may total at most ${limits.maxPromptChars} characters, but they have ${chars}.`,
    "tools",
  );
}

/** After validation: every stop string within the configured length (the stop matcher holds back that much text). */
export function checkStop(stop: string | readonly string[] | undefined, limits: RequestLimits): void {
  const strings = typeof stop === "string" ? [stop] : (stop ?? []);
  for (const [i, text] of strings.entries()) {
    if (text.length <= limits.maxStopChars) continue;
    const param = typeof stop === "string" ? "stop" : `stop[${i}]`;
    throw new InvalidRequestError(
      `Invalid '${param}': expected a string with at most ${limits.maxStopChars} character(s), but got ${text.length} instead.`,
      param,
    );
  }
}

/**
 * OpenAI's rule: an assistant message has `content` unless it carries `tool_calls`. Checked on the raw body, which
 * still tells null (OpenAI's wording for it) from absent.
 */
export function checkAssistantMessages(body: Readonly<Record<string, unknown>>): void {
  const { messages } = body;
  if (!Array.isArray(messages)) return;
  for (const [i, message] of messages.entries()) {
    if (!isRecord(message) || message.role !== "assistant") continue;
    const calls = message.tool_calls;
    if (Array.isArray(calls) && calls.length > 0) continue;
    const param = `messages[${i}].content`;
    if (message.content === null) {
      throw new InvalidRequestError("Invalid value for 'content': expected a string, got null.", param);
    }
    if (message.content === undefined)
      throw new InvalidRequestError(`Missing required parameter: '${param}'.`, param);
  }
}

function tooMany(param: string, max: number, got: number): InvalidRequestError {
  return new InvalidRequestError(
    `Invalid '${param}': expected an array with at most ${max} element(s), but got ${got} instead.`,
    param,
  );
}

/** Every JSON schema of the request with its parameter path, as sent (before validation). */
function* schemasOf(body: Readonly<Record<string, unknown>>): Generator<[string, unknown]> {
  const { tools, response_format: format } = body;
  if (Array.isArray(tools)) {
    for (const [i, tool] of tools.entries()) {
      const fn = isRecord(tool) ? tool.function : undefined;
      if (isRecord(fn) && fn.parameters !== undefined && fn.parameters !== null) {
        yield [`tools[${i}].function.parameters`, fn.parameters];
      }
    }
  }
  const jsonSchema = isRecord(format) ? format.json_schema : undefined;
  if (isRecord(jsonSchema) && jsonSchema.schema !== undefined && jsonSchema.schema !== null) {
    yield ["response_format.json_schema.schema", jsonSchema.schema];
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
