// The one Server-Sent Events writer: data lines (named events too), comments, the [DONE] terminator, backpressure
// from the reader, and disconnect and stall detection.
import type { ErrorBody } from "./errors/api-error.js";

export interface SseWriter {
  /** False once the client has gone (or stalled): stop producing. */
  readonly open: boolean;
  /** Each write resolves once the reader has room for more: awaiting it is the backpressure. */
  data(payload: unknown): Promise<void>;
  /** A named event (`event: <name>` then its data line): the Responses API's typed events. */
  event(name: string, payload: unknown): Promise<void>;
  comment(text: string): Promise<void>;
  error(body: ErrorBody): Promise<void>;
  done(): Promise<void>;
}

const encoder = new TextEncoder();

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-accel-buffering": "no",
} as const;

/**
 * The headers of a stream to a client speaking `httpVersion`. On HTTP/1.1 the stream says it is chunked (as Node
 * sends it anyway): without the header @hono/node-server first tries to read the whole body to give it a length,
 * and when the second event is not ready at once it waits a timer turn (≥ 1 ms) before sending the headers and
 * the first event: every stream's first byte paid it, and a gateway's twice (its worker's stream, then its own).
 */
export function sseHeaders(httpVersion: string | undefined): Record<string, string> {
  return httpVersion === "1.0" ? { ...SSE_HEADERS } : { ...SSE_HEADERS, "transfer-encoding": "chunked" };
}

/** Bytes the stream holds for a reader that is not taking them before writes wait (a few dozen chunks). */
export const SSE_HIGH_WATER_MARK = 16 * 1024;

export interface SseStreamOptions {
  /** Longest the reader may take nothing while the stream is full; then the response is abandoned. */
  drainTimeoutMs: number;
  /** Once, when the reader cancels (the connection closed) or stalls: stop generating at once. */
  onClientGone: () => void;
  /**
   * The reader stalled for `drainTimeoutMs`: destroy the connection. Returns false when there is no connection
   * to destroy (an in-memory request); the stream is then ended with an error.
   */
  onStalled: () => boolean;
  /** Default SSE_HIGH_WATER_MARK. */
  highWaterMark?: number;
}

/** The reader took nothing for the whole drain timeout while the stream was full. */
export class SlowReaderError extends Error {
  override name = "SlowReaderError";
  constructor(readonly drainTimeoutMs: number) {
    super(`The client read nothing for ${drainTimeoutMs} ms; the response was abandoned.`);
  }
}

/**
 * Runs `produce` against a writer and returns the streaming body. The body is pull-based: once
 * `highWaterMark` bytes wait unread, each write waits until the reader (the HTTP server, which reads only while
 * the socket drains) pulls again, so a client that stops reading stops generation instead of growing a buffer.
 * A reader that pulls nothing for `drainTimeoutMs` is treated as gone and its connection destroyed.
 */
export function sseStream(
  produce: (writer: SseWriter) => Promise<void>,
  options: SseStreamOptions,
): ReadableStream<Uint8Array> {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let open = true;
  /** Set while a write waits for the reader: resolves that wait. */
  let pulled: (() => void) | undefined;
  const close = () => {
    if (!open) return;
    open = false;
    options.onClientGone();
  };
  const stall = () => {
    if (!open) return;
    close();
    if (!options.onStalled()) controller.error(new SlowReaderError(options.drainTimeoutMs));
  };
  const roomForMore = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        pulled = undefined;
        stall();
        resolve();
      }, options.drainTimeoutMs);
      pulled = () => {
        clearTimeout(timer);
        pulled = undefined;
        resolve();
      };
    });
  const write = async (text: string) => {
    if (!open) return;
    try {
      controller.enqueue(encoder.encode(text));
    } catch {
      close();
      return;
    }
    if ((controller.desiredSize ?? 0) <= 0) await roomForMore();
  };
  const writer: SseWriter = {
    get open() {
      return open;
    },
    data: (payload) => write(`data: ${JSON.stringify(payload)}\n\n`),
    // Names are the API's own constants (never client text): no newline can reach the event line.
    event: (name, payload) => write(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`),
    comment: (text) => write(`: ${text}\n\n`),
    error: (body) => write(`data: ${JSON.stringify(body)}\n\n`),
    done: () => write("data: [DONE]\n\n"),
  };
  return new ReadableStream<Uint8Array>(
    {
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
      pull() {
        pulled?.();
      },
      cancel() {
        close();
        pulled?.();
      },
    },
    { highWaterMark: options.highWaterMark ?? SSE_HIGH_WATER_MARK, size: (chunk) => chunk.byteLength },
  );
}
