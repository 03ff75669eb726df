// Prometheus metrics (prom-client) for GET /metrics: requests, tokens, latencies, queue and sequence load.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import {
  type AcceleratorState,
  type EndpointHealth,
  type ModelHealth,
  REPIN_REASONS,
  type UsageCounts,
} from "../engine/types.js";

/**
 * The engine as the gauges read it at scrape time: each model's load, each upstream endpoint's state, and the
 * embedded engine's backend.
 */
export interface ModelLoadSource {
  modelLoad(): { model: string; parallel: number; busySequences: number; queueDepth: number }[];
  health?(): ModelHealth[];
  accelerator?(): Promise<AcceleratorState | undefined>;
}

/**
 * Time to first token on CPU: queue wait plus prompt prefill, from tens of milliseconds (a short prompt on an
 * idle small model) to a minute (a long prompt behind a full queue on a large one).
 */
const TTFT_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];
/** One decode step shared by every running sequence: ~10 ms for a tiny model alone, up to seconds when loaded. */
const INTER_TOKEN_BUCKETS = [0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5];

/** Label values of `model` beyond which new ones are folded into "other" (a safety net, not the normal path). */
const MAX_MODEL_LABELS = 64;

/**
 * The service's metrics in a registry of their own (not prom-client's global one), so several apps can live
 * in one process. Labels are bounded: configured model ids and HTTP statuses, never keys or organizations.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly models = new Set<string>();
  private readonly requests: Counter<"model" | "status">;
  private readonly promptTokens: Counter<"model">;
  private readonly completionTokens: Counter<"model">;
  private readonly cachedPromptTokens: Counter<"model">;
  private readonly ttft: Histogram<"model">;
  private readonly interToken: Histogram<"model">;
  private readonly rateLimited: Counter;
  private readonly overloaded: Counter;
  private readonly invalidOutput: Counter<"model">;
  private readonly upstreamFirstToken: Histogram<"model" | "endpoint">;

  constructor(readonly load: ModelLoadSource) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: "hearth_requests_total",
      help: "Chat completion requests answered, by model and HTTP status.",
      labelNames: ["model", "status"],
      registers,
    });
    const modelCounter = (name: string, help: string) =>
      new Counter({ name, help, labelNames: ["model"], registers });
    this.promptTokens = modelCounter("hearth_prompt_tokens_total", "Prompt tokens of admitted requests.");
    this.completionTokens = modelCounter(
      "hearth_completion_tokens_total",
      "Generated tokens (reasoning included).",
    );
    this.cachedPromptTokens = modelCounter(
      "hearth_cached_prompt_tokens_total",
      "Prompt tokens served from a sequence's cached prefix instead of being evaluated.",
    );
    this.ttft = new Histogram({
      name: "hearth_time_to_first_token_seconds",
      help: "From the request's arrival to its first generated token (queue wait and prefill included).",
      labelNames: ["model"],
      buckets: TTFT_BUCKETS,
      registers,
    });
    this.interToken = new Histogram({
      name: "hearth_inter_token_latency_seconds",
      help: "Time between consecutive generated tokens of one choice.",
      labelNames: ["model"],
      buckets: INTER_TOKEN_BUCKETS,
      registers,
    });
    this.rateLimited = new Counter({
      name: "hearth_rate_limited_total",
      help: "Requests refused with 429 by the organization's rate limits.",
      registers,
    });
    this.overloaded = new Counter({
      name: "hearth_overloaded_total",
      help: "Requests refused with 503 engine_overloaded (queue full, queue timeout, loading, draining).",
      registers,
    });
    this.invalidOutput = new Counter({
      name: "hearth_structured_output_invalid_total",
      help: "Replies whose structured output failed the check after generation (a constraint no grammar enforces, such as uniqueItems, or a Hearth bug); they are returned as generated.",
      labelNames: ["model"],
      registers,
    });
    const loadGauge = (name: string, help: string, read: (l: ModelLoadRow) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["model"],
        registers,
        // Read at scrape time from the engine, so the gauge is never stale.
        collect() {
          this.reset();
          for (const row of load.modelLoad()) this.set({ model: row.model }, read(row));
        },
      });
    loadGauge("hearth_queue_depth", "Requests waiting for a free sequence.", (l) => l.queueDepth);
    loadGauge("hearth_busy_sequences", "Sequences generating or prefilling.", (l) => l.busySequences);
    loadGauge("hearth_sequences", "Sequences (parallel slots) of the model's context.", (l) => l.parallel);

    // The embedded engine's backend, as node-llama-cpp's llama.gpu names it ("false": the CPU), and the GPU's memory
    // beside process_resident_memory_bytes (absent on the CPU, where llama.cpp reports none).
    new Gauge({
      name: "hearth_engine_gpu_info",
      help: 'The embedded engine\'s backend: 1 with label gpu = "cuda", "vulkan", "metal" or "false" (the CPU).',
      labelNames: ["gpu"],
      registers,
      async collect() {
        this.reset();
        const state = await load.accelerator?.();
        if (state !== undefined) this.set({ gpu: String(state.gpu) }, 1);
      },
    });
    new Gauge({
      name: "hearth_engine_build_info",
      help: 'The embedded engine\'s llama.cpp build: 1 with label build = "tuned" (Hearth\'s, for this CPU) or "prebuilt".',
      labelNames: ["build"],
      registers,
      async collect() {
        this.reset();
        const state = await load.accelerator?.();
        if (state !== undefined) this.set({ build: state.build.build }, 1);
      },
    });
    new Gauge({
      name: "hearth_gpu_vram_bytes",
      help: "GPU memory as llama.cpp reports it (all devices), by state: total, used, free.",
      labelNames: ["state"],
      registers,
      async collect() {
        this.reset();
        const vram = (await load.accelerator?.())?.vram;
        if (vram === undefined) return;
        for (const state of ["total", "used", "free"] as const) this.set({ state }, vram[state]);
      },
    });
    new Gauge({
      name: "hearth_model_gpu_layers",
      help: "Layers of an embedded model offloaded to the GPU (0 on the CPU).",
      labelNames: ["model"],
      registers,
      collect() {
        this.reset();
        for (const m of load.health?.() ?? []) {
          if (m.gpuLayers !== undefined) this.set({ model: m.model }, m.gpuLayers);
        }
      },
    });

    // Upstream endpoints, labelled by model and the endpoint's index in the config (bounded; never a URL or key).
    const endpoints = () =>
      (load.health?.() ?? []).flatMap((m) =>
        (m.endpoints ?? []).map((e, i) => ({ labels: { model: m.model, endpoint: String(i) }, e })),
      );
    const endpointMetric = (
      name: string,
      help: string,
      kind: "gauge" | "counter",
      read: (e: EndpointHealth) => number,
    ) => {
      const options = { name, help, labelNames: ["model", "endpoint"] as const, registers };
      if (kind === "gauge") {
        new Gauge({
          ...options,
          collect() {
            this.reset();
            for (const { labels, e } of endpoints()) this.set(labels, read(e));
          },
        });
        return;
      }
      new Counter({
        ...options,
        // The pool keeps the running totals; a scrape copies them.
        collect() {
          this.reset();
          for (const { labels, e } of endpoints()) this.inc(labels, read(e));
        },
      });
    };
    endpointMetric(
      "hearth_upstream_in_flight",
      "Requests an upstream endpoint is serving.",
      "gauge",
      (e) => e.inFlight,
    );
    endpointMetric(
      "hearth_upstream_healthy",
      "1 while an upstream endpoint is admitted, 0 while ejected.",
      "gauge",
      (e) => (e.healthy ? 1 : 0),
    );
    endpointMetric(
      "hearth_upstream_requests_total",
      "Attempts sent to an upstream endpoint.",
      "counter",
      (e) => e.requests,
    );
    endpointMetric(
      "hearth_upstream_retries_total",
      "Attempts moved from an upstream endpoint to another before the first token.",
      "counter",
      (e) => e.retries,
    );
    endpointMetric(
      "hearth_upstream_ejections_total",
      "Times an upstream endpoint was ejected.",
      "counter",
      (e) => e.ejections,
    );
    // The prefix cache as each endpoint reported it (usage's cached_tokens, llama-server's timings.cache_n): the
    // hit rate is cached ÷ prompt, per endpoint, or summed per model for the fleet's.
    endpointMetric(
      "hearth_upstream_prompt_tokens_total",
      "Prompt tokens of the streams an upstream endpoint served with reported usage.",
      "counter",
      (e) => e.promptTokens,
    );
    endpointMetric(
      "hearth_upstream_cached_prompt_tokens_total",
      "Of those, prompt tokens the upstream endpoint took from its prefix cache.",
      "counter",
      (e) => e.cachedTokens,
    );
    new Counter({
      name: "hearth_upstream_repins_total",
      help: "Conversations whose endpoint changed (endpoint_down, endpoint_busy) or lost their cached prefix (cache_lost: restart, eviction; the conversation stays).",
      labelNames: ["model", "reason"],
      registers,
      collect() {
        this.reset();
        for (const m of load.health?.() ?? []) {
          if (m.repins === undefined) continue;
          for (const reason of REPIN_REASONS) this.inc({ model: m.model, reason }, m.repins[reason]);
        }
      },
    });
    this.upstreamFirstToken = new Histogram({
      name: "hearth_upstream_first_token_seconds",
      help: "Time from sending a request to an upstream endpoint to its first token.",
      labelNames: ["model", "endpoint"],
      buckets: TTFT_BUCKETS,
      registers,
    });
  }

  /** One upstream attempt's time to its first token (`endpoint` = the endpoint's index in the config). */
  upstreamTimeToFirstToken(model: string, endpoint: number, seconds: number): void {
    this.upstreamFirstToken.observe({ model: this.modelLabel(model), endpoint: String(endpoint) }, seconds);
  }

  /** One finished /v1/chat/completions response (any status); model is a configured id or "unknown". */
  requestFinished(model: string, status: number): void {
    this.requests.inc({ model: this.modelLabel(model), status: String(status) });
  }

  /** Tokens of one admitted request (prompt, completion, cached prompt tokens). */
  tokens(model: string, usage: UsageCounts): void {
    const labels = { model: this.modelLabel(model) };
    this.promptTokens.inc(labels, usage.promptTokens);
    this.completionTokens.inc(labels, usage.completionTokens);
    this.cachedPromptTokens.inc(labels, usage.cachedTokens);
  }

  timeToFirstToken(model: string, seconds: number): void {
    this.ttft.observe({ model: this.modelLabel(model) }, seconds);
  }

  interTokenLatency(model: string, seconds: number): void {
    this.interToken.observe({ model: this.modelLabel(model) }, seconds);
  }

  /** A choice whose JSON or tool arguments failed validation after generation. */
  structuredOutputInvalid(model: string): void {
    this.invalidOutput.inc({ model: this.modelLabel(model) });
  }

  /** A 429 or 503 answered before generation. */
  rejected(code: "rate_limit_exceeded" | "engine_overloaded"): void {
    switch (code) {
      case "rate_limit_exceeded":
        this.rateLimited.inc();
        break;
      case "engine_overloaded":
        this.overloaded.inc();
        break;
      default:
        code satisfies never;
    }
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** The caller passes configured ids or "unknown"; this keeps a bug there from growing the series without end. */
  private modelLabel(model: string): string {
    if (this.models.has(model)) return model;
    if (this.models.size >= MAX_MODEL_LABELS) return "other";
    this.models.add(model);
    return model;
  }
}

type ModelLoadRow = ReturnType<ModelLoadSource["modelLoad"]>[number];
