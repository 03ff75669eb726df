// The streamed chat completion: SSE chunks from the generation's events, the usage chunk on request, and an error
// frame if the generation fails after the 200 (keep-alives while the prompt is evaluated are the SSE writer's).
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
  type Usage,
  wireFinishReason,
} from "./wire.js";

export interface StreamOptions {
  n: number;
  includeUsage: boolean;
  /** The reply must be tool calls (tool_choice required or named): the first chunk says content null. */
  callsOnly: boolean;
  /** The request used the legacy `functions`: a call streams as `delta.function_call`, finishing `function_call`. */
  legacyFunctions: boolean;
  onInvalid: (invalid: string) => void;
  /** After the 200 the only way to report a failure is in the stream itself, as OpenAI does. */
  onError: (err: unknown) => ErrorBody;
}

/**
 * A chunk's JSON around its choices: everything but the choices is the same in every chunk of a completion, so it
 * is serialised once and each chunk adds only its choice (a gateway writes one chunk per relayed token). The
 * result is byte for byte `JSON.stringify` of the whole ChatCompletionChunk.
 */
export class ChunkFrame {
  private readonly empty: ChatCompletionChunk;
  private readonly head: string;
  private readonly tail: string;

  constructor(meta: CompletionMeta, includeUsage: boolean) {
    const empty: ChatCompletionChunk = {
      id: meta.id,
      object: "chat.completion.chunk",
      created: meta.created,
      model: meta.model,
      system_fingerprint: null,
      choices: [],
      ...(includeUsage ? { usage: null } : {}),
    };
    this.empty = empty;
    const json = JSON.stringify(empty);
    const at = json.indexOf('"choices":[]') + '"choices":['.length;
    this.head = json.slice(0, at);
    this.tail = json.slice(at);
  }

  /** The chunk of one choice. */
  of(choice: ChunkChoice): string {
    return this.head + JSON.stringify(choice) + this.tail;
  }

  /** The last chunk, of no choice: the usage (only when the request asked for it). */
  usage(usage: Usage): string {
    return JSON.stringify({ ...this.empty, usage });
  }

  /** The chunk of one choice's content text: the hot path, without building the choice object. */
  content(index: number, text: string): string {
    return `${this.head}{"index":${index},"delta":{"content":${JSON.stringify(text)}},"logprobs":null,"finish_reason":null}${this.tail}`;
  }
}

export async function streamCompletion(
  writer: SseWriter,
  events: AsyncIterable<GenerationEvent>,
  meta: CompletionMeta,
  options: StreamOptions,
): Promise<void> {
  const frame = new ChunkFrame(meta, options.includeUsage);
  for (let index = 0; index < options.n; index++) {
    const delta: ChunkDelta = { role: "assistant", content: options.callsOnly ? null : "" };
    await writer.dataJson(frame.of({ index, delta, logprobs: null, finish_reason: null }));
  }
  try {
    for await (const event of events) {
      if (!writer.open) break;
      if (event.type === "delta") {
        if (event.target === undefined && event.logprobs === undefined) {
          await writer.dataJson(frame.content(event.choice, event.text));
          continue;
        }
        const logprobs =
          event.logprobs === undefined ? null : { content: toWireLogprobs(event.logprobs), refusal: null };
        await writer.dataJson(
          frame.of({
            index: event.choice,
            delta: chunkDelta(event, options.legacyFunctions),
            logprobs,
            finish_reason: null,
          }),
        );
      } else if (event.type === "finish") {
        if (event.invalid !== undefined) options.onInvalid(event.invalid);
        await writer.dataJson(
          frame.of({
            index: event.choice,
            delta: {},
            logprobs: null,
            finish_reason: wireFinishReason(event.reason, options.legacyFunctions),
          }),
        );
      } else if (options.includeUsage) {
        await writer.dataJson(frame.usage(toUsage(event.usage)));
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
