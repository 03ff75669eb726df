// Turns a request's output options (JSON mode, tools, reasoning) into prompt changes, a grammar and parser options.
import type { ChatMessage, OutputRequest, ToolDefinition } from "../../engine/types.js";
import type { CompiledSchema } from "../schema/compiled-schema.js";
import { GrammarBuilder, literal } from "../schema/gbnf.js";
import { validateJson } from "../schema/json-schema.js";
import { markerFreeTextRule } from "../schema/marker-free-text.js";
import { type TemplateCapabilities, TOOL_ENVELOPES, type ToolCallFormat } from "../template/tool-format.js";
import { endsInsideThinking, type OutputParser, type OutputParserOptions } from "./parser.js";

export type ReasoningMode = "off" | "native" | "prompted";

/** What to render: the messages (with Hearth's instructions) and the tools the template renders itself. */
export interface PromptPlan {
  messages: ChatMessage[];
  /** Passed to the template as `tools` (only when it renders tools itself). */
  templateTools: ToolDefinition[] | undefined;
  reasoning: ReasoningMode;
}

/** What to generate with, once the prompt is rendered. */
export interface GenerationPlan {
  /** Template text appended to the rendered prompt (a pre-opened or a closed `<think>` block). */
  promptSuffix: string;
  /** GBNF, or undefined for unconstrained text. */
  grammar: string | undefined;
  parser: OutputParserOptions;
  /** The shortest complete answer: when even this does not fit in max_tokens, the reply may end by length. */
  minimalAnswer: string;
  /** Text that closes a tool call after its arguments (part of every call's budget). */
  closingText: string;
  /** Checks a finished choice against the request (never expected to fail under the grammar); the reason if not. */
  validate(parser: OutputParser): string | undefined;
}

// The prompted formats for templates without tools or thinking (documented in docs/structured-output.md).
export const TOOL_SECTION_INTRO =
  "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>";
export const TOOL_SECTION_OUTRO =
  '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';
const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
export const REASONING_INSTRUCTION =
  "Think step by step before answering. Write your reasoning between <think> and </think>, then write your final answer after </think>.";

/** How the tools a request may use are presented, and how strongly a call is required. */
interface ToolUse {
  tools: ToolDefinition[];
  /** Tools the grammar allows (all of them, the named one, or the allowed ones). */
  callable: ToolDefinition[];
  mode: "auto" | "required";
  parallel: boolean;
}

/**
 * Every tool is shown to the model whatever `tool_choice` says (the prompt, and so its cached prefix, is the same
 * for every choice, as OpenAI documents for allowed_tools); the choice narrows only what the grammar lets it call.
 */
function toolUse(output: OutputRequest | undefined): ToolUse | undefined {
  if (output === undefined || output.tools.length === 0 || output.toolChoice === "none") return undefined;
  const choice = output.toolChoice;
  const tools = output.tools;
  if (typeof choice === "string") {
    return { tools, callable: tools, mode: choice, parallel: output.parallelToolCalls };
  }
  if ("name" in choice) {
    return {
      tools,
      callable: tools.filter((t) => t.name === choice.name),
      mode: "required",
      parallel: false,
    };
  }
  const callable = tools.filter((t) => choice.allowed.includes(t.name));
  return { tools, callable, mode: choice.mode, parallel: output.parallelToolCalls };
}

export function toolFormatFor(capabilities: TemplateCapabilities): ToolCallFormat {
  return capabilities.tools ?? "hermes";
}

export function planPrompt(
  messages: readonly ChatMessage[],
  output: OutputRequest | undefined,
  enableThinking: boolean,
  capabilities: TemplateCapabilities,
): PromptPlan {
  const reasoning: ReasoningMode = !enableThinking
    ? "off"
    : capabilities.nativeThinking
      ? "native"
      : "prompted";
  const use = toolUse(output);
  const instructions: string[] = [];
  let templateTools: ToolDefinition[] | undefined;
  if (use !== undefined) {
    if (capabilities.tools !== undefined) templateTools = use.tools;
    else instructions.push(toolSection(use.tools));
  }
  if (reasoning === "prompted") instructions.push(REASONING_INSTRUCTION);
  // A template without tools ignores `tool_calls`: earlier calls become text in the prompted format instead.
  const rendered = capabilities.tools === undefined ? messages.map(callsAsText) : [...messages];
  return { messages: withSystemText(rendered, instructions), templateTools, reasoning };
}

function callsAsText(message: ChatMessage): ChatMessage {
  const calls = message.toolCalls;
  if (calls === undefined || calls.length === 0) return message;
  const envelope = TOOL_ENVELOPES.hermes;
  const text = calls
    .map(
      (call) =>
        `${envelope.beforeName}${call.name}${envelope.beforeArguments}${call.arguments}${envelope.afterCall}`,
    )
    .join(envelope.separator);
  const { toolCalls: _, ...rest } = message;
  return { ...rest, content: message.content === "" ? text : `${message.content}\n${text}` };
}

/** The system-prompt section describing tools for templates without tool support (Qwen's wording). */
export function toolSection(tools: readonly ToolDefinition[]): string {
  const lines = tools.map((tool) => JSON.stringify({ type: "function", function: toolJson(tool) }));
  return `${TOOL_SECTION_INTRO}\n${lines.join("\n")}${TOOL_SECTION_OUTRO}`;
}

/** The OpenAI function object as templates expect it. */
export function toolJson(tool: ToolDefinition): Record<string, unknown> {
  const json: Record<string, unknown> = { name: tool.name };
  if (tool.description !== undefined) json.description = tool.description;
  json.parameters = tool.parameters ?? { type: "object", properties: {} };
  return json;
}

function withSystemText(messages: readonly ChatMessage[], instructions: readonly string[]): ChatMessage[] {
  if (instructions.length === 0) return [...messages];
  const text = instructions.join("\n\n");
  const [first, ...rest] = messages;
  if (first?.role === "system") return [{ ...first, content: `${first.content}\n\n${text}` }, ...rest];
  return [{ role: "system", content: text }, ...messages];
}

/**
 * The first character of prompted reasoning: neither `<` (the block would close empty) nor whitespace. Reasoning is
 * trimmed at both ends, so a block of only whitespace would reach the client as an empty `reasoning` although
 * thinking was asked for and enforced; the set is what String.prototype.trim removes.
 */
const VISIBLE_THOUGHT_START =
  "[^<\\x09-\\x0d\\x20\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]";

export function planGeneration(
  prompt: PromptPlan,
  renderedPrompt: string,
  output: OutputRequest | undefined,
  capabilities: TemplateCapabilities,
): GenerationPlan {
  const openInPrompt = endsInsideThinking(renderedPrompt);
  let promptSuffix = "";
  let startsInReasoning = false;
  if (prompt.reasoning === "prompted") {
    promptSuffix = "<think>\n";
    startsInReasoning = true;
  } else if (prompt.reasoning === "native") {
    startsInReasoning = openInPrompt;
  } else if (openInPrompt) {
    // A template that always opens <think> (DeepSeek-R1) with reasoning off: close it, so nothing is reasoned.
    promptSuffix = "\n</think>\n\n";
  }

  const use = toolUse(output);
  const format = toolFormatFor(capabilities);
  // The API compiled every schema when it checked it; the plan uses those, never compiling again.
  const schema = output?.format.type === "json_schema" ? output.format.compiled : undefined;
  const json = output?.format.type === "json_object" || schema !== undefined;
  const schemas = new Map(use?.callable.map((t) => [t.name, t.compiledParameters]) ?? []);

  const g = new GrammarBuilder();
  let answer: string | undefined;
  if (json) answer = schema === undefined ? g.freeObject() : g.schema(schema, "answer");
  if (use !== undefined) {
    const calls = callsRule(g, use, format, schemas);
    // With tool_choice auto the reply is text or calls, never text with a call's marker in it (a half call that
    // no client could use): the text alternative cannot contain the marker.
    const marker = TOOL_ENVELOPES[format].marker;
    const rest = marker === undefined ? ".*" : markerFreeTextRule(g, marker, "text-rest");
    const text = answer ?? g.rule("free-text", `[^ \\t\\n\\r<\\[{] ${rest}`);
    answer = use.mode === "required" ? calls : g.rule("answer", `${calls} | ${text}`);
  }
  const constrained = answer !== undefined;
  let grammar: string | undefined;
  if (prompt.reasoning === "prompted") {
    g.rule("thought", `${VISIBLE_THOUGHT_START} [^<]*`);
    // The block is closed once: an answer with a think tag in it would hand the client a stray tag in content.
    const text = () =>
      g.rule("text", `[^ \\t\\n\\r<] ${markerFreeTextRule(g, [THINK_OPEN, THINK_CLOSE], "text-rest")}`);
    grammar = g.build(`thought "</think>" [\\n]{0,2} ${answer ?? text()}`);
  } else if (constrained && answer !== undefined) {
    if (prompt.reasoning === "native") {
      g.rule("thought", '( [^<] | "<" [^/] )*');
      const think = startsInReasoning ? `thought "</think>" ws` : `( "<think>" thought "</think>" ws )?`;
      g.primitive("ws");
      grammar = g.build(`${think} ${answer}`);
    } else {
      grammar = g.build(answer);
    }
  }

  const envelope = TOOL_ENVELOPES[format];
  const minimalAnswer =
    use !== undefined && use.mode === "required"
      ? shortestCall(use, format, schemas)
      : json
        ? (schema?.minimal ?? "{}")
        : "";
  return {
    promptSuffix,
    grammar,
    parser: {
      reasoning: prompt.reasoning === "off" ? "off" : "on",
      startsInReasoning,
      tools: use === undefined ? undefined : { format, mode: use.mode },
      json,
    },
    minimalAnswer,
    closingText: use === undefined ? "" : envelope.afterCall + envelope.close,
    validate: (parser) => validateOutput(parser, json, schema, schemas),
  };
}

function callsRule(
  g: GrammarBuilder,
  use: ToolUse,
  format: ToolCallFormat,
  schemas: ReadonlyMap<string, CompiledSchema>,
): string {
  const envelope = TOOL_ENVELOPES[format];
  const alternatives = use.callable.map((tool, i) => {
    const compiled = schemas.get(tool.name) as CompiledSchema;
    const args = compiled.root.kind === "any" ? g.freeObject() : g.schema(compiled, `tool-${i}`);
    return g.rule(
      `call-${i}`,
      `${literal(envelope.beforeName + tool.name + envelope.beforeArguments)} ${args} ${literal(envelope.afterCall)}`,
    );
  });
  const call = g.rule("call", alternatives.join(" | "));
  const many = use.parallel && envelope.separator !== undefined;
  const body = many ? `${call} ( ${literal(envelope.separator as string)} ${call} )*` : call;
  const open = envelope.open === "" ? "" : `${literal(envelope.open)} `;
  const close = envelope.close === "" ? "" : ` ${literal(envelope.close)}`;
  return g.rule("calls", `${open}${body}${close}`);
}

function shortestCall(
  use: ToolUse,
  format: ToolCallFormat,
  schemas: ReadonlyMap<string, CompiledSchema>,
): string {
  const envelope = TOOL_ENVELOPES[format];
  const calls = use.callable.map((tool) => {
    const args = (schemas.get(tool.name) as CompiledSchema).minimal;
    return (
      envelope.open +
      envelope.beforeName +
      tool.name +
      envelope.beforeArguments +
      args +
      envelope.afterCall +
      envelope.close
    );
  });
  return calls.sort((a, b) => a.length - b.length)[0] ?? "";
}

function validateOutput(
  parser: OutputParser,
  json: boolean,
  schema: CompiledSchema | undefined,
  tools: ReadonlyMap<string, CompiledSchema>,
): string | undefined {
  for (const call of parser.toolCalls) {
    const compiled = tools.get(call.name);
    if (compiled === undefined) return `tool call to unknown function '${call.name}'`;
    const value = parseJson(call.arguments);
    if (value === undefined) return `arguments of '${call.name}' are not JSON`;
    const error = validateJson(compiled, value.value);
    if (error !== undefined) return `arguments of '${call.name}': ${error}`;
  }
  if (json && parser.toolCalls.length === 0) {
    const value = parseJson(parser.content);
    if (value === undefined) return "content is not JSON";
    if (schema !== undefined) return validateJson(schema, value.value);
    if (typeof value.value !== "object" || value.value === null || Array.isArray(value.value)) {
      return "content is not a JSON object";
    }
  }
  return undefined;
}

function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}
