// How a model writes tool calls (the envelope around name and arguments) and what a chat template can do.

/**
 * - `hermes`: `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, calls separated by a newline
 *   (Qwen2.5/Qwen3, Hermes; also Hearth's prompted format for templates without tools).
 * - `llama3-json`: `{"name": "f", "parameters": {...}}`, one call (Llama 3.1/3.2 JSON tool calling).
 * - `mistral`: `[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]` (Mistral v3 / Nemo).
 */
export type ToolCallFormat = "hermes" | "llama3-json" | "mistral";

export interface ToolEnvelope {
  /** Before the first call. */
  open: string;
  /** Before each call's name. */
  beforeName: string;
  /** Between the name and the arguments. */
  beforeArguments: string;
  /** After each call's arguments. */
  afterCall: string;
  /** Between two calls; undefined when the format has a single call. */
  separator: string | undefined;
  /** After the last call. */
  close: string;
  /**
   * The text that opens a call in this format and never belongs in a reply's text: with tool_choice auto, the
   * text alternative may not contain it, so a call is either made in full (and validated) or not at all.
   * Undefined where the call's start is ordinary text (a JSON object).
   */
  marker: string | undefined;
}

export const TOOL_ENVELOPES: Readonly<Record<ToolCallFormat, ToolEnvelope>> = Object.freeze({
  hermes: {
    open: "",
    beforeName: '<tool_call>\n{"name": "',
    beforeArguments: '", "arguments": ',
    afterCall: "}\n</tool_call>",
    separator: "\n",
    close: "",
    marker: "<tool_call>",
  },
  "llama3-json": {
    open: "",
    beforeName: '{"name": "',
    beforeArguments: '", "parameters": ',
    afterCall: "}",
    separator: undefined,
    close: "",
    marker: undefined,
  },
  mistral: {
    open: "[TOOL_CALLS][",
    beforeName: '{"name": "',
    beforeArguments: '", "arguments": ',
    afterCall: "}",
    separator: ", ",
    close: "]",
    marker: "[TOOL_CALLS]",
  },
});

/** The start of a reply that is a tool call: everything up to the first call's name. */
export function callStart(format: ToolCallFormat): string {
  const envelope = TOOL_ENVELOPES[format];
  return envelope.open + envelope.beforeName;
}

export interface TemplateCapabilities {
  /** The template renders `tools` itself, and this is the call format its model was trained on. */
  tools: ToolCallFormat | undefined;
  /** The template knows `<think>` (Qwen3's enable_thinking, DeepSeek-R1's pre-opened block): reasoning is native. */
  nativeThinking: boolean;
}

/** Reads a chat template's capabilities from its text (the markers its model family uses). */
export function detectCapabilities(template: string): TemplateCapabilities {
  const rendersTools = /\btools\b/.test(template);
  let tools: ToolCallFormat | undefined;
  if (rendersTools) {
    if (template.includes("<tool_call>")) tools = "hermes";
    else if (template.includes("[TOOL_CALLS]") && template.includes("[AVAILABLE_TOOLS]")) tools = "mistral";
    else if (template.includes("<|start_header_id|>") && template.includes('"parameters"'))
      tools = "llama3-json";
  }
  return { tools, nativeThinking: template.includes("<think>") || template.includes("enable_thinking") };
}
