// Prometheus metrics (prom-client) for GET /metrics: requests, tokens, latencies, queue and sequence load.
// PLACEHOLDER until the metrics work lands: the recording methods exist, nothing is exported yet.
import type { UsageCounts } from "../engine/types.js";

/** The load of one model's engine right now, for the queue-depth and busy-sequence gauges. */
export interface ModelLoadSource {
  modelLoad(): { model: string; parallel: number; busySequences: number; queueDepth: number }[];
}

export class Metrics {
  constructor(readonly load: ModelLoadSource) {}

  /** One finished /v1/chat/completions response (any status); model is a configured id or "unknown". */
  requestFinished(_model: string, _status: number): void {}
  /** Tokens of one admitted request (prompt, completion, cached prompt tokens). */
  tokens(_model: string, _usage: UsageCounts): void {}
  timeToFirstToken(_model: string, _seconds: number): void {}
  interTokenLatency(_model: string, _seconds: number): void {}
  /** A 429 or 503 answered before generation. */
  rejected(_code: "rate_limit_exceeded" | "engine_overloaded"): void {}

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: "text/plain; version=0.0.4; charset=utf-8", body: "" };
  }
}
