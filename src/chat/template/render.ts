// Renders chats with the model's Jinja template into segments, so client text is never tokenized as control tokens.

import { createHash } from "node:crypto";
import { Template } from "@huggingface/jinja";
import type { ChatMessage, ToolDefinition } from "../../engine/types.js";
import { type Fault, Refusal } from "../../refusal.js";
import { toolJson } from "../output/plan.js";
import { placeholdersAreExact } from "./exactness.js";

/**
 * A piece of the rendered prompt: `special` text is tokenized with special-token parsing, the rest as plain text.
 * Whitespace between template and client text belongs to the plain side (see attachEdgeWhitespace).
 */
export interface PromptSegment {
  text: string;
  special: boolean;
}

export interface PromptRendererOptions {
  /** The Jinja chat template (GGUF `tokenizer.chat_template`). */
  template: string;
  bosToken?: string;
  eosToken?: string;
  /**
   * Text of every control token of the model (e.g. `<|im_end|>`, `<|endoftext|>`). Only the fallback strategy
   * needs it; bos and eos are added to it. The more complete, the safer that fallback.
   */
  specialTokens?: readonly string[];
}

export interface RenderOptions {
  /** Always passed to the template, so templates that default to thinking (Qwen3) are told explicitly. */
  enableThinking: boolean;
  /**
   * The client's `reasoning_effort`, passed as the template's `reasoning_effort` when given (templates that size
   * their reasoning by it, e.g. gpt-oss's, read it; the rest ignore an unused variable).
   */
  reasoningEffort?: string;
  /** Default true. */
  addGenerationPrompt?: boolean;
  /** Passed as the template's `tools` (OpenAI's `{type, function}` objects); absent: the variable is undefined. */
  tools?: readonly ToolDefinition[];
}

/**
 * How client text was told apart from template text:
 * - `placeholders`: exact. The template ran with placeholders for client strings, and substituting them back gave
 *   byte for byte what the template renders from the real strings.
 * - `escaped-specials`: the template transforms client strings (Qwen3 splits `<think>` off assistant turns,
 *   Llama 3.1 applies `tojson` to tool results), so placeholders would change the prompt. It ran with every known
 *   special-token string in client strings replaced by markers, and unescaping gave the real render; those
 *   occurrences become plain segments, all other text is special. Relies on `specialTokens` being complete, and
 *   cannot see a control token a template would assemble from fragments of client text.
 * - `verbatim-search`: last resort (no known special tokens, or the escaping changed the template's output). Real
 *   render; client strings found verbatim, in message order, are plain; anything a template changed stays special.
 */
export type RenderStrategy = "placeholders" | "escaped-specials" | "verbatim-search";

export interface RenderedPrompt {
  /** The prompt exactly as the template renders it: the concatenation of `segments`. */
  text: string;
  segments: PromptSegment[];
  strategy: RenderStrategy;
}

export interface PromptRenderer {
  render(messages: readonly ChatMessage[], options: RenderOptions): PromptSegment[];
  /** Like `render`, plus the strategy used (worth a log line when it is not `placeholders`). */
  renderDetailed(messages: readonly ChatMessage[], options: RenderOptions): RenderedPrompt;
}

/**
 * - `syntax`: the template does not parse (found at start-up).
 * - `raised`: the template called `raise_exception` (it rejects this conversation, e.g. roles out of order).
 * - `render`: the template failed while rendering (an unsupported filter, a type error on this input).
 */
export type TemplateErrorKind = "syntax" | "raised" | "render";

export class TemplateError extends Refusal {
  override name = "TemplateError";
  readonly kind: TemplateErrorKind;

  constructor(kind: TemplateErrorKind, message: string, options?: { cause: unknown }) {
    super(message, options);
    this.kind = kind;
  }

  /** A template that does not parse is the server's (its configuration); one that refuses the chat, the client's. */
  get fault(): Fault {
    return this.kind === "syntax" ? "server" : "client";
  }
}

/** True when the first non-empty segment is special and starts with the BOS text (so the engine adds no BOS). */
export function hasLeadingBos(segments: readonly PromptSegment[], bosToken: string | undefined): boolean {
  if (bosToken === undefined || bosToken === "") return false;
  const first = segments.find((segment) => segment.text !== "");
  return first?.special === true && first.text.startsWith(bosToken);
}

// The library already declares `raise_exception` as a global and refuses a second declaration, so calls are
// renamed in the parsed template to a function of ours: that is how a deliberate rejection is told apart from a
// template bug.
const RAISE_FUNCTION = "__hearth_raise_exception";

// Private-use code points: no template writes them, and client text is never inside a placeholder render.
const PLACEHOLDER = /\uE000(\d+)\uE001/g;
const ESCAPE = /\uE002(\d+)\uE003/g;

/** The message shape chat templates expect (Hugging Face conventions). */
interface TemplateMessage {
  role: string;
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: unknown[];
}

type StringMapper = (value: string) => string;

export function createPromptRenderer(options: PromptRendererOptions): PromptRenderer {
  let template: Template;
  try {
    template = new Template(options.template);
  } catch (error) {
    throw new TemplateError("syntax", `chat template does not parse: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  renameIdentifier(template.parsed, "raise_exception", RAISE_FUNCTION);

  const specials = [
    ...new Set(
      [options.bosToken, options.eosToken, ...(options.specialTokens ?? [])].filter(
        (token): token is string => token !== undefined && token !== "",
      ),
    ),
  ].sort((a, b) => b.length - a.length); // longest first, so `<|im_end|>` is not cut short by a shorter token
  const specialPattern =
    specials.length > 0 ? new RegExp(specials.map(escapeRegExp).join("|"), "g") : undefined;

  // Mistral's templates refuse tool-call ids that are not 9 alphanumerics; OpenAI ids (`call_…`) are mapped onto
  // such ids the same way in calls and results, so the pairing survives. Alphanumerics need no protection.
  const toolCallId: StringMapper | undefined = NINE_CHARACTER_IDS.test(options.template)
    ? nineCharacterId
    : undefined;
  const run = (messages: readonly ChatMessage[], renderOptions: RenderOptions, map: StringMapper): string => {
    const variables: Record<string, unknown> = {
      messages: messages.map((message) => toTemplateMessage(message, map, toolCallId)),
      add_generation_prompt: renderOptions.addGenerationPrompt ?? true,
      enable_thinking: renderOptions.enableThinking,
      [RAISE_FUNCTION]: raiseException,
    };
    if (renderOptions.reasoningEffort !== undefined)
      variables.reasoning_effort = renderOptions.reasoningEffort;
    // Tool JSON is client text too: every string in it (keys included) goes through the same mapping.
    if (renderOptions.tools !== undefined) {
      variables.tools = renderOptions.tools.map((tool) => ({
        type: "function",
        function: mapStrings(toolJson(tool), map, 1),
      }));
    }
    if (options.bosToken !== undefined) variables.bos_token = options.bosToken;
    if (options.eosToken !== undefined) variables.eos_token = options.eosToken;
    try {
      return template.render(variables);
    } catch (error) {
      if (error instanceof TemplateError) throw error;
      throw new TemplateError("render", `chat template failed to render: ${errorMessage(error)}`, {
        cause: error,
      });
    }
  };

  // Decided once: whether the template treats client strings as opaque, so placeholders alone are exact.
  const placeholdersExact = placeholdersAreExact(template.parsed);

  /**
   * One render, with placeholders, for a conversation without tools or tool calls on a template proven to treat
   * client strings as opaque (template-exactness.ts): the real text is the placeholders substituted back, so the
   * checking render of renderWithPlaceholders is not needed. Errors are the conversation's (the template takes the
   * same path as with the real strings). Undefined when the render cannot be split (the checked path decides).
   */
  const renderOnce = (
    messages: readonly ChatMessage[],
    renderOptions: RenderOptions,
  ): RenderedPrompt | undefined => {
    if (!placeholdersExact || renderOptions.tools !== undefined) return undefined;
    if (messages.some((message) => (message.toolCalls?.length ?? 0) > 0)) return undefined;
    const values: string[] = [];
    const segments = splitAtMarkers(
      run(messages, renderOptions, placeholderFor(values)),
      PLACEHOLDER,
      (index) => values[index],
    );
    if (segments === undefined) return undefined;
    return {
      text: joinSegments(segments),
      segments: attachEdgeWhitespace(segments),
      strategy: "placeholders",
    };
  };

  const renderDetailed = (messages: readonly ChatMessage[], renderOptions: RenderOptions): RenderedPrompt => {
    const once = renderOnce(messages, renderOptions);
    if (once !== undefined) return once;
    // Errors of the real render are the conversation's; the variants below only decide how to segment it.
    const text = run(messages, renderOptions, (value) => value);
    const rendered =
      renderWithPlaceholders(text, messages, renderOptions) ??
      renderWithEscapedSpecials(text, messages, renderOptions) ??
      renderWithVerbatimSearch(text, messages);
    // Escaped-specials segments already split only at special tokens; the others split at client text.
    if (rendered.strategy !== "escaped-specials") rendered.segments = attachEdgeWhitespace(rendered.segments);
    return rendered;
  };

  const renderWithPlaceholders = (
    text: string,
    messages: readonly ChatMessage[],
    renderOptions: RenderOptions,
  ): RenderedPrompt | undefined => {
    const values: string[] = [];
    const withPlaceholders = tryRun(() => run(messages, renderOptions, placeholderFor(values)));
    if (withPlaceholders === undefined) return undefined;
    const segments = splitAtMarkers(withPlaceholders, PLACEHOLDER, (index) => values[index]);
    if (segments === undefined || joinSegments(segments) !== text) return undefined;
    return { text, segments, strategy: "placeholders" };
  };

  const renderWithEscapedSpecials = (
    text: string,
    messages: readonly ChatMessage[],
    renderOptions: RenderOptions,
  ): RenderedPrompt | undefined => {
    if (specialPattern === undefined) return undefined;
    const withEscapes = tryRun(() =>
      run(messages, renderOptions, (value) =>
        value.replace(specialPattern, (token) => `\uE002${specials.indexOf(token)}\uE003`),
      ),
    );
    if (withEscapes === undefined) return undefined;
    const segments = splitAtMarkers(withEscapes, ESCAPE, (index) => specials[index]);
    if (segments === undefined || joinSegments(segments) !== text) return undefined;
    return { text, segments, strategy: "escaped-specials" };
  };

  // Surfaces unsupported filters or syntax in the common path at start-up instead of on the first request.
  try {
    run([{ role: "user", content: "Hello" }], { enableThinking: false }, (value) => value);
  } catch (error) {
    throw new TemplateError(
      "render",
      `chat template cannot render a one-message conversation: ${errorMessage(error)}`,
      {
        cause: error,
      },
    );
  }

  return {
    renderDetailed,
    render: (messages, renderOptions) => renderDetailed(messages, renderOptions).segments,
  };
}

/** Maps each client string to a placeholder naming its index in `values` (where the string is pushed). */
function placeholderFor(values: string[]): StringMapper {
  return (value) => {
    // Edge whitespace stays outside the placeholder, so `trim`/`strip` on it act as on the real text (the
    // library trims with JavaScript's own whitespace set, as here).
    const start = value.length - value.trimStart().length;
    const end = value.trimEnd().length;
    if (start >= end) return value; // nothing to protect; an empty string must stay falsy for the template
    values.push(value.slice(start, end));
    return `${value.slice(0, start)}\uE000${values.length - 1}\uE001${value.slice(end)}`;
  };
}

const NINE_CHARACTER_IDS = /id\s*\|\s*length\s*!=\s*9/;

/** A stable 9-character alphanumeric id for any tool-call id. */
export function nineCharacterId(id: string): string {
  const digest = createHash("sha256").update(id).digest();
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let result = "";
  for (let i = 0; i < 9; i++) result += alphabet[(digest[i] ?? 0) % alphabet.length];
  return result;
}

function toTemplateMessage(message: ChatMessage, map: StringMapper, toolCallId = map): TemplateMessage {
  const calls = message.toolCalls;
  // "" rather than null for a call without text: templates test `'</think>' in content`, which fails on null.
  const result: TemplateMessage = { role: message.role, content: map(message.content) };
  // Absent keys, not undefined values: templates test `message.name is defined`.
  if (message.name !== undefined) result.name = map(message.name);
  if (message.toolCallId !== undefined) result.tool_call_id = toolCallId(message.toolCallId);
  if (calls !== undefined && calls.length > 0) {
    // Hugging Face convention: arguments as an object (templates apply `tojson` or iterate `items()`).
    result.tool_calls = calls.map((call) => ({
      id: toolCallId(call.id),
      type: "function",
      function: { name: map(call.name), arguments: mapStrings(parseArguments(call.arguments), map) },
    }));
  }
  return result;
}

/** Arguments sent back as JSON text become an object; anything else stays the client's string. */
function parseArguments(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null ? value : text;
  } catch {
    return text;
  }
}

/**
 * Applies the mapping to every string of a JSON-like value, and to object keys below `keepKeysDepth` levels
 * (a tool's own keys, `name`/`description`/`parameters`, are the template's vocabulary, not client text).
 */
function mapStrings(value: unknown, map: StringMapper, keepKeysDepth = 0): unknown {
  if (typeof value === "string") return map(value);
  if (Array.isArray(value)) return value.map((item) => mapStrings(item, map, keepKeysDepth - 1));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [
        keepKeysDepth > 0 ? key : map(key),
        mapStrings(item, map, keepKeysDepth - 1),
      ]),
    );
  }
  return value;
}

function raiseException(message: unknown): never {
  throw new TemplateError("raised", `chat template rejected the conversation: ${String(message)}`);
}

/** Runs a segmentation variant; any failure just means "try the next strategy". */
function tryRun(render: () => string): string | undefined {
  try {
    return render();
  } catch {
    return undefined;
  }
}

/**
 * Splits rendered text at markers: text between markers is special, each marker becomes a plain segment with its
 * value. Undefined when a marker names no value (a template mangled one).
 */
function splitAtMarkers(
  rendered: string,
  marker: RegExp,
  valueAt: (index: number) => string | undefined,
): PromptSegment[] | undefined {
  const segments: PromptSegment[] = [];
  let last = 0;
  for (const match of rendered.matchAll(marker)) {
    const value = valueAt(Number(match[1]));
    if (value === undefined) return undefined;
    pushSegment(segments, rendered.slice(last, match.index), true);
    pushSegment(segments, value, false);
    last = match.index + match[0].length;
  }
  pushSegment(segments, rendered.slice(last), true);
  return segments;
}

/**
 * Moves whitespace at the edges of template text into the neighbouring client text. Tokenizers glue a space or
 * newline to the following word (" Hello", "\n"), so a split between "[INST] " and "Hello" would tokenize
 * differently from the whole prompt; split at "[INST]" | " Hello" it tokenizes the same. Whitespace holds no
 * control token, so moving it is safe.
 */
function attachEdgeWhitespace(segments: readonly PromptSegment[]): PromptSegment[] {
  const result: PromptSegment[] = [];
  for (const [index, segment] of segments.entries()) {
    if (!segment.special) {
      pushSegment(result, segment.text, false);
      continue;
    }
    const afterPlain = segments[index - 1]?.special === false;
    const beforePlain = segments[index + 1]?.special === false;
    const trimmedStart = afterPlain ? segment.text.trimStart() : segment.text;
    const core = beforePlain ? trimmedStart.trimEnd() : trimmedStart;
    pushSegment(result, segment.text.slice(0, segment.text.length - trimmedStart.length), false);
    pushSegment(result, core, true);
    pushSegment(result, trimmedStart.slice(core.length), false);
  }
  return result;
}

function renderWithVerbatimSearch(text: string, messages: readonly ChatMessage[]): RenderedPrompt {
  const segments: PromptSegment[] = [];
  let cursor = 0;
  for (const message of messages) {
    if (message.content === "") continue;
    const at = text.indexOf(message.content, cursor);
    if (at < 0) continue; // transformed by the template: stays special (see RenderStrategy)
    pushSegment(segments, text.slice(cursor, at), true);
    pushSegment(segments, message.content, false);
    cursor = at + message.content.length;
  }
  pushSegment(segments, text.slice(cursor), true);
  return { text, segments, strategy: "verbatim-search" };
}

/** Appends, dropping empty text and merging with a neighbour of the same kind. */
function pushSegment(segments: PromptSegment[], text: string, special: boolean): void {
  if (text === "") return;
  const previous = segments.at(-1);
  if (previous !== undefined && previous.special === special) previous.text += text;
  else segments.push({ text, special });
}

function joinSegments(segments: readonly PromptSegment[]): string {
  return segments.map((segment) => segment.text).join("");
}

/** Renames an identifier everywhere in a parsed template (walks the AST generically: its classes are internal). */
function renameIdentifier(node: unknown, from: string, to: string, seen = new Set<object>()): void {
  if (typeof node !== "object" || node === null || seen.has(node)) return;
  seen.add(node);
  const record = node as Record<string, unknown>;
  if (record.type === "Identifier" && record.value === from) record.value = to;
  for (const child of Object.values(record)) renameIdentifier(child, from, to, seen);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
