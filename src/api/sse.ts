// The Server-Sent Events writer: data lines, comments, the [DONE] terminator, backpressure from the reader, and
// disconnect and stall detection. Written straight to Node's response when there is one (`writeSse`), else as a
// web stream for an in-memory response (`sseStream`, `app.request()` in tests): the same frames and rules.
import type { ServerResponse } from "node:http";
import type { ErrorBody } from "../errors/api-error.js";

export interface SseWriter {
  /** False once the client has gone (or stalled): stop producing. */
  readonly open: boolean;
  /** Each write resolves once the reader has room for more: awaiting it is the backpressure. */
  data(payload: unknown): Promise<void>;
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

/** The frames of the stream, whichever way they are written. */
function frames(write: (text: string) => Promise<void>, isOpen: () => boolean): SseWriter {
  return {
    get open() {
      return isOpen();
    },
    data: (payload) => write(`data: ${JSON.stringify(payload)}\n\n`),
    comment: (text) => write(`: ${text}\n\n`),
    error: (body) => write(`data: ${JSON.stringify(body)}\n\n`),
    done: () => write("data: [DONE]\n\n"),
  };
}

/**
 * @hono/node-server's mark (its `RESPONSE_ALREADY_SENT`) on a response whose head and body a handler wrote to
 * Node's response itself: the adapter then writes nothing.
 */
export const ALREADY_SENT_HEADER = "x-hono-already-sent";

/** An in-memory streamed response: status 200, the SSE headers and `headers`, the body from `sseStream`. */
export function sseResponse(
  produce: (writer: SseWriter) => Promise<void>,
  headers: Record<string, string>,
  options: SseStreamOptions,
): Response {
  return new Response(sseStream(produce, options), { status: 200, headers: { ...SSE_HEADERS, ...headers } });
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
  const writer = frames(write, () => open);
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

/**
 * Sends the stream's head (status 200, SSE headers and `headers`) and runs `produce` against a writer on Node's
 * response, ending it when `produce` is done. Writes go to the socket as they come (Node coalesces those of one
 * turn of the event loop); once the socket holds more than its high-water mark, each write waits for it to drain,
 * so a client that stops reading stops generation. A response that does not drain within `drainTimeoutMs` is
 * destroyed, and a connection that closes first means the client left. Resolves when the response has ended.
 */
export async function writeSse(
  response: ServerResponse,
  headers: Record<string, string>,
  produce: (writer: SseWriter) => Promise<void>,
  options: Pick<SseStreamOptions, "drainTimeoutMs" | "onClientGone"> & {
    /** The response did not drain for `drainTimeoutMs` and was destroyed (for the log). */
    onStalled: () => void;
  },
): Promise<void> {
  let open = true;
  const close = () => {
    if (!open) return;
    open = false;
    options.onClientGone();
  };
  const onClose = () => {
    if (!response.writableFinished) close();
  };
  response.once("close", onClose);
  const drained = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        response.off("drain", done);
        response.off("close", done);
        resolve();
      };
      const timer = setTimeout(() => {
        done();
        close();
        options.onStalled();
        response.destroy();
      }, options.drainTimeoutMs);
      response.once("drain", done);
      response.once("close", done);
    });
  const write = async (text: string) => {
    if (!open || response.destroyed) return;
    if (!response.write(text)) await drained();
  };
  response.writeHead(200, { ...SSE_HEADERS, ...headers });
  try {
    await produce(frames(write, () => open && !response.destroyed));
  } finally {
    response.off("close", onClose);
    if (!response.destroyed) response.end();
  }
}
