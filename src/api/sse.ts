// The one Server-Sent Events writer: data lines, comments, the [DONE] terminator, and disconnect detection.
import type { ErrorBody } from "../errors/api-error.js";

export interface SseWriter {
  /** False once the client has gone: stop producing. */
  readonly open: boolean;
  data(payload: unknown): Promise<void>;
  comment(text: string): Promise<void>;
  error(body: ErrorBody): Promise<void>;
  done(): Promise<void>;
}

const encoder = new TextEncoder();

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-accel-buffering": "no",
} as const;

/**
 * Runs `produce` against a writer and returns the streaming body. `onClientGone` fires once when the reader
 * cancels (the HTTP connection closed) so generation can stop at once.
 */
export function sseStream(
  produce: (writer: SseWriter) => Promise<void>,
  onClientGone: () => void,
): ReadableStream<Uint8Array> {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let open = true;
  const close = () => {
    if (!open) return;
    open = false;
    onClientGone();
  };
  const write = async (text: string) => {
    if (!open) return;
    try {
      controller.enqueue(encoder.encode(text));
    } catch {
      close();
    }
  };
  const writer: SseWriter = {
    get open() {
      return open;
    },
    data: (payload) => write(`data: ${JSON.stringify(payload)}\n\n`),
    comment: (text) => write(`: ${text}\n\n`),
    error: (body) => write(`data: ${JSON.stringify(body)}\n\n`),
    done: () => write("data: [DONE]\n\n"),
  };
  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      void produce(writer).finally(() => {
        if (open) {
          open = false;
          try {
            controller.close();
          } catch {
            // already closed by a cancel
          }
        }
      });
    },
    cancel() {
      close();
    },
  });
}
