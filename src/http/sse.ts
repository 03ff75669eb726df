// The one Server-Sent Events writer: data lines (named events too), keep-alive comments while nothing is sent,
// the [DONE] terminator, backpressure from the reader, and disconnect and stall detection. On a Node connection it
// writes straight to the response (the events of one tick in one write); an in-memory request (`app.request()` in
// tests) gets the same stream as a WHATWG body.
import type { ServerResponse } from "node:http";
import type { ErrorBody } from "./errors/api-error.js";

export interface SseWriter {
  /** False once the client has gone (or stalled): stop producing. */
  readonly open: boolean;
  /** Each write resolves once the reader has room for more: awaiting it is the backpressure. */
  data(payload: unknown): Promise<void>;
  /** A data line already serialised as JSON (a hot path's own serialiser): the same as `data`. */
  dataJson(json: string): Promise<void>;
  /** A named event (`event: <name>` then its data line): the Responses API's typed events. */
  event(name: string, payload: unknown): Promise<void>;
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

/**
 * @hono/node-server's mark of a response its handler already wrote to Node's response itself (its
 * RESPONSE_ALREADY_SENT carries it): the adapter then writes nothing.
 */
export const RESPONSE_ALREADY_SENT_HEADER = "x-hono-already-sent";

/** Bytes the stream holds for a reader that is not taking them before writes wait (a few dozen chunks). */
export const SSE_HIGH_WATER_MARK = 16 * 1024;

/** The comment sent when the stream has been silent for `keepAliveMs` (a long prompt being evaluated). */
export const KEEP_ALIVE_COMMENT = ": keep-alive\n\n";

export interface SseStreamOptions {
  /** Longest the reader may take nothing while the stream is full; then the response is abandoned. */
  drainTimeoutMs: number;
  /** After this long without a write, a `: keep-alive` comment keeps proxies and clients from timing out. */
  keepAliveMs: number;
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

const RESOLVED: Promise<void> = Promise.resolve();

/** Where a stream's text goes: a Node response or a WHATWG body. */
interface SseSink {
  /** Queues `text`; true while the reader has room for more. */
  write(text: string): boolean;
  /** Resolves once the reader has room again (or the stream closed). */
  room(): Promise<void>;
  /** Whether the reader has room now (the keep-alive is skipped when it has none). */
  hasRoom(): boolean;
  end(): void;
}

/**
 * The writer over a sink: serialisation, keep-alives while silent, and the backpressure wait bounded by
 * `drainTimeoutMs` (then `stall`). The sink reports the reader's departure through `close`.
 */
function sseWriter(
  sink: SseSink,
  options: SseStreamOptions,
  state: { open: boolean; close: () => void; stall: () => void },
): { writer: SseWriter; stop: () => void } {
  let lastWrite = performance.now();
  let keepAlive: NodeJS.Timeout | undefined;
  const armKeepAlive = (ms: number) => {
    keepAlive = setTimeout(() => {
      if (!state.open) return;
      const silent = performance.now() - lastWrite;
      if (silent < options.keepAliveMs) {
        armKeepAlive(options.keepAliveMs - silent);
        return;
      }
      // A full stream has a reader that is not reading: no comment can reach it, and none is needed.
      if (sink.hasRoom()) {
        sink.write(KEEP_ALIVE_COMMENT);
        lastWrite = performance.now();
      }
      armKeepAlive(options.keepAliveMs);
    }, ms);
    keepAlive.unref();
  };
  armKeepAlive(options.keepAliveMs);
  const waitForRoom = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        state.stall();
        resolve();
      }, options.drainTimeoutMs);
      void sink.room().then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  const write = (text: string): Promise<void> => {
    if (!state.open) return RESOLVED;
    lastWrite = performance.now();
    return sink.write(text) ? RESOLVED : waitForRoom();
  };
  const writer: SseWriter = {
    get open() {
      return state.open;
    },
    data: (payload) => write(`data: ${JSON.stringify(payload)}\n\n`),
    dataJson: (json) => write(`data: ${json}\n\n`),
    // Names are the API's own constants (never client text): no newline can reach the event line.
    event: (name, payload) => write(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`),
    error: (body) => write(`data: ${JSON.stringify(body)}\n\n`),
    done: () => write("data: [DONE]\n\n"),
  };
  return { writer, stop: () => clearTimeout(keepAlive) };
}

/** The stream's open/closed state and its one-time departure callbacks. */
function streamState(options: SseStreamOptions, onStall: () => void) {
  const state = {
    open: true,
    close: () => {
      if (!state.open) return;
      state.open = false;
      options.onClientGone();
    },
    stall: () => {
      if (!state.open) return;
      state.close();
      onStall();
    },
  };
  return state;
}

/**
 * Runs `produce` against a writer straight on Node's response: `writeHead` is the caller's, `end` is this one's.
 * The events written in one tick (a burst from an upstream, several choices) go out in one write. Once
 * `highWaterMark` bytes wait unsent, each write waits for the socket to drain, so a client that stops reading
 * stops generation instead of growing a buffer; one that drains nothing for `drainTimeoutMs` is destroyed.
 */
export function sseToNode(
  outgoing: ServerResponse,
  produce: (writer: SseWriter) => Promise<void>,
  options: SseStreamOptions,
): Promise<void> {
  const highWaterMark = options.highWaterMark ?? SSE_HIGH_WATER_MARK;
  const state = streamState(options, () => {
    if (!options.onStalled()) outgoing.destroy(new SlowReaderError(options.drainTimeoutMs));
  });
  let pending = "";
  let waiters: (() => void)[] = [];
  const wake = () => {
    const list = waiters;
    waiters = [];
    for (const resolve of list) resolve();
  };
  const flush = () => {
    const text = pending;
    pending = "";
    if (state.open && text !== "") outgoing.write(text);
    if (!outgoing.writableNeedDrain) wake();
  };
  const gone = () => {
    if (!outgoing.writableFinished) state.close();
    wake();
  };
  outgoing.on("drain", wake);
  outgoing.once("close", gone);
  outgoing.once("error", gone);
  const sink: SseSink = {
    write(text) {
      if (pending === "") process.nextTick(flush);
      pending += text;
      return sink.hasRoom();
    },
    hasRoom: () => !outgoing.writableNeedDrain && pending.length < highWaterMark,
    room: () => (state.open ? new Promise<void>((resolve) => waiters.push(resolve)) : RESOLVED),
    end() {
      flush();
      outgoing.off("drain", wake);
      if (!outgoing.writableEnded) outgoing.end();
    },
  };
  const { writer, stop } = sseWriter(sink, options, state);
  return produce(writer).finally(() => {
    stop();
    sink.end();
    state.open = false;
  });
}

/**
 * Runs `produce` against a writer and returns the streaming body (an in-memory request's). The body is
 * pull-based: once `highWaterMark` bytes wait unread, each write waits until the reader pulls again; a reader
 * that pulls nothing for `drainTimeoutMs` is treated as gone.
 */
export function sseStream(
  produce: (writer: SseWriter) => Promise<void>,
  options: SseStreamOptions,
): ReadableStream<Uint8Array> {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const state = streamState(options, () => {
    if (!options.onStalled()) controller.error(new SlowReaderError(options.drainTimeoutMs));
  });
  /** Set while a write waits for the reader: resolves that wait. */
  let pulled: (() => void) | undefined;
  const release = () => {
    const resolve = pulled;
    pulled = undefined;
    resolve?.();
  };
  const sink: SseSink = {
    write(text) {
      try {
        controller.enqueue(encoder.encode(text));
      } catch {
        state.close();
      }
      return sink.hasRoom();
    },
    hasRoom: () => (controller.desiredSize ?? 0) > 0,
    room: () =>
      state.open
        ? new Promise<void>((resolve) => {
            pulled = resolve;
          })
        : RESOLVED,
    end() {
      try {
        controller.close();
      } catch {
        // already closed by a cancel, or errored by a stall
      }
    },
  };
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        const { writer, stop } = sseWriter(sink, options, state);
        void produce(writer).finally(() => {
          stop();
          if (state.open) {
            state.open = false;
            sink.end();
          }
          release();
        });
      },
      pull() {
        release();
      },
      cancel() {
        state.close();
        release();
      },
    },
    { highWaterMark: options.highWaterMark ?? SSE_HIGH_WATER_MARK, size: (chunk) => chunk.byteLength },
  );
}
