// Accounting of every admitted chat completion: the usage record, the rate-limit settlement and the token and
// latency metrics, taken from the engine's events whether or not the client reads them to the end.
import { performance } from "node:perf_hooks";
import type { Principal } from "../auth/principal.js";
import type { Generation, UsageCounts } from "../engine/types.js";
import type { Admission } from "../limits/types.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { UsageEndpoint, UsageMeter, UsageStatus } from "../usage/types.js";

export interface MeteredRequest {
  principal: Principal;
  model: string;
  requestId: string;
  /** performance.now() when the request arrived. */
  startedAt: number;
  /** The limiter's pre-charge, settled with the real token count when the generation ends. */
  admission: Admission | undefined;
  /** Aborted when the client left: the record says `aborted`. */
  signal: AbortSignal;
  /** The request's `user` (its caller's end user), stored with the record. */
  user?: string | undefined;
  /** The endpoint the request came through; default `chat.completions`. */
  endpoint?: UsageEndpoint | undefined;
}

export interface AccountingDeps {
  usageMeter: UsageMeter;
  metrics: Metrics;
  logger: Logger;
}

export class Accounting {
  private readonly open = new Set<Promise<void>>();

  constructor(private readonly deps: AccountingDeps) {}

  /**
   * Watches the generation's events as the engine pushes them (also after the client left, when the engine
   * reports the tokens generated so far) and accounts for them once, when the stream ends. Returns the same
   * generation: the consumer reads the engine's own stream.
   */
  meter(generation: Generation, request: MeteredRequest): Generation {
    const { metrics } = this.deps;
    const latency = new LatencyTracker(request.startedAt, (seconds) =>
      metrics.interTokenLatency(request.model, seconds),
    );
    let usage: UsageCounts | undefined;
    const accounted = new Promise<void>((resolve) => {
      generation.events.observe({
        value: (event) => {
          if (event.type === "delta") latency.delta(event.choice);
          else if (event.type === "usage") usage = event.usage;
        },
        end: (...failure: unknown[]) => {
          let status: UsageStatus = failure.length > 0 ? "error" : "completed";
          if (status === "completed" && request.signal.aborted) status = "aborted";
          if (latency.firstTokenSeconds !== undefined) {
            metrics.timeToFirstToken(request.model, latency.firstTokenSeconds);
          }
          // A failed generation reports no usage: its prompt is still accounted for.
          const counts = usage ?? {
            promptTokens: generation.promptTokens,
            completionTokens: 0,
            cachedTokens: 0,
          };
          void this.settle(request, counts, status).finally(resolve);
        },
      });
    });
    this.open.add(accounted);
    void accounted.finally(() => this.open.delete(accounted));
    return generation;
  }

  /** Resolves once every metered request has been accounted for (shutdown waits for this before flushing). */
  async settled(): Promise<void> {
    while (this.open.size > 0) await Promise.allSettled([...this.open]);
  }

  private async settle(request: MeteredRequest, usage: UsageCounts, status: UsageStatus): Promise<void> {
    const { usageMeter, metrics, logger } = this.deps;
    usageMeter.record({
      at: new Date(),
      orgId: request.principal.orgId,
      keyId: request.principal.keyId,
      model: request.model,
      requestId: request.requestId,
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      reasoningTokens: usage.reasoningTokens ?? 0,
      cachedTokens: usage.cachedTokens,
      status,
      latencyMs: Math.round(performance.now() - request.startedAt),
      user: request.user,
      endpoint: request.endpoint ?? "chat.completions",
    });
    metrics.tokens(request.model, usage);
    try {
      await request.admission?.settle(usage.promptTokens + usage.completionTokens);
    } catch (err) {
      logger.warn({ err, requestId: request.requestId }, "settling the rate-limit charge failed");
    }
  }
}

/** Time to the first delta, and each gap between consecutive deltas of one choice (in seconds) as it happens. */
class LatencyTracker {
  firstTokenSeconds: number | undefined;
  private readonly last = new Map<number, number>();

  constructor(
    private readonly startedAt: number,
    private readonly onGap: (seconds: number) => void,
  ) {}

  delta(choice: number): void {
    const now = performance.now();
    this.firstTokenSeconds ??= (now - this.startedAt) / 1000;
    const previous = this.last.get(choice);
    if (previous !== undefined) this.onGap((now - previous) / 1000);
    this.last.set(choice, now);
  }
}
