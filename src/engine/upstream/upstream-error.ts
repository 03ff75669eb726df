// Upstream failures: an engine's error answer or error frame classified (retry? client's fault?), protocol breaks.
import { type Fault, Refusal } from "../../refusal.js";

/** An upstream that answered an error (HTTP status + body) or sent an error frame, classified. */
export class UpstreamError extends Refusal {
  override name = "UpstreamError";
  constructor(
    message: string,
    /** The upstream's HTTP status (an error frame: its code, else 502). */
    readonly status: number,
    /** Another endpoint may succeed (before the first byte only). */
    readonly retryable: boolean,
    /** The request itself is bad: the client gets a 400-class error with `message`. */
    readonly clientError: boolean,
    /** The upstream's own message, truncated and without stack traces: for the log and the operator view. */
    readonly detail?: string,
    /** A client error's `error.param` (OpenAI's shape): the field the client gets named, e.g. `logit_bias`. */
    readonly param?: string,
  ) {
    super(message);
  }

  /** A request every endpoint would refuse is the client's; an endpoint that failed is ours. */
  get fault(): Fault {
    return this.clientError ? "client" : "server";
  }
}

/** The upstream broke the protocol (malformed frame, a stream that ends without [DONE] or usage, a bad index). */
export class UpstreamProtocolError extends Refusal {
  override name = "UpstreamProtocolError";
  readonly fault = "server";
}

/** The longest upstream message passed on to a client. */
const MAX_MESSAGE_CHARS = 1000;

/** The request is bad whichever endpoint gets it: 400 stays 400 with the upstream's message. */
const CLIENT_STATUSES: ReadonlySet<number> = new Set([400, 404, 413, 422]);
/** Another endpoint (or the same one later) may well succeed. Every 5xx is too. */
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 429]);

/**
 * Classifies an upstream's non-2xx answer. Client errors keep the upstream's `error.message` (OpenAI's shape, or
 * vLLM/SGLang's top-level `{"object":"error","message"}`); everything else gets a generic message, as does a body
 * that is not one of those shapes, so an engine's internals never reach the client. 401/403 are the operator's
 * key or grant being wrong: not the client's fault, and no other endpoint is likely to differ.
 */
export function upstreamErrorFromResponse(status: number, bodyText: string): UpstreamError {
  const detail = upstreamMessage(parseJson(bodyText));
  const retryable = status >= 500 || RETRYABLE_STATUSES.has(status);
  const clientError = CLIENT_STATUSES.has(status);
  const message =
    clientError && detail !== undefined
      ? detail
      : clientError
        ? `The upstream engine refused the request (status ${status}).`
        : `The upstream engine failed (status ${status}).`;
  const param = clientError ? upstreamParam(parseJson(bodyText)) : undefined;
  return new UpstreamError(message, status, retryable, clientError, detail, param);
}

/** A parameter path as OpenAI spells one (`logit_bias`, `messages[2].content`); anything else is not relayed. */
function upstreamParam(body: unknown): string | undefined {
  const param = isRecord(body) && isRecord(body.error) ? body.error.param : undefined;
  return typeof param === "string" && /^[A-Za-z_][\w.[\]]{0,99}$/.test(param) ? param : undefined;
}

/**
 * An error frame inside a stream (`data: {"error":{...}}`). Its status is the frame's numeric `code` (vLLM,
 * llama-server), else 400 for an `invalid_request_error`, else 502: the upstream failed mid-way.
 */
export function upstreamErrorFromFrame(frame: Record<string, unknown>): UpstreamError {
  const error = isRecord(frame.error) ? frame.error : {};
  const code = error.code;
  const status =
    typeof code === "number" && Number.isInteger(code) && code >= 400 && code <= 599
      ? code
      : error.type === "invalid_request_error"
        ? 400
        : 502;
  return upstreamErrorFromResponse(status, JSON.stringify(frame));
}

function upstreamMessage(body: unknown): string | undefined {
  if (!isRecord(body)) return undefined;
  const raw = isRecord(body.error) ? body.error.message : body.object === "error" ? body.message : undefined;
  if (typeof raw !== "string") return undefined;
  const clean = withoutStackTrace(raw).trim();
  if (clean === "") return undefined;
  return clean.length > MAX_MESSAGE_CHARS ? `${clean.slice(0, MAX_MESSAGE_CHARS - 1)}…` : clean;
}

/** Python tracebacks, JS/Java stack frames, C++ source positions: cut from the first line that looks like one. */
const STACK_LINE = /^\s*(Traceback \(most recent call last\)|at \S+.*[:(]\d+|File ".*", line \d+)/;

function withoutStackTrace(message: string): string {
  const lines = message.split("\n");
  const firstFrame = lines.findIndex((line) => STACK_LINE.test(line));
  return firstFrame === -1 ? message : lines.slice(0, firstFrame).join("\n");
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
