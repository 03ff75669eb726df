// The request under a Hono context read from Node's own IncomingMessage where there is one: its body (capped) and
// the client's departure. @hono/node-server builds a WHATWG Request (headers, a web stream over the socket, an
// AbortController) the first time a handler touches `body`, `signal` or `text()`; the chat route pays that on
// every request, and a gateway in front of workers pays it twice (docs/fleet.md, "Added latency"). In-memory
// requests (`app.request()` in tests) have no Node request and take the WHATWG path, with the same cap.
import type { IncomingMessage } from "node:http";
import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "./env.js";
import { PayloadTooLargeError } from "./errors/api-error.js";

/** Node's request and response under this context; in-memory requests (`app.request()` in tests) have none. */
export function nodeBindings(c: Context<AppEnv>): HttpBindings | undefined {
  const env = c.env as Partial<HttpBindings> | undefined;
  return env?.incoming === undefined || env.outgoing === undefined ? undefined : (env as HttpBindings);
}

/**
 * A request header (lower-case `name`), from Node's own headers where there is a Node request: `c.req.header`
 * would first build a WHATWG Headers object of them all, on every request of the hot path. Repeated headers are
 * joined as the Fetch standard joins them.
 */
export function requestHeader(c: Context<AppEnv>, name: string): string | undefined {
  const incoming = nodeBindings(c)?.incoming;
  if (incoming === undefined) return c.req.header(name);
  const value = incoming.headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

/**
 * A body whose declared length exceeds `maxBytes` is refused (413) before anything else runs on it; a body
 * without a declared length is capped as `readBodyText` reads it.
 */
export function declaredBodyLimit(maxBytes: number): MiddlewareHandler<AppEnv> {
  return async function declaredBodyLimit(c, next) {
    const declared = requestHeader(c, "content-length");
    if (declared !== undefined && Number.parseInt(declared, 10) > maxBytes)
      throw new PayloadTooLargeError(maxBytes);
    await next();
  };
}

/**
 * The whole body as UTF-8 text, or a 413 once more than `maxBytes` arrived (the rest is never buffered). The
 * request is left paused, not destroyed: its connection closes after the 413, lingering (server.ts).
 */
export async function readBodyText(c: Context<AppEnv>, maxBytes: number): Promise<string> {
  const incoming = nodeBindings(c)?.incoming;
  return incoming === undefined ? readWebBody(c.req.raw.body, maxBytes) : readNodeBody(incoming, maxBytes);
}

function readNodeBody(incoming: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      incoming.off("data", onData);
      incoming.off("end", onEnd);
      incoming.off("error", onError);
      incoming.off("aborted", onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      stop();
      incoming.pause();
      reject(new PayloadTooLargeError(maxBytes));
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks, size).toString("utf8"));
    };
    const onError = (err: Error) => {
      stop();
      reject(err);
    };
    const onAborted = () => onError(new Error("The client closed the connection before its body arrived."));
    incoming.on("data", onData);
    incoming.once("end", onEnd);
    incoming.once("error", onError);
    incoming.once("aborted", onAborted);
  });
}

async function readWebBody(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<string> {
  if (body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) throw new PayloadTooLargeError(maxBytes);
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  return Buffer.concat(chunks, size).toString("utf8");
}

/**
 * Aborts `controller` (default: a new one) when the client leaves before its response is finished: its connection
 * closed, or its request broke off; returns its signal. Hono's request is not materialised for its own signal.
 */
export function clientLeftSignal(c: Context<AppEnv>, controller = new AbortController()): AbortSignal {
  const node = nodeBindings(c);
  if (node === undefined) {
    const signal = c.req.raw.signal;
    if (signal.aborted) controller.abort(signal.reason);
    else signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
    return controller.signal;
  }
  const { incoming, outgoing } = node;
  outgoing.once("close", () => {
    if (!outgoing.writableFinished) controller.abort(leftReason(incoming));
  });
  return controller.signal;
}

function leftReason(incoming: IncomingMessage): unknown {
  return incoming.errored ?? new Error("Client connection prematurely closed.");
}
