// One request to upstream endpoints: attempts until the first token (moving to another endpoint on failure),
// then the relay of its stream into the generation's channel.

import { TextDecoder } from "node:util";
import { faultCause } from "../../observability/fault-cause.js";
import type { Logger } from "../../observability/logger.js";
import { Refusal } from "../../refusal.js";
import { upstreamCacheSalt } from "../cache-scope.js";
import { Channel, MAX_BACKLOG } from "../channel.js";
import { QueueFullError, RequestAbortedError } from "../errors.js";
import type { Generation, GenerationEvent, PreparedRequest, UsageCounts } from "../types.js";
import { describeFailure, type Endpoint, EndpointEjectedError, type EndpointPool } from "./endpoint-pool.js";
import type { EndpointSlots } from "./endpoint-slots.js";
import { NoHealthyEndpointError } from "./endpoint-slots.js";
import type { UpstreamPost, UpstreamResponse } from "./http-client.js";
import {
  UpstreamError,
  UpstreamProtocolError,
  UpstreamStreamDecoder,
  upstreamErrorFromResponse,
  upstreamRequestBody,
} from "./wire.js";

/** The endpoint sent no first token within `firstTokenTimeoutMs`. */
export class FirstTokenTimeoutError extends Refusal {
  override name = "FirstTokenTimeoutError";
  readonly fault = "server";
  constructor(readonly timeoutMs: number) {
    super(`no first token within ${timeoutMs} ms`);
  }
}

/** The engine is shutting down: in-flight streams end with this. */
export class EngineDisposedError extends Refusal {
  override name = "EngineDisposedError";
  readonly fault = "server";
  constructor() {
    super("The engine shut down during the request.");
  }
}

export interface UpstreamCallContext {
  pool: EndpointPool;
  slots: EndpointSlots;
  /** The name the endpoints serve. */
  upstreamModel: string;
  firstTokenTimeoutMs: number;
  maxAttempts: number;
  /** Aborts every call (dispose). */
  engineSignal: AbortSignal;
  post: UpstreamPost;
  logger: Logger | undefined;
  onFirstToken: ((event: FirstTokenEvent) => void) | undefined;
  /** A stream ended: the endpoint that served it and the usage it reported (undefined: it reported none). */
  onStreamEnd?: ((endpoint: Endpoint, usage: UsageCounts | undefined) => void) | undefined;
}

/** A request's first token arrived from an endpoint (after any retries). */
export interface FirstTokenEvent {
  model: string;
  /** The endpoint's index in the model's config, and its URL without credentials. */
  endpoint: number;
  url: string;
  /** Since this attempt's POST. */
  seconds: number;
}

/** What a prepared request carries for the call. */
export interface UpstreamCallRequest extends PreparedRequest {
  /** Undefined when the model routes without affinity (`upstream.affinity: false`). */
  readonly affinityKey: string | undefined;
}

/** A stream that has produced its first events: the rest is relayed by `relay`. */
interface StartedStream {
  response: UpstreamResponse;
  decoder: UpstreamStreamDecoder;
  text: TextDecoder;
  first: GenerationEvent[];
}

/**
 * Sends the request to an endpoint chosen by routing and resolves once its first delta or finish is decoded.
 * Until then a failure moves it to another endpoint (at most `maxAttempts` in all); an upstream 400-class
 * answer rejects with its UpstreamError at once. Afterwards nothing is retried: a failure fails the channel
 * after a `usage` event for what was relayed.
 */
export async function callUpstream(
  ctx: UpstreamCallContext,
  prepared: UpstreamCallRequest,
): Promise<Generation> {
  const { request } = prepared;
  const tried = new Set<number>();
  let lastFailure = "";
  for (let attempt = 1; attempt <= ctx.maxAttempts; attempt++) {
    const endpoint = await ctx.slots.acquire({
      scope: request.cacheScope,
      key: prepared.affinityKey,
      exclude: tried,
      signal: request.signal,
    });
    tried.add(endpoint.index);
    if (attempt > 1) endpoint.retries++;
    // The attempt's own signal, aborted by its time-out, an ejection, shutdown or the client leaving.
    const controller = new AbortController();
    const unlink = abortWith(controller, ctx.engineSignal, request.signal);
    const { signal } = controller;
    let started: StartedStream;
    const sentAt = performance.now();
    try {
      started = await startStream(ctx, prepared, endpoint, controller, signal);
    } catch (err) {
      unlink();
      ctx.slots.release(endpoint, request.cacheScope);
      if (request.signal?.aborted) throw new RequestAbortedError(request.model);
      // Shutting down: the same 503 as a full queue (QueueFullError covers a draining engine).
      if (ctx.engineSignal.aborted) throw new QueueFullError(request.model);
      if (err instanceof UpstreamError && err.clientError) throw err;
      lastFailure = describeFailure(err);
      // One warn line for the fault, saying whether it also took the endpoint out (no second line from the pool).
      const ejected = isEndpointFault(err) && ctx.pool.eject(endpoint, lastFailure, { logged: false });
      ctx.logger?.warn(
        {
          model: request.model,
          endpoint: endpoint.url,
          attempt,
          ...faultCause(err, lastFailure),
          ejected,
          ...requestIdOf(request),
        },
        "upstream attempt failed before the first token",
      );
      continue;
    }
    ctx.pool.succeeded(endpoint);
    ctx.onFirstToken?.({
      model: request.model,
      endpoint: endpoint.index,
      url: endpoint.url,
      seconds: (performance.now() - sentAt) / 1000,
    });
    const events = new Channel<GenerationEvent>();
    relay(ctx, prepared, endpoint, started, events, signal)
      .catch((err: unknown) => {
        // relay handles every upstream fault itself: what escapes it is a bug of ours.
        ctx.logger?.error({ err, model: request.model, ...requestIdOf(request) }, "upstream relay failed");
        events.fail(err);
      })
      .finally(unlink);
    return { promptTokens: prepared.promptTokens, events };
  }
  throw new NoHealthyEndpointError(
    request.model,
    `${ctx.maxAttempts} attempt${ctx.maxAttempts === 1 ? "" : "s"} failed (last: ${lastFailure})`,
  );
}

/**
 * Aborts `controller` when either source aborts (with its reason); returns the unlink, called when the attempt
 * is over. What AbortSignal.any does, without its per-call weak references and finalization bookkeeping: the
 * sources here outlive the attempt (the engine's signal lives as long as the engine), so the listeners are
 * removed explicitly instead.
 */
function abortWith(controller: AbortController, ...sources: (AbortSignal | undefined)[]): () => void {
  const linked: AbortSignal[] = [];
  const onAbort = function (this: AbortSignal) {
    controller.abort(this.reason);
  };
  for (const source of sources) {
    if (source === undefined) continue;
    if (source.aborted) {
      controller.abort(source.reason);
      continue;
    }
    source.addEventListener("abort", onAbort, { once: true });
    linked.push(source);
  }
  return () => {
    for (const source of linked) source.removeEventListener("abort", onAbort);
  };
}

/** Whether a failure says the endpoint itself is unwell (eject it), rather than busy or the request's fault. */
function isEndpointFault(err: unknown): boolean {
  if (err instanceof EndpointEjectedError) return false;
  // 429 and 503 are an engine saying it is busy (a Hearth worker's queue is full or timed out, vLLM's too): the
  // request goes elsewhere, but the endpoint stays in. Ejecting it would let one busy answer take down the last
  // healthy endpoint, and with it every request waiting at the gateway. A dead engine fails its probes instead.
  if (err instanceof UpstreamError && BUSY_STATUSES.has(err.status)) return false;
  if (err instanceof UpstreamError) return err.status >= 500 || !err.retryable;
  // Connect errors, resets, protocol errors, first-token time-outs.
  return true;
}

const BUSY_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/** POSTs the request and reads until the first delta or finish (or fails). */
async function startStream(
  ctx: UpstreamCallContext,
  prepared: UpstreamCallRequest,
  endpoint: Endpoint,
  controller: AbortController,
  signal: AbortSignal,
): Promise<StartedStream> {
  const timeoutMs = ctx.firstTokenTimeoutMs;
  const timer = setTimeout(() => controller.abort(new FirstTokenTimeoutError(timeoutMs)), timeoutMs);
  timer.unref();
  endpoint.waitingForFirstToken.add(controller);
  try {
    // Until a probe has told an `auto` endpoint's dialect: plain OpenAI, which sends no extra field.
    const kind = ctx.pool.kindOf(endpoint) ?? "openai";
    const body = upstreamRequestBody(prepared.request, {
      model: ctx.upstreamModel,
      kind,
      cacheSalt: upstreamCacheSalt(prepared.request),
      penaltyWindow: prepared.promptTokens + prepared.maxTokensPerChoice,
    });
    const response = await ctx.post(`${endpoint.url}/chat/completions`, {
      headers: endpoint.headers({ "content-type": "application/json", accept: "text/event-stream" }),
      body: JSON.stringify(body),
      signal,
    });
    if (response.status < 200 || response.status > 299) {
      throw upstreamErrorFromResponse(response.status, await response.text());
    }
    const decoder = new UpstreamStreamDecoder({
      n: prepared.request.n,
      reasoning: prepared.request.enableThinking,
    });
    const text = new TextDecoder("utf-8");
    const first: GenerationEvent[] = [];
    while (!decoder.started) {
      const { done, value } = await response.chunks.next();
      if (done) {
        first.push(...decoder.push(text.decode()), ...decoder.end());
        if (!decoder.started) throw new UpstreamProtocolError("the stream ended before its first token");
        break;
      }
      first.push(...decoder.push(text.decode(value, { stream: true })));
    }
    return { response, decoder, text, first };
  } catch (err) {
    // The time-out's or the ejection's reason, not the fetch's generic AbortError.
    const reason: unknown = controller.signal.reason;
    if (reason instanceof FirstTokenTimeoutError || reason instanceof EndpointEjectedError) throw reason;
    controller.abort();
    throw err;
  } finally {
    clearTimeout(timer);
    endpoint.waitingForFirstToken.delete(controller);
  }
}

/**
 * Relays the rest of the stream into the channel. Whatever happens, a `usage` event comes last: the upstream's
 * when it sent one, else the prompt as prepared and one completion token per relayed delta (the upstream
 * streams one chunk per token). A client abort closes the channel; any other failure fails it after the usage.
 */
async function relay(
  ctx: UpstreamCallContext,
  prepared: UpstreamCallRequest,
  endpoint: Endpoint,
  stream: StartedStream,
  events: Channel<GenerationEvent>,
  signal: AbortSignal,
): Promise<void> {
  const { response, decoder, text } = stream;
  // The decoder's own usage event is left out: ours, pushed last whatever happens, carries the same counts.
  const emit = (list: readonly GenerationEvent[]) => {
    for (const event of list) if (event.type !== "usage") events.push(event);
  };
  const usage = (): UsageCounts =>
    decoder.usage ?? {
      promptTokens: prepared.promptTokens,
      completionTokens: decoder.deltas,
      cachedTokens: 0,
    };
  // The slot is free before the channel ends: whoever reads the end sees the endpoint's load without it.
  const end = (error?: unknown) => {
    if (signal.aborted) response.discard();
    ctx.slots.release(endpoint, prepared.request.cacheScope);
    ctx.onStreamEnd?.(endpoint, decoder.usage);
    events.push({ type: "usage", usage: usage() });
    if (error === undefined) events.close();
    else events.fail(error);
  };
  try {
    emit(stream.first);
    for (;;) {
      // A client that stopped reading: stop reading the upstream too (TCP pushes back on the endpoint).
      await events.drained(MAX_BACKLOG, signal);
      const { done, value } = await response.chunks.next();
      if (done) break;
      emit(decoder.push(text.decode(value, { stream: true })));
    }
    emit(decoder.push(text.decode()));
    emit(decoder.end());
  } catch (err) {
    if (prepared.request.signal?.aborted) return end();
    if (ctx.engineSignal.aborted) return end(new EngineDisposedError());
    // Anything else without a code or an upstream error class is a bug of ours: no warn line, no ejection; the
    // stream fails with it and the HTTP edge logs it at error level with its stack.
    if (!isUpstreamFault(err)) return end(err);
    const reason = describeFailure(err);
    const ejected = isEndpointFault(err) && ctx.pool.eject(endpoint, reason, { logged: false });
    // The one line of a handled fault: endpoint, cause, request id; no error object (its stack says nothing here).
    ctx.logger?.warn(
      {
        model: prepared.request.model,
        endpoint: endpoint.url,
        ...faultCause(err, reason),
        ejected,
        ...requestIdOf(prepared.request),
      },
      "upstream stream failed after the first token",
    );
    return end(asUpstreamError(err, reason));
  }
  end();
}

/** An upstream's own failure (an error answer or frame, a broken protocol, a time-out, a connection error). */
function isUpstreamFault(err: unknown): boolean {
  return (
    err instanceof UpstreamError ||
    err instanceof UpstreamProtocolError ||
    err instanceof FirstTokenTimeoutError ||
    err instanceof EndpointEjectedError ||
    faultCause(err).code !== undefined ||
    (typeof err === "object" && err !== null && (err as { name?: unknown }).name === "TimeoutError")
  );
}

/**
 * A connection error as the upstream failure it is (502: the endpoint broke off), so the client's error frame says
 * the upstream failed (503 engine_overloaded, retry) instead of a 500 for a bug; upstream errors stay as they are.
 */
function asUpstreamError(err: unknown, reason: string): unknown {
  if (
    err instanceof UpstreamError ||
    err instanceof UpstreamProtocolError ||
    err instanceof FirstTokenTimeoutError ||
    err instanceof EndpointEjectedError
  ) {
    return err;
  }
  return new UpstreamError("The upstream engine failed during the request.", 502, false, false, reason);
}

function requestIdOf(request: { requestId?: string }): { requestId?: string } {
  return request.requestId === undefined ? {} : { requestId: request.requestId };
}
