// The Responses API's input items (messages, function calls and their outputs, reasoning) as chat-completions
// messages, and the way back: a chat parameter path (`messages[3].content`) as the Responses field it came from.
import { z } from "zod";
import { newObjectId } from "../../../store/ids.js";

/** Drops null fields: OpenAI treats null as absent in every optional field, items' fields too. */
export function dropNullFields(value: unknown): unknown {
  if (!isRecord(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null));
}

/** Parts Hearth's models cannot read: refused by name, never dropped (no served model reads images, files or audio). */
const UNREADABLE_PARTS = new Set(["input_image", "input_file", "input_audio"]);

const unreadable = (type: string) =>
  `Content parts of type '${type}' are not supported: Hearth's models read text only. Send the text as 'input_text' parts.`;

const inputTextPart = z.strictObject({
  type: z.literal("input_text"),
  text: z.string(),
  // OpenAI's explicit cache breakpoint: Hearth caches every prefix anyway.
  prompt_cache_breakpoint: z.unknown().optional(),
});
const outputTextPart = z.strictObject({
  type: z.literal("output_text"),
  text: z.string(),
  // An earlier reply sent back as it came: its annotations and logprobs are not put into the prompt.
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).optional(),
  // What openai-node's `parse` adds to a part (the parsed object): the text is what counts.
  parsed: z.unknown().optional(),
});
const refusalPart = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });

/** A part of a known type is checked by its own schema; an unreadable or unknown one is named in the 400. */
const messagePartSchema = z.preprocess(
  dropNullFields,
  z
    .looseObject({ type: z.string() })
    .superRefine((part, ctx) => {
      if (UNREADABLE_PARTS.has(part.type)) {
        ctx.addIssue({ code: "custom", path: ["type"], message: unreadable(part.type) });
      } else if (!["input_text", "output_text", "refusal"].includes(part.type)) {
        ctx.addIssue({
          code: "custom",
          path: ["type"],
          message: `Invalid value for 'type': '${part.type}'. Supported content parts are 'input_text', 'output_text' and 'refusal'.`,
        });
      }
    })
    .pipe(z.discriminatedUnion("type", [inputTextPart, outputTextPart, refusalPart])),
);

const ITEM_STATUS = z.enum(["in_progress", "completed", "incomplete"]);

const messageItem = z.strictObject({
  type: z.literal("message"),
  role: z.enum(["user", "system", "developer", "assistant"]),
  content: z.union([z.string(), z.array(messagePartSchema)]),
  id: z.string().optional(),
  status: ITEM_STATUS.optional(),
  // The assistant's `commentary` / `final_answer` label: sent back as it came, not rendered.
  phase: z.enum(["commentary", "final_answer"]).optional(),
});

const functionCallItem = z.strictObject({
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  id: z.string().optional(),
  status: ITEM_STATUS.optional(),
  caller: z.unknown().optional(),
  // What openai-node's `stream` and `parse` add to a call (its arguments parsed): `arguments` is the text.
  parsed_arguments: z.unknown().optional(),
});

const functionOutputPart = z.preprocess(
  dropNullFields,
  z
    .looseObject({ type: z.string() })
    .superRefine((part, ctx) => {
      if (UNREADABLE_PARTS.has(part.type))
        ctx.addIssue({ code: "custom", path: ["type"], message: unreadable(part.type) });
    })
    .pipe(inputTextPart),
);

const functionCallOutputItem = z.strictObject({
  type: z.literal("function_call_output"),
  call_id: z.string(),
  output: z.union([z.string(), z.array(functionOutputPart)]),
  id: z.string().optional(),
  status: ITEM_STATUS.optional(),
  caller: z.unknown().optional(),
});

const reasoningItem = z.strictObject({
  type: z.literal("reasoning"),
  id: z.string().optional(),
  summary: z.array(z.strictObject({ type: z.literal("summary_text"), text: z.string() })).optional(),
  content: z.array(z.strictObject({ type: z.literal("reasoning_text"), text: z.string() })).optional(),
  // Another server's encrypted reasoning: Hearth cannot read it and does not need it.
  encrypted_content: z.string().optional(),
  status: ITEM_STATUS.optional(),
});

/** An earlier output item by its id (what the AI SDK sends for earlier turns when its `store` is on). */
const itemReference = z.strictObject({ type: z.literal("item_reference"), id: z.string().min(1).max(256) });

const ITEM_TYPES = ["message", "function_call", "function_call_output", "reasoning", "item_reference"];

/** An input item; `type` may be left out of a message (`{"role": "user", "content": "Hi"}`), as OpenAI allows. */
export const inputItemSchema = z.preprocess(
  (value) => {
    const item = dropNullFields(value);
    if (!isRecord(item) || item.type !== undefined) return item;
    if ("role" in item) return { ...item, type: "message" };
    return "id" in item ? { ...item, type: "item_reference" } : item;
  },
  z
    .looseObject({ type: z.string() })
    .superRefine((item, ctx) => {
      if (!ITEM_TYPES.includes(item.type)) {
        ctx.addIssue({
          code: "custom",
          path: ["type"],
          message:
            `Input items of type '${item.type}' are not supported: Hearth takes 'message', 'function_call', ` +
            "'function_call_output', 'reasoning' and 'item_reference' items (built-in tools and compaction are not served).",
        });
      }
    })
    .pipe(
      z.discriminatedUnion("type", [
        messageItem,
        functionCallItem,
        functionCallOutputItem,
        reasoningItem,
        itemReference,
      ]),
    ),
);

/** An input item as sent: references not yet resolved. */
export type InputItem = z.output<typeof inputItemSchema>;
/** An input item with every reference replaced by the item it names. */
export type ResolvedItem = Exclude<InputItem, { type: "item_reference" }>;
type MessageItem = Extract<ResolvedItem, { type: "message" }>;

/** A chat message as the chat parser takes it (its wire shape). */
export type ChatWireMessage = Record<string, unknown>;

/**
 * Where a chat message came from, to name a refused field as the client sent it: the instructions, the input
 * string, or input items (an assistant message gathers an assistant text and the function calls that follow it).
 */
export type MessageOrigin =
  | { kind: "instructions" }
  | { kind: "input" }
  | { kind: "message"; item: number }
  | { kind: "assistant"; first: number; text?: number; calls: number[] }
  | { kind: "tool"; item: number };

export interface ChatMessages {
  messages: ChatWireMessage[];
  origins: MessageOrigin[];
}

/**
 * Items → chat messages, in order. Consecutive assistant text and function calls become one assistant message with
 * `tool_calls` (what chat templates render); reasoning items go to the next assistant message's `reasoning`.
 */
export function itemsToMessages(items: readonly ResolvedItem[]): ChatMessages {
  const messages: ChatWireMessage[] = [];
  const origins: MessageOrigin[] = [];
  let open: { message: ChatWireMessage; origin: Extract<MessageOrigin, { kind: "assistant" }> } | undefined;
  let reasoning: string[] = [];
  const openAssistant = (index: number) => {
    if (open !== undefined) return open;
    const message: ChatWireMessage = { role: "assistant" };
    if (reasoning.length > 0) message.reasoning = reasoning.join("\n");
    reasoning = [];
    open = { message, origin: { kind: "assistant", first: index, calls: [] } };
    messages.push(message);
    origins.push(open.origin);
    return open;
  };
  for (const [index, item] of items.entries()) {
    switch (item.type) {
      case "reasoning":
        open = undefined;
        reasoning.push((item.content ?? item.summary ?? []).map((part) => part.text).join(""));
        break;
      case "function_call": {
        const assistant = openAssistant(index);
        const calls = (assistant.message.tool_calls ?? []) as unknown[];
        calls.push({
          id: item.call_id,
          type: "function",
          function: { name: item.name, arguments: item.arguments },
        });
        assistant.message.tool_calls = calls;
        assistant.origin.calls.push(index);
        break;
      }
      case "function_call_output":
        open = undefined;
        messages.push({
          role: "tool",
          tool_call_id: item.call_id,
          content: typeof item.output === "string" ? item.output : item.output.map(chatPart),
        });
        origins.push({ kind: "tool", item: index });
        break;
      case "message":
        if (item.role === "assistant") {
          // A second assistant text after calls starts a new turn's message.
          if (open?.origin.text !== undefined || (open?.origin.calls.length ?? 0) > 0) open = undefined;
          const assistant = openAssistant(index);
          assistant.message.content = chatContent(item);
          assistant.origin.text = index;
        } else {
          open = undefined;
          messages.push({ role: item.role, content: chatContent(item) });
          origins.push({ kind: "message", item: index });
        }
        break;
      default:
        item satisfies never;
    }
  }
  return { messages, origins };
}

function chatContent(item: MessageItem): unknown {
  return typeof item.content === "string" ? item.content : item.content.map(chatPart);
}

/** Part indexes are kept one to one, so a chat path `content[j]` names the item's `content[j]`. */
function chatPart(part: { type: string; text?: string; refusal?: string }): unknown {
  return part.type === "refusal"
    ? { type: "refusal", refusal: part.refusal ?? "" }
    : { type: "text", text: part.text ?? "" };
}

/** Where the earlier items (a `previous_response_id` conversation) end and this request's `input` begins. */
export interface ItemPlaces {
  /** Items before this index came from the stored conversation: named as `previous_response_id`. */
  history: number;
  /** The request's `input` was a string (one user message). */
  inputString: boolean;
}

/** A chat parameter under `messages` as the Responses field it came from; undefined when it is not under messages. */
export function messageParam(
  param: string,
  origins: readonly MessageOrigin[],
  places: ItemPlaces,
): string | undefined {
  if (param === "messages") return "input";
  const match = /^messages\[(\d+)\](.*)$/.exec(param);
  if (match === null) return undefined;
  const origin = origins[Number(match[1])];
  const rest = match[2] ?? "";
  if (origin === undefined) return "input";
  const item = (index: number, sub: string) =>
    index < places.history ? "previous_response_id" : `input[${index - places.history}]${sub}`;
  switch (origin.kind) {
    case "instructions":
      return "instructions";
    case "input":
      return "input";
    case "message":
      return item(origin.item, rest);
    case "tool": {
      const sub = rest.replace(/^\.content/, ".output").replace(/^\.tool_call_id/, ".call_id");
      return item(origin.item, sub);
    }
    case "assistant": {
      const call = /^\.tool_calls\[(\d+)\](.*)$/.exec(rest);
      if (call !== null) {
        const index = origin.calls[Number(call[1])] ?? origin.first;
        const sub = (call[2] ?? "")
          .replace(/^\.function\.(name|arguments)/, ".$1")
          .replace(/^\.id/, ".call_id");
        return item(index, sub);
      }
      if (rest.startsWith(".content") && origin.text !== undefined) return item(origin.text, rest);
      return item(origin.first, "");
    }
    default:
      return origin satisfies never;
  }
}

/**
 * This request's items as they are stored and listed (`GET /v1/responses/{id}/input_items`): each with its `type`
 * and an id (`msg_…`, `fc_…`, `rs_…`, kept when the client sent one), message content as parts.
 */
export function storedInputItems(
  items: readonly ResolvedItem[],
): ({ type: string; id: string } & Record<string, unknown>)[] {
  return items.map((item) => {
    switch (item.type) {
      case "message": {
        const partType = item.role === "assistant" ? "output_text" : "input_text";
        const content =
          typeof item.content === "string"
            ? [
                partType === "output_text"
                  ? { type: partType, text: item.content, annotations: [] }
                  : { type: partType, text: item.content },
              ]
            : item.content;
        return {
          ...item,
          id: item.id ?? newObjectId("message"),
          content,
          status: item.status ?? "completed",
        };
      }
      case "function_call":
        return { ...item, id: item.id ?? newObjectId("functionCall"), status: item.status ?? "completed" };
      case "function_call_output":
        return {
          ...item,
          id: item.id ?? newObjectId("functionCallOutput"),
          status: item.status ?? "completed",
        };
      case "reasoning":
        return { ...item, id: item.id ?? newObjectId("reasoning"), summary: item.summary ?? [] };
      default:
        return item satisfies never;
    }
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
