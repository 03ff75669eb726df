// Splits a choice's generated text, as it streams, into reasoning, content and tool-call fragments.

import {
  callStart,
  TOOL_ENVELOPES,
  type ToolCallFormat,
  type ToolEnvelope,
} from "../template/tool-format.js";
import { JsonScanner } from "./json-scanner.js";

export type OutputPart =
  | { kind: "content"; text: string }
  | { kind: "reasoning"; text: string }
  | { kind: "tool_call"; call: number; name: string }
  | { kind: "tool_arguments"; call: number; text: string };

export interface OutputParserOptions {
  /** Parse a `<think>` block: `prompted`/`native` (enabled), `off` (the text is all answer). */
  reasoning: "off" | "on";
  /** The rendered prompt left a `<think>` open: the output starts inside the reasoning. */
  startsInReasoning: boolean;
  /** Tool calls to recognise, and whether the answer must be calls (`required`) or may be text (`auto`). */
  tools: { format: ToolCallFormat; mode: "auto" | "required" } | undefined;
  /** The answer is one JSON value (JSON mode): tracked for the budget. */
  json: boolean;
}

export interface ParsedToolCall {
  name: string;
  arguments: string;
  /** The arguments' JSON value ended (the call is whole). */
  complete: boolean;
}

const OPEN = "<think>";
const CLOSE = "</think>";

type Phase =
  | { at: "start" }
  | { at: "reasoning" }
  | { at: "answer-start" }
  | { at: "content" }
  | { at: "calls"; step: CallStep };

type CallStep =
  | { expect: "literal"; text: string; next: CallStep }
  | { expect: "name"; name: string }
  | { expect: "arguments"; scanner: JsonScanner }
  | { expect: "next" }
  | { expect: "end" };

/**
 * Push text in any chunking (tags may be split anywhere); the parts out depend only on the whole text. Text that
 * could still be the start of a tag or of a tool call is held back until it is decided.
 */
export class OutputParser {
  readonly #options: OutputParserOptions;
  readonly #envelope: ToolEnvelope | undefined;
  #phase: Phase;
  #held = "";
  /** Reasoning whitespace not yet known to be followed by more reasoning (trailing whitespace is dropped). */
  #reasoningSpace = "";
  #reasoningStarted = false;
  #answer = "";
  readonly #answerScanner = new JsonScanner();
  readonly #calls: ParsedToolCall[] = [];

  constructor(options: OutputParserOptions) {
    this.#options = options;
    this.#envelope = options.tools === undefined ? undefined : TOOL_ENVELOPES[options.tools.format];
    if (options.reasoning === "on")
      this.#phase = options.startsInReasoning ? { at: "reasoning" } : { at: "start" };
    else this.#phase = { at: "answer-start" };
  }

  /** True while the reasoning block is open. */
  get inReasoning(): boolean {
    return this.#phase.at === "reasoning" || this.#phase.at === "start";
  }

  /**
   * True while structured output (a JSON answer or a tool call) is due or being written: its closing needs budget.
   * A JSON answer counts from before its first character, so a tiny budget starts it as `{}`.
   */
  get inStructure(): boolean {
    const at = this.#phase.at;
    if (at === "calls") return true;
    return this.#options.json && (at === "content" || at === "answer-start");
  }

  /** Open brackets and strings of the structure being written. */
  get openCount(): number {
    return this.scanner?.openCount ?? 1;
  }

  /** The scanner of the JSON value being written (a JSON answer or a call's arguments), if one is. */
  get scanner(): JsonScanner | undefined {
    const phase = this.#phase;
    if (phase.at === "calls") return phase.step.expect === "arguments" ? phase.step.scanner : undefined;
    const answering = phase.at === "content" || phase.at === "answer-start";
    return this.#options.json && answering ? this.#answerScanner : undefined;
  }

  get toolCalls(): readonly ParsedToolCall[] {
    return this.#calls;
  }

  /** The answer's content text (outside tool calls). */
  get content(): string {
    return this.#answer;
  }

  push(text: string): OutputPart[] {
    const out: OutputPart[] = [];
    this.#held += text;
    this.#drain(out, false);
    return out;
  }

  /** End of generation: releases whatever was held back. */
  finish(): OutputPart[] {
    const out: OutputPart[] = [];
    this.#drain(out, true);
    if (this.#phase.at === "calls") this.#held = ""; // the rest of a call's envelope, cut off by the budget
    if (this.#held !== "") {
      // Only an undecided prefix can be left: it was never a tag or a call, so it is what it looks like.
      if (this.inReasoning) this.#emitReasoning(out, this.#held, true);
      else this.#emitContent(out, this.#held);
      this.#held = "";
    }
    this.#answerScanner.finish();
    return out;
  }

  #drain(out: OutputPart[], final: boolean): void {
    let progressed = true;
    while (progressed && this.#held !== "") {
      progressed = this.#step(out, final);
    }
  }

  /** One decision on the held text; false when more text is needed. */
  #step(out: OutputPart[], final: boolean): boolean {
    const phase = this.#phase;
    const held = this.#held;
    switch (phase.at) {
      case "start": {
        const trimmed = held.trimStart();
        if (trimmed === "") return false;
        if (trimmed.startsWith(OPEN)) {
          this.#held = trimmed.slice(OPEN.length);
          this.#phase = { at: "reasoning" };
          return true;
        }
        if (OPEN.startsWith(trimmed) && !final) return false;
        this.#phase = { at: "answer-start" };
        return true;
      }
      case "reasoning": {
        const end = held.indexOf(CLOSE);
        if (end >= 0) {
          this.#emitReasoning(out, held.slice(0, end), true);
          this.#held = held.slice(end + CLOSE.length);
          this.#phase = { at: "answer-start" };
          return true;
        }
        const keep = final ? 0 : partialSuffix(held, CLOSE);
        this.#emitReasoning(out, held.slice(0, held.length - keep), false);
        this.#held = held.slice(held.length - keep);
        return false;
      }
      case "answer-start": {
        // After reasoning the answer starts at its first visible character.
        const text = this.#options.reasoning === "on" ? held.trimStart() : held;
        if (text === "") {
          this.#held = "";
          return false;
        }
        const tools = this.#options.tools;
        if (tools === undefined) {
          this.#held = text;
          this.#phase = { at: "content" };
          return true;
        }
        const start = callStart(tools.format);
        const candidate = text.trimStart();
        if (candidate.startsWith(start)) {
          this.#held = candidate.slice(start.length);
          this.#phase = { at: "calls", step: { expect: "name", name: "" } };
          return true;
        }
        if (start.startsWith(candidate) && !final) {
          this.#held = text;
          return false;
        }
        this.#held = text;
        this.#phase = { at: "content" };
        return true;
      }
      case "content":
        this.#emitContent(out, held);
        this.#held = "";
        return false;
      case "calls":
        return this.#callStep(out, phase.step, final);
      default:
        return phase satisfies never;
    }
  }

  #callStep(out: OutputPart[], step: CallStep, final: boolean): boolean {
    const envelope = this.#envelope as ToolEnvelope;
    const held = this.#held;
    switch (step.expect) {
      case "literal": {
        if (held.startsWith(step.text)) {
          this.#held = held.slice(step.text.length);
          this.#phase = { at: "calls", step: step.next };
          return true;
        }
        if (step.text.startsWith(held) && !final) return false;
        return this.#abandonCalls();
      }
      case "name": {
        const quote = held.indexOf('"');
        if (quote < 0) {
          step.name += held;
          this.#held = "";
          return false;
        }
        const name = step.name + held.slice(0, quote);
        this.#calls.push({ name, arguments: "", complete: false });
        out.push({ kind: "tool_call", call: this.#calls.length - 1, name });
        this.#held = held.slice(quote);
        const rest = envelope.beforeArguments;
        this.#phase = {
          at: "calls",
          step: { expect: "literal", text: rest, next: { expect: "arguments", scanner: new JsonScanner() } },
        };
        return true;
      }
      case "arguments": {
        const used = step.scanner.push(held);
        const call = this.#calls.at(-1) as ParsedToolCall;
        const piece = held.slice(0, used);
        if (piece !== "") {
          call.arguments += piece;
          out.push({ kind: "tool_arguments", call: this.#calls.length - 1, text: piece });
        }
        this.#held = held.slice(used);
        if (!step.scanner.done) return false;
        call.complete = true;
        this.#phase = {
          at: "calls",
          step: { expect: "literal", text: envelope.afterCall, next: { expect: "next" } },
        };
        return true;
      }
      case "next": {
        const separator = envelope.separator;
        const next = separator === undefined ? undefined : separator + envelope.beforeName;
        if (next !== undefined && held.startsWith(next)) {
          this.#held = held.slice(next.length);
          this.#phase = { at: "calls", step: { expect: "name", name: "" } };
          return true;
        }
        if (envelope.close !== "" && held.startsWith(envelope.close)) {
          this.#held = held.slice(envelope.close.length);
          this.#phase = { at: "calls", step: { expect: "end" } };
          return true;
        }
        const undecided = next?.startsWith(held) === true || envelope.close.startsWith(held);
        if (undecided && !final) return false;
        this.#phase = { at: "calls", step: { expect: "end" } };
        return true;
      }
      case "end":
        // Text after the calls (only whitespace under a grammar) is not part of the reply.
        this.#held = "";
        return false;
      default:
        return step satisfies never;
    }
  }

  /** Text that looked like a call and was not one (only without a grammar): it is content after all. */
  #abandonCalls(): boolean {
    this.#phase = { at: "content" };
    return true;
  }

  #emitReasoning(out: OutputPart[], text: string, closing: boolean): void {
    let body = text;
    if (!this.#reasoningStarted) {
      body = body.trimStart();
      if (body === "") return;
      this.#reasoningStarted = true;
    }
    const visible = body.trimEnd();
    const space = body.slice(visible.length);
    if (visible !== "") {
      out.push({ kind: "reasoning", text: this.#reasoningSpace + visible });
      this.#reasoningSpace = "";
    }
    this.#reasoningSpace = closing ? "" : this.#reasoningSpace + space;
  }

  #emitContent(out: OutputPart[], text: string): void {
    if (text === "") return;
    this.#answer += text;
    if (this.#options.json) this.#answerScanner.push(text);
    out.push({ kind: "content", text });
  }
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialSuffix(text: string, tag: string): number {
  for (let length = Math.min(tag.length - 1, text.length); length > 0; length--) {
    if (text.endsWith(tag.slice(0, length))) return length;
  }
  return 0;
}

/** Whether a rendered prompt ends inside an open `<think>` block (DeepSeek-R1 opens it in the generation prompt). */
export function endsInsideThinking(prompt: string): boolean {
  const open = prompt.lastIndexOf(OPEN);
  return open >= 0 && prompt.indexOf(CLOSE, open) < 0;
}
