// The output items of one response built from the engine's events (reasoning, message, function calls), as steps
// the streamed events follow one by one and the non-streamed body reads at the end: one state machine for both.
import type { FinishReason, GenerationEvent, UsageCounts } from "../../../engine/types.js";
import { ID_PREFIXES } from "../../../store/ids.js";
import { toolCallId } from "../wire.js";

export type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface OutputText {
  type: "output_text";
  text: string;
  annotations: [];
}

export interface MessageItem {
  id: string;
  type: "message";
  status: ItemStatus;
  role: "assistant";
  content: OutputText[];
}

export interface FunctionCallItem {
  id: string;
  type: "function_call";
  status: ItemStatus;
  call_id: string;
  name: string;
  arguments: string;
}

export interface ReasoningText {
  type: "reasoning_text";
  text: string;
}

/** Hearth's reasoning is the model's own text (`content`); there is no summary. */
export interface ReasoningItem {
  id: string;
  type: "reasoning";
  summary: [];
  content: ReasoningText[];
}

export type OutputItem = MessageItem | FunctionCallItem | ReasoningItem;

/** What changed: an item opened, text appended to the open item, or the open item closed (its final form). */
export type OutputStep =
  | { kind: "open"; index: number; item: OutputItem }
  | { kind: "delta"; index: number; item: OutputItem; text: string }
  | { kind: "close"; index: number; item: OutputItem };

/**
 * An output item's id: its kind's prefix, its response's id and its place in the output (`msg_<response>2`), so an
 * `item_reference` finds its response (outputItemPlace) without a search of every stored item.
 */
export function outputItemId(
  kind: "message" | "functionCall" | "reasoning",
  responseId: string,
  index: number,
): string {
  return `${ID_PREFIXES[kind]}_${responseId.slice(responseId.indexOf("_") + 1)}${index}`;
}

/** The response id and output index an output item's id names; undefined for an id Hearth did not make so. */
export function outputItemPlace(itemId: string): { responseId: string; index: number } | undefined {
  const match = /^(?:msg|fc|rs)_([0-9A-Za-z]{22})(0|[1-9][0-9]{0,5})$/.exec(itemId);
  if (match === null) return undefined;
  return { responseId: `${ID_PREFIXES.response}_${match[1]}`, index: Number(match[2]) };
}

/** Accumulates choice 0 of a generation (a Responses request asks for one). */
export class ResponseOutput {
  readonly items: OutputItem[] = [];
  reason: FinishReason | undefined;
  usage: UsageCounts | undefined;
  private open: OutputItem | undefined;
  /** The engine's call number → its item. */
  private readonly calls = new Map<number, FunctionCallItem>();

  /** `responseId`: the `resp_…` id the items' ids are made from. */
  constructor(private readonly responseId: string) {}

  private itemId(kind: "message" | "functionCall" | "reasoning"): string {
    return outputItemId(kind, this.responseId, this.items.length);
  }

  /** Applies one engine event; returns the steps it made, in order. */
  apply(event: GenerationEvent): OutputStep[] {
    if (event.type === "usage") {
      this.usage = event.usage;
      return [];
    }
    if (event.choice !== 0) return [];
    if (event.type === "finish") {
      this.reason = event.reason;
      return this.close(event.reason === "length" ? "incomplete" : "completed");
    }
    const steps: OutputStep[] = [];
    const target = event.target;
    if (target === undefined || target.kind === "reasoning") {
      // Nothing opens for empty text: a reply of calls only has no message item.
      if (event.text === "") return steps;
      const type = target === undefined ? "message" : "reasoning";
      if (this.open?.type !== type) {
        steps.push(...this.close("completed"));
        steps.push(
          this.start(
            type === "message" ? newMessage(this.itemId("message")) : newReasoning(this.itemId("reasoning")),
          ),
        );
      }
      return [...steps, this.append(this.open as OutputItem, event.text)];
    }
    if (target.name !== undefined) {
      steps.push(...this.close("completed"));
      const call: FunctionCallItem = {
        id: this.itemId("functionCall"),
        type: "function_call",
        status: "in_progress",
        call_id: toolCallId(),
        name: target.name,
        arguments: "",
      };
      this.calls.set(target.call, call);
      steps.push(this.start(call));
    }
    const call = this.calls.get(target.call);
    if (call === undefined || event.text === "") return steps;
    if (call !== this.open) {
      // Fragments of an earlier call (an engine does not interleave them): kept, though its item is closed.
      call.arguments += event.text;
      return steps;
    }
    return [...steps, this.append(call, event.text)];
  }

  /**
   * Closes the open item (end of the generation, or a cancel that never finished). A reply with no item at all
   * (the model ended at once) is one empty message, as OpenAI answers: clients read the last message's text.
   */
  finish(): OutputStep[] {
    const status = this.reason === "length" ? "incomplete" : "completed";
    const steps = this.close(status);
    if (this.items.length === 0)
      steps.push(this.start(newMessage(this.itemId("message"))), ...this.close(status));
    return steps;
  }

  private start(item: OutputItem): OutputStep {
    this.items.push(item);
    this.open = item;
    return { kind: "open", index: this.items.length - 1, item };
  }

  private append(item: OutputItem, text: string): OutputStep {
    if (item.type === "function_call") item.arguments += text;
    else (item.content[0] as OutputText | ReasoningText).text += text;
    return { kind: "delta", index: this.items.indexOf(item), item, text };
  }

  private close(status: "completed" | "incomplete"): OutputStep[] {
    const item = this.open;
    if (item === undefined) return [];
    this.open = undefined;
    if (item.type !== "reasoning") item.status = status;
    return [{ kind: "close", index: this.items.indexOf(item), item }];
  }
}

function newMessage(id: string): MessageItem {
  return {
    id,
    type: "message",
    status: "in_progress",
    role: "assistant",
    content: [{ type: "output_text", text: "", annotations: [] }],
  };
}

function newReasoning(id: string): ReasoningItem {
  return {
    id,
    type: "reasoning",
    summary: [],
    content: [{ type: "reasoning_text", text: "" }],
  };
}
