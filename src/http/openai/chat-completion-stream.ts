// The streamed chat completion: SSE chunks from the generation's events, keep-alives while the prompt is
// evaluated, the usage chunk on request, and an error frame if the generation fails after the 200.
import type { GenerationEvent } from "../../engine/types.js";
import type { ErrorBody } from "../errors/api-error.js";
import type { SseWriter } from "../sse.js";
import {
  type ChatCompletionChunk,
  type ChunkChoice,
  type ChunkDelta,
  type CompletionMeta,
  toolCallId,
  toUsage,
  toWireLogprobs,
  wireFinishReason,
} from "./wire.js";

export interface StreamOptions {
  n: number;
  includeUsage: boolean;
  /** The reply must be tool calls (tool_choice required or named): the first chunk says content null. */
  callsOnly: boolean;
  /** The request used the legacy `functions`: a call streams as `delta.function_call`, finishing `function_call`. */
  legacyFunctions: boolean;
  keepAliveMs: number;
  onInvalid: (invalid: string) => void;
  /** After the 200 the only way to report a failure is in the stream itself, as OpenAI does. */
  onError: (err: unknown) => ErrorBody;
}

export async function streamCompletion(
  writer: SseWriter,
  events: AsyncIterable<GenerationEvent>,
  meta: CompletionMeta,
  options: StreamOptions,
): Promise<void> {
  const usageField = options.includeUsage ? { usage: null } : {};
  const chunk = (choices: ChunkChoice[]): ChatCompletionChunk => ({
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: meta.model,
    system_fingerprint: null,
    choices,
    ...usageField,
  });
  for (let index = 0; index < options.n; index++) {
    const delta: ChunkDelta = { role: "assistant", content: options.callsOnly ? null : "" };
    await writer.data(chunk([{ index, delta, logprobs: null, finish_reason: null }]));
  }
  const iterator = events[Symbol.asyncIterator]();
  try {
    while (writer.open) {
      const next = await nextWithKeepAlive(iterator, writer, options.keepAliveMs);
      if (next.done === true) break;
      const event: GenerationEvent = next.value;
      if (event.type === "delta") {
        const logprobs =
          event.logprobs === undefined ? null : { content: toWireLogprobs(event.logprobs), refusal: null };
        await writer.data(
          chunk([
            {
              index: event.choice,
              delta: chunkDelta(event, options.legacyFunctions),
              logprobs,
              finish_reason: null,
            },
          ]),
        );
      } else if (event.type === "finish") {
        if (event.invalid !== undefined) options.onInvalid(event.invalid);
        await writer.data(
          chunk([
            {
              index: event.choice,
              delta: {},
              logprobs: null,
              finish_reason: wireFinishReason(event.reason, options.legacyFunctions),
            },
          ]),
        );
      } else if (options.includeUsage) {
        await writer.data({ ...chunk([]), usage: toUsage(event.usage) });
      }
    }
    await writer.done();
  } catch (err) {
    await writer.error(options.onError(err));
    await writer.done();
  }
}

/** An engine delta as a chunk delta; tool calls get their id on their first fragment. */
function chunkDelta(
  event: Extract<GenerationEvent, { type: "delta" }>,
  legacyFunctions: boolean,
): ChunkDelta {
  const target = event.target;
  if (target === undefined) return { content: event.text };
  if (target.kind === "reasoning") return { reasoning: event.text };
  if (legacyFunctions) {
    const name = target.name === undefined ? {} : { name: target.name };
    return { function_call: { ...name, arguments: event.text } };
  }
  if (target.name !== undefined) {
    return {
      tool_calls: [
        {
          index: target.call,
          id: toolCallId(),
          type: "function",
          function: { name: target.name, arguments: event.text },
        },
      ],
    };
  }
  return { tool_calls: [{ index: target.call, function: { arguments: event.text } }] };
}

/** Waits for the next event, sending `: keep-alive` comments while a long prompt is being evaluated. */
export async function nextWithKeepAlive<T>(
  iterator: AsyncIterator<T>,
  writer: SseWriter,
  keepAliveMs: number,
): Promise<IteratorResult<T>> {
  const next = iterator.next();
  while (true) {
    let timer: NodeJS.Timeout | undefined;
    const tick = new Promise<"tick">((resolve) => {
      timer = setTimeout(() => resolve("tick"), keepAliveMs);
    });
    const result = await Promise.race([next, tick]);
    clearTimeout(timer);
    if (result !== "tick") return result;
    if (!writer.open) return { done: true, value: undefined };
    await writer.comment("keep-alive");
  }
}
