// The HTTP client of the upstream hot path (chat completions and tokenize routes): undici's dispatcher on one
// keep-alive agent, with a handler of our own. The global fetch builds WHATWG Request, Response and stream objects
// on every call (measured on loopback: 0.52 ms a streamed POST through fetch, 0.12 ms through `request`); undici's
// `request` still wraps each body in a Node Readable read through an async iterator. The handler hands each body
// chunk to a small queue the relay reads directly, and pauses the connection while the reader is behind. The
// probes keep fetch: one call per endpoint every two seconds.
import { Agent, type Dispatcher } from "undici";
import { errorCode } from "../../observability/fault-cause.js";

export interface UpstreamPostOptions {
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
}

/** An upstream's answer; read its body once: `chunks`, `text()` or `json()`, or `discard()` it. */
export interface UpstreamResponse {
  status: number;
  /** The body's bytes as they arrive; a read fails when the request's signal aborts or the connection breaks. */
  chunks: AsyncIterator<Uint8Array>;
  text(): Promise<string>;
  json(): Promise<unknown>;
  /** Stops reading and frees the connection (a stream the client left, say). */
  discard(): void;
}

export type UpstreamPost = (url: string, options: UpstreamPostOptions) => Promise<UpstreamResponse>;

/** Chunks a body may hold unread before the connection is paused (TCP then pushes back on the endpoint). */
const MAX_UNREAD_CHUNKS = 32;

/** A response body as its chunks arrive: one reader, the connection paused while it is behind. */
class BodyQueue implements AsyncIterator<Uint8Array> {
  private readonly chunks: Uint8Array[] = [];
  private waiter:
    | { resolve: (r: IteratorResult<Uint8Array>) => void; reject: (e: unknown) => void }
    | undefined;
  private ended = false;
  private error: unknown;
  private failed = false;
  controller: Dispatcher.DispatchController | undefined;

  /** The body arrived whole or failed: nothing more comes. */
  get settled(): boolean {
    return this.ended || this.failed;
  }

  push(chunk: Uint8Array): void {
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      waiter.resolve({ value: chunk, done: false });
      return;
    }
    this.chunks.push(chunk);
    if (this.chunks.length >= MAX_UNREAD_CHUNKS) this.controller?.pause();
  }

  end(): void {
    this.ended = true;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.resolve({ value: undefined, done: true });
  }

  fail(error: unknown): void {
    if (this.ended || this.failed) return;
    this.failed = true;
    this.error = error;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.reject(error);
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    const chunk = this.chunks.shift();
    if (chunk !== undefined) {
      if (this.controller?.paused === true && this.chunks.length < MAX_UNREAD_CHUNKS / 2)
        this.controller.resume();
      return Promise.resolve({ value: chunk, done: false });
    }
    if (this.failed) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  async text(): Promise<string> {
    const decoder = new TextDecoder("utf-8");
    let text = "";
    for (;;) {
      const { done, value } = await this.next();
      if (done) return text + decoder.decode();
      text += decoder.decode(value, { stream: true });
    }
  }
}

/** undici's dispatch options of a URL: its origin, and its path with the query. */
function target(url: string): { origin: string; path: string } {
  const parsed = new URL(url);
  return { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
}

export class UpstreamHttpClient {
  // Idle connections live shorter than the engines' own keep-alive (llama-server and Node servers close at 5 s),
  // so a request is not sent on a socket the server is closing.
  private readonly agent = new Agent({ keepAliveTimeout: 4_000, keepAliveMaxTimeout: 4_000 });
  /** Parsed URLs: a gateway posts to the same few endpoints' routes. */
  private readonly targets = new Map<string, { origin: string; path: string }>();

  /**
   * POSTs once more, on another connection, when the first try broke off before any answer with a reset: the
   * endpoint closed a kept-alive socket as the request went out (an idle close racing the send, or a server that
   * caps requests per connection). Nothing was answered, so nothing was relayed; a second reset fails the call.
   */
  readonly post: UpstreamPost = async (url, options) => {
    try {
      return await this.postOnce(url, options);
    } catch (err) {
      if (options.signal.aborted || !isConnectionReset(err)) throw err;
      return await this.postOnce(url, options);
    }
  };

  private postOnce(url: string, options: UpstreamPostOptions): Promise<UpstreamResponse> {
    let parsed = this.targets.get(url);
    if (parsed === undefined) {
      parsed = target(url);
      // Bounded by the configured endpoints and their few routes; cleared in case a config lists very many.
      if (this.targets.size > 1024) this.targets.clear();
      this.targets.set(url, parsed);
    }
    const { signal } = options;
    return new Promise<UpstreamResponse>((resolve, reject) => {
      const body = new BodyQueue();
      let answered = false;
      const onAbort = () => body.controller?.abort(abortReason(signal));
      const unlink = () => signal.removeEventListener("abort", onAbort);
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(controller) {
          body.controller = controller;
          if (signal.aborted) controller.abort(abortReason(signal));
        },
        onResponseStart(_controller, status) {
          // 1xx answers are interim: the real one follows.
          if (status < 200 || answered) return;
          answered = true;
          resolve({
            status,
            chunks: body,
            text: () => body.text(),
            json: async () => JSON.parse(await body.text()) as unknown,
            discard: () => {
              unlink();
              if (body.settled) return;
              if (body.controller?.aborted === false) body.controller.abort(new DiscardedError());
              body.fail(new DiscardedError());
            },
          });
        },
        onResponseData(_controller, chunk) {
          body.push(chunk);
        },
        onResponseEnd() {
          unlink();
          body.end();
        },
        onResponseError(_controller, error) {
          unlink();
          if (answered) body.fail(error);
          else reject(error);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.agent.dispatch(
        { ...parsed, method: "POST", headers: options.headers, body: options.body },
        handler,
      );
    });
  }

  /** Closes idle connections and refuses new requests; in-flight ones are aborted by their own signals. */
  async close(): Promise<void> {
    await this.agent.destroy();
  }
}

/** A connection the endpoint reset or closed under the request (undici's socket error, or the kernel's). */
export function isConnectionReset(err: unknown): boolean {
  const code = errorCode(err);
  return code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE";
}

/** The body was discarded on purpose: a read after it fails with this (nothing reads it then). */
class DiscardedError extends Error {
  override name = "AbortError";
  constructor() {
    super("The response body was discarded.");
  }
}

/** What a request aborted by `signal` fails with: the signal's reason when it is an Error, else an AbortError. */
function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const error = new Error("The request was aborted.");
  error.name = "AbortError";
  return error;
}
