// The streamed response: typed SSE events with sequence numbers, from response.created to response.completed,
// response.incomplete or (after an error event) response.failed; keep-alives while the prompt is evaluated.
import type { GenerationEvent } from "../../../engine/types.js";
import type { ErrorBody } from "../../errors/api-error.js";
import type { SseWriter } from "../../sse.js";
import type { ResponseObject, ResponseState } from "./body.js";
import { type OutputItem, type OutputStep, ResponseOutput } from "./output.js";

export interface ResponseStreamOptions {
  /** The `resp_…` id (output item ids are made from it). */
  responseId: string;
  /** The response object at a state (the route binds the request's echo and meta). */
  render: (state: ResponseState) => ResponseObject;
  onInvalid: (invalid: string) => void;
  /** After the 200 a failure is reported in the stream: the error body to send. */
  onError: (err: unknown) => ErrorBody;
  /**
   * The generation ended (completed or incomplete): stores it when asked and says whether it was stored; the
   * final event carries the answer. Not called for a failed or abandoned response.
   */
  onEnd: (state: ResponseState) => Promise<ResponseObject>;
}

export async function streamResponse(
  writer: SseWriter,
  events: AsyncIterable<GenerationEvent>,
  options: ResponseStreamOptions,
): Promise<void> {
  let sequence = 0;
  const send = (type: string, fields: Record<string, unknown>) =>
    writer.event(type, { type, ...fields, sequence_number: sequence++ });
  const output = new ResponseOutput(options.responseId);
  const state = (status: ResponseState["status"]): ResponseState => ({
    status,
    output: output.items,
    usage: output.usage,
  });
  await send("response.created", { response: options.render(state("in_progress")) });
  await send("response.in_progress", { response: options.render(state("in_progress")) });
  try {
    for await (const event of events) {
      if (!writer.open) break;
      if (event.type === "finish" && event.invalid !== undefined) options.onInvalid(event.invalid);
      for (const step of output.apply(event)) await sendStep(send, step);
    }
    if (!writer.open) return;
    for (const step of output.finish()) await sendStep(send, step);
    const status = output.reason === "length" ? "incomplete" : "completed";
    const final = await options.onEnd(state(status));
    await send(status === "completed" ? "response.completed" : "response.incomplete", { response: final });
  } catch (err) {
    const { error } = options.onError(err);
    // OpenAI's error event (code, message, param at the top) with Open Responses' `error` object beside them.
    await send("error", { code: error.code, message: error.message, param: error.param, error });
    const failed: ResponseState = {
      ...state("failed"),
      error: { code: "server_error", message: error.message },
    };
    await send("response.failed", { response: options.render(failed) });
  }
}

type Send = (type: string, fields: Record<string, unknown>) => Promise<void>;

/** One output step as its events: item added (and its part), deltas, then the done events in reverse. */
async function sendStep(send: Send, step: OutputStep): Promise<void> {
  const { item, index: output_index } = step;
  const at = { item_id: item.id, output_index };
  if (step.kind === "open") {
    await send("response.output_item.added", { output_index, item: addedItem(item) });
    if (item.type === "message") {
      await send("response.content_part.added", {
        ...at,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [] },
      });
    } else if (item.type === "reasoning") {
      await send("response.content_part.added", {
        ...at,
        content_index: 0,
        part: { type: "reasoning_text", text: "" },
      });
    }
    return;
  }
  if (step.kind === "delta") {
    if (item.type === "message") {
      await send("response.output_text.delta", { ...at, content_index: 0, delta: step.text, logprobs: [] });
    } else if (item.type === "reasoning") {
      await send("response.reasoning_text.delta", { ...at, content_index: 0, delta: step.text });
    } else {
      await send("response.function_call_arguments.delta", { ...at, delta: step.text });
    }
    return;
  }
  if (item.type === "message") {
    const part = item.content[0];
    await send("response.output_text.done", {
      ...at,
      content_index: 0,
      text: part?.text ?? "",
      logprobs: [],
    });
    await send("response.content_part.done", { ...at, content_index: 0, part });
  } else if (item.type === "reasoning") {
    const part = item.content[0];
    await send("response.reasoning_text.done", { ...at, content_index: 0, text: part?.text ?? "" });
    await send("response.content_part.done", { ...at, content_index: 0, part });
  } else {
    await send("response.function_call_arguments.done", {
      ...at,
      name: item.name,
      arguments: item.arguments,
    });
  }
  await send("response.output_item.done", { output_index, item });
}

/** An item as `output_item.added` shows it: no content yet (its parts are added by their own events). */
function addedItem(item: OutputItem): OutputItem {
  if (item.type === "function_call") return { ...item, arguments: "" };
  return { ...item, content: [] } as OutputItem;
}
