// The endpoints of one upstream model: slots in flight, health from active probes and passive signals, backoff.

import type { UpstreamKindSetting, UpstreamModelConfig } from "../../config/schema.js";
import type { Logger } from "../../observability/logger.js";
import { Refusal } from "../../refusal.js";
import type { EndpointHealth } from "../types.js";
import { isConnectionReset } from "./http-client.js";
import type { RoutableEndpoint } from "./routing.js";
import { serverRoot } from "./tokenize.js";
import { isRecord } from "./upstream-error.js";
import { readModelsResponse, UpstreamError, type UpstreamKind, UpstreamProtocolError } from "./wire.js";

/** Kinds whose `GET /health` (at the server root) is 200 only once the model can serve. */
const READINESS_ROUTE_KINDS: ReadonlySet<UpstreamKind> = new Set([
  "hearth",
  "llama-server",
  "vllm",
  "sglang",
]);

/** First ejection's backoff; each later one doubles it up to MAX_BACKOFF_MS, a served request resets it. */
export const BASE_BACKOFF_MS = 1_000;
export const MAX_BACKOFF_MS = 30_000;
/** Longest a probe may take: a stopped endpoint must be noticed within about a second. */
export const PROBE_TIMEOUT_MS = 1_000;

/** One endpoint of a model. `url` is the base URL as configured (credentials travel in headers only). */
export class Endpoint implements RoutableEndpoint {
  inFlight = 0;
  /** Optimistic until the first probe: a refused connection ejects it at once anyway. */
  healthy = true;
  lastError: string | undefined;
  /** While ejected: no re-admission before this time (ms since the epoch). */
  ejectedUntil = 0;
  backoffMs = 0;
  /** What the probes learned (`/models`). */
  contextSize: number | undefined;
  kind: UpstreamKind | undefined;
  /**
   * Whether the engine's chat template can make tool calls (llama-server's `/props`); undefined when the engine
   * does not say. Read again after an ejection: a restarted server may run another template.
   */
  toolCalls: boolean | undefined;
  /** Counters for the metrics. */
  requests = 0;
  retries = 0;
  ejections = 0;
  probing = false;
  /** Attempts waiting for their first token here: an ejection aborts them, so they move on at once. */
  readonly waitingForFirstToken = new Set<AbortController>();

  /** The base URL without user info: what requests go to, and what logs, `/health` and the CLI show. */
  readonly url: string;
  /** Bearer key, or Basic credentials taken out of the configured URL. Never logged. */
  private readonly authorization: string | undefined;

  constructor(
    readonly index: number,
    configuredUrl: string,
    apiKey: string | undefined,
    readonly maxInFlight: number,
  ) {
    const { url, basic } = splitCredentials(configuredUrl);
    this.url = url;
    this.authorization = apiKey !== undefined ? `Bearer ${apiKey}` : basic;
  }

  get id(): string {
    return this.url;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.authorization === undefined ? extra : { ...extra, authorization: this.authorization };
  }

  /** Its state; the prefix-cache counters are the model's learner's (cache-affinity.ts). */
  health(): Omit<EndpointHealth, "promptTokens" | "cachedTokens"> {
    return {
      url: this.url,
      healthy: this.healthy,
      inFlight: this.inFlight,
      requests: this.requests,
      retries: this.retries,
      ejections: this.ejections,
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
    };
  }
}

/** The endpoint was ejected (a probe failed, or another request's failure) while an attempt waited on it. */
export class EndpointEjectedError extends Refusal {
  override name = "EndpointEjectedError";
  readonly fault = "server";
  constructor(readonly reason: string) {
    super(`the endpoint was ejected (${reason})`);
  }
}

/** fetch refuses URLs with user info: move it to a Basic authorization header. */
function splitCredentials(configured: string): { url: string; basic: string | undefined } {
  let parsed: URL;
  try {
    parsed = new URL(configured);
  } catch {
    return { url: configured, basic: undefined };
  }
  if (parsed.username === "" && parsed.password === "") return { url: configured, basic: undefined };
  const user = decodeURIComponent(parsed.username);
  const password = decodeURIComponent(parsed.password);
  parsed.username = "";
  parsed.password = "";
  const basic = `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
  return { url: parsed.toString().replace(/\/+$/, ""), basic };
}

/** A failure in words, for `lastError` and the log: status and message, never a body or a key. */
export function describeFailure(err: unknown): string {
  // The status only: an upstream's message may carry its internals (paths, queue names).
  if (err instanceof UpstreamError) return `HTTP ${err.status}`;
  if (err instanceof UpstreamProtocolError) return `protocol error: ${err.message}`;
  // AbortSignal.timeout's reason is a DOMException, which need not be an Error.
  if (typeof err === "object" && err !== null && (err as { name?: unknown }).name === "TimeoutError") {
    return "timed out";
  }
  if (err instanceof Error) {
    const code = (err.cause as { code?: unknown } | undefined)?.code;
    if (typeof code === "string") return connectionErrorText(code);
    const ownCode = (err as { code?: unknown }).code;
    if (typeof ownCode === "string") return connectionErrorText(ownCode);
    return err.message;
  }
  return String(err);
}

function connectionErrorText(code: string): string {
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ECONNRESET":
    case "UND_ERR_SOCKET":
      return "connection reset";
    case "UND_ERR_CONNECT_TIMEOUT":
    case "ETIMEDOUT":
      return "connect timed out";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "host not found";
    default:
      return `connection failed (${code})`;
  }
}

export interface EndpointPoolOptions {
  config: UpstreamModelConfig;
  fetch?: typeof fetch;
  logger?: Logger;
  /** After any change of health: the model re-checks its waiting requests. */
  onHealthChange?: () => void;
}

export class EndpointPool {
  readonly endpoints: readonly Endpoint[];
  private readonly fetch: typeof fetch;
  private interval: NodeJS.Timeout | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly options: EndpointPoolOptions) {
    const { upstream } = options.config;
    this.endpoints = upstream.endpoints.map((e, i) => new Endpoint(i, e.url, e.apiKey, upstream.maxInFlight));
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  get model(): string {
    return this.options.config.id;
  }

  /** Probes every endpoint once, then every `probeIntervalMs`; resolves after the first round. */
  async start(): Promise<void> {
    this.stopped = false;
    if (this.interval === undefined) {
      this.interval = setInterval(() => void this.probeAll(), this.options.config.upstream.probeIntervalMs);
      this.interval.unref();
    }
    await this.probeAll();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.interval);
    this.interval = undefined;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  healthy(): Endpoint[] {
    return this.endpoints.filter((e) => e.healthy);
  }

  /** The context size: configured, else the first an endpoint reported. */
  get contextSize(): number | undefined {
    return this.options.config.upstream.contextSize ?? this.endpoints.find((e) => e.contextSize)?.contextSize;
  }

  /** The engine an endpoint runs: configured, else what its probe detected (undefined until then). */
  kindOf(endpoint: Endpoint): UpstreamKind | undefined {
    const setting: UpstreamKindSetting = this.options.config.upstream.kind;
    return setting === "auto" ? endpoint.kind : setting;
  }

  acquire(endpoint: Endpoint): void {
    endpoint.inFlight++;
    endpoint.requests++;
  }

  release(endpoint: Endpoint): void {
    endpoint.inFlight = Math.max(0, endpoint.inFlight - 1);
  }

  /** A request got its first token from the endpoint: the next ejection starts again from the base backoff. */
  succeeded(endpoint: Endpoint): void {
    endpoint.backoffMs = 0;
  }

  /**
   * Takes an endpoint out of routing at once (a passive signal or a failed probe). False when it was out already.
   * `logged: false`: the caller's own warn line about the failure says it was ejected (one line per fault).
   */
  eject(endpoint: Endpoint, reason: string, { logged = true } = {}): boolean {
    endpoint.lastError = reason;
    if (!endpoint.healthy) return false;
    endpoint.healthy = false;
    endpoint.toolCalls = undefined;
    endpoint.ejections++;
    endpoint.backoffMs =
      endpoint.backoffMs === 0 ? BASE_BACKOFF_MS : Math.min(endpoint.backoffMs * 2, MAX_BACKOFF_MS);
    endpoint.ejectedUntil = Date.now() + endpoint.backoffMs;
    for (const attempt of endpoint.waitingForFirstToken) attempt.abort(new EndpointEjectedError(reason));
    endpoint.waitingForFirstToken.clear();
    if (logged) {
      this.options.logger?.warn(
        { model: this.model, endpoint: endpoint.url, reason, backoffMs: endpoint.backoffMs },
        "upstream endpoint ejected",
      );
    }
    // Probe as soon as the backoff has passed, so a restarted endpoint is back without waiting for the interval.
    if (!this.stopped) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        void this.probe(endpoint);
      }, endpoint.backoffMs);
      timer.unref();
      this.timers.add(timer);
    }
    this.options.onHealthChange?.();
    return true;
  }

  async probeAll(): Promise<void> {
    await Promise.all(this.endpoints.map((e) => this.probe(e)));
  }

  /** `true` when every endpoint that says whether its template can call tools says it cannot (and one says so). */
  cannotCallTools(): boolean {
    const known = this.endpoints.filter((e) => e.toolCalls !== undefined);
    return known.length > 0 && known.every((e) => e.toolCalls === false);
  }

  /** llama-server's `GET /props` → `chat_template_caps.supports_tool_calls`; undefined when it does not say. */
  private async readToolCalls(endpoint: Endpoint, timeoutMs: number): Promise<boolean | undefined> {
    try {
      const response = await this.get(`${serverRoot(endpoint.url)}/props`, endpoint, timeoutMs);
      if (!response.ok) {
        await response.arrayBuffer();
        return undefined;
      }
      const props: unknown = await response.json();
      const caps = isRecord(props) ? props.chat_template_caps : undefined;
      return isRecord(caps) && typeof caps.supports_tool_calls === "boolean"
        ? caps.supports_tool_calls
        : undefined;
    } catch {
      return undefined;
    }
  }

  /** A probe's GET; once more on a connection reset before the answer, as the hot path does (`isConnectionReset`). */
  private async get(url: string, endpoint: Endpoint, timeoutMs: number): Promise<Response> {
    const init = () => ({
      headers: endpoint.headers({ accept: "application/json" }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    try {
      return await this.fetch(url, init());
    } catch (err) {
      if (!isConnectionReset(err)) throw err;
      return await this.fetch(url, init());
    }
  }

  /** `GET {url}/models`: passing re-admits an ejected endpoint once its backoff has passed; failing ejects it. */
  async probe(endpoint: Endpoint): Promise<void> {
    if (endpoint.probing || this.stopped) return;
    endpoint.probing = true;
    try {
      const timeoutMs = Math.min(PROBE_TIMEOUT_MS, this.options.config.upstream.probeIntervalMs);
      const response = await this.get(`${endpoint.url}/models`, endpoint, timeoutMs);
      const text = await response.text();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const served = this.options.config.upstream.model;
      const info = readModelsResponse(JSON.parse(text) as unknown, served);
      if (!info.present) throw new Error(`the endpoint does not serve ${served}`);
      if (info.contextSize !== undefined) endpoint.contextSize = info.contextSize;
      if (info.kind !== undefined) endpoint.kind = info.kind;
      // Engines that list a model before it is loaded say so on /health (Hearth, llama-server: 503 while loading).
      const kind = this.kindOf(endpoint);
      if (kind !== undefined && READINESS_ROUTE_KINDS.has(kind)) {
        const ready = await this.get(`${serverRoot(endpoint.url)}/health`, endpoint, timeoutMs);
        const body = await ready.text();
        if (!ready.ok) throw new Error(`not ready (health ${ready.status})`);
        // A Hearth worker is up once one of its models serves: this one may still be loading there.
        const waiting = kind === "hearth" ? modelNotServing(body, served) : undefined;
        if (waiting !== undefined) throw new Error(`not ready (${served} ${waiting})`);
      }
      if (kind === "llama-server" && endpoint.toolCalls === undefined) {
        endpoint.toolCalls = await this.readToolCalls(endpoint, timeoutMs);
      }
      if (this.stopped) return;
      if (!endpoint.healthy && Date.now() >= endpoint.ejectedUntil) {
        endpoint.healthy = true;
        this.options.logger?.info(
          { model: this.model, endpoint: endpoint.url },
          "upstream endpoint re-admitted",
        );
        this.options.onHealthChange?.();
      }
    } catch (err) {
      if (this.stopped) return;
      const reason = `probe: ${err instanceof SyntaxError ? "not a JSON model list" : describeFailure(err)}`;
      this.eject(endpoint, reason);
    } finally {
      endpoint.probing = false;
    }
  }
}

/**
 * Why a Hearth worker's /health body says `model` cannot take requests yet (downloading, loading, unloading,
 * failed); undefined when it can, or rests unloaded (a request loads it on demand), or the body does not say.
 */
export function modelNotServing(body: string, model: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  const models = (parsed as { models?: unknown }).models;
  if (!Array.isArray(models)) return undefined;
  const entry = models.find(
    (m): m is { id: string; state?: unknown } => (m as { id?: unknown })?.id === model,
  );
  const state = entry?.state;
  if (typeof state !== "string" || state === "ready" || state === "unloaded") return undefined;
  return state;
}
