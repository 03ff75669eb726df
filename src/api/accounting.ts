// Accounting of every admitted chat completion: the usage record, the rate-limit settlement and the token and
// latency metrics, taken from the engine's events whether or not the client reads them to the end.
import { performance } from "node:perf_hooks";
import type { Principal } from "../auth/principal.js";
import { Channel } from "../engine/channel.js";
import type { Generation, GenerationEvent, UsageCounts } from "../engine/types.js";
import type { Admission } from "../limits/types.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { UsageMeter, UsageStatus } from "../usage/types.js";

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
   * Returns a generation whose events are the engine's, while a pump reads the engine's events to the end (also
   * after the client left, when the engine reports the tokens generated so far) and accounts for them once.
   */
  meter(generation: Generation, request: MeteredRequest): Generation {
    const events = new Channel<GenerationEvent>();
    const pump = this.pump(generation, request, events);
    this.open.add(pump);
    void pump.finally(() => this.open.delete(pump));
    return { promptTokens: generation.promptTokens, events };
  }

  /** Resolves once every metered request has been accounted for (shutdown waits for this before flushing). */
  async settled(): Promise<void> {
    while (this.open.size > 0) await Promise.allSettled([...this.open]);
  }

  private async pump(
    generation: Generation,
    request: MeteredRequest,
    out: Channel<GenerationEvent>,
  ): Promise<void> {
    const { metrics } = this.deps;
    const latency = new LatencyTracker(request.startedAt, (seconds) =>
      metrics.interTokenLatency(request.model, seconds),
    );
    let usage: UsageCounts | undefined;
    let status: UsageStatus = "completed";
    try {
      for await (const event of generation.events) {
        if (event.type === "delta") latency.delta(event.choice);
        else if (event.type === "usage") usage = event.usage;
        out.push(event);
      }
      out.close();
    } catch (err) {
      status = "error";
      out.fail(err);
    }
    if (status === "completed" && request.signal.aborted) status = "aborted";
    if (latency.firstTokenSeconds !== undefined) {
      metrics.timeToFirstToken(request.model, latency.firstTokenSeconds);
    }
    // A failed generation reports no usage: its prompt is still accounted for.
    await this.settle(
      request,
      usage ?? { promptTokens: generation.promptTokens, completionTokens: 0, cachedTokens: 0 },
      status,
    );
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
