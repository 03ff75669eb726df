import { describe, expect, it } from "vitest";
import type { AcceleratorState } from "../engine/types.js";
import { Metrics, type ModelLoadSource } from "./metrics.js";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text exposition format (the subset prom-client writes). */
function parse(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type !== null) {
      types.set(type[1] as string, type[2] as string);
      continue;
    }
    if (line.startsWith("#")) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (sample === null) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const m of (sample[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[m[1] as string] = m[2] as string;
    }
    samples.push({ name: sample[1] as string, labels, value: Number(sample[3]) });
  }
  return { samples, types };
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    ?.value;
}

function fakeLoad(rows: ReturnType<ModelLoadSource["modelLoad"]>): ModelLoadSource & { rows: typeof rows } {
  const source = { rows, modelLoad: () => source.rows };
  return source;
}

describe("Metrics", () => {
  it("counts requests by model and status, tokens, and refusals", async () => {
    const metrics = new Metrics(fakeLoad([]));
    metrics.requestFinished("m1", 200);
    metrics.requestFinished("m1", 200);
    metrics.requestFinished("m1", 503);
    metrics.requestFinished("unknown", 404);
    metrics.tokens("m1", { promptTokens: 30, completionTokens: 12, cachedTokens: 20 });
    metrics.tokens("m1", { promptTokens: 5, completionTokens: 3, cachedTokens: 0, reasoningTokens: 1 });
    metrics.rejected("engine_overloaded");
    metrics.rejected("rate_limit_exceeded");
    metrics.rejected("rate_limit_exceeded");
    metrics.structuredOutputInvalid("m1");
    const { samples, types } = parse((await metrics.render()).body);
    expect(value(samples, "hearth_requests_total", { model: "m1", status: "200" })).toBe(2);
    expect(value(samples, "hearth_requests_total", { model: "m1", status: "503" })).toBe(1);
    expect(value(samples, "hearth_requests_total", { model: "unknown", status: "404" })).toBe(1);
    expect(value(samples, "hearth_prompt_tokens_total", { model: "m1" })).toBe(35);
    expect(value(samples, "hearth_completion_tokens_total", { model: "m1" })).toBe(15);
    expect(value(samples, "hearth_cached_prompt_tokens_total", { model: "m1" })).toBe(20);
    expect(value(samples, "hearth_overloaded_total")).toBe(1);
    expect(value(samples, "hearth_rate_limited_total")).toBe(2);
    expect(value(samples, "hearth_structured_output_invalid_total", { model: "m1" })).toBe(1);
    expect(types.get("hearth_requests_total")).toBe("counter");
  });

  it("observes latencies into histograms with CPU-scale buckets", async () => {
    const metrics = new Metrics(fakeLoad([]));
    for (const s of [0.08, 0.3, 1.5, 70]) metrics.timeToFirstToken("m1", s);
    for (const s of [0.004, 0.03, 0.03]) metrics.interTokenLatency("m1", s);
    const { samples, types } = parse((await metrics.render()).body);
    expect(types.get("hearth_time_to_first_token_seconds")).toBe("histogram");
    const ttft = (le: string) =>
      value(samples, "hearth_time_to_first_token_seconds_bucket", { model: "m1", le });
    expect(ttft("0.1")).toBe(1);
    expect(ttft("0.5")).toBe(2);
    expect(ttft("2")).toBe(3);
    expect(ttft("60")).toBe(3);
    expect(ttft("+Inf")).toBe(4);
    expect(value(samples, "hearth_time_to_first_token_seconds_count", { model: "m1" })).toBe(4);
    expect(value(samples, "hearth_time_to_first_token_seconds_sum", { model: "m1" })).toBeCloseTo(71.88);
    const itl = (le: string) =>
      value(samples, "hearth_inter_token_latency_seconds_bucket", { model: "m1", le });
    expect(itl("0.005")).toBe(1);
    expect(itl("0.035")).toBe(3);
    expect(value(samples, "hearth_inter_token_latency_seconds_count", { model: "m1" })).toBe(3);
  });

  it("reads queue depth and sequences from the engine at every scrape", async () => {
    const load = fakeLoad([
      { model: "m1", parallel: 4, busySequences: 3, queueDepth: 2 },
      { model: "m2", parallel: 1, busySequences: 0, queueDepth: 0 },
    ]);
    const metrics = new Metrics(load);
    let { samples, types } = parse((await metrics.render()).body);
    expect(types.get("hearth_queue_depth")).toBe("gauge");
    expect(value(samples, "hearth_queue_depth", { model: "m1" })).toBe(2);
    expect(value(samples, "hearth_busy_sequences", { model: "m1" })).toBe(3);
    expect(value(samples, "hearth_sequences", { model: "m1" })).toBe(4);
    expect(value(samples, "hearth_sequences", { model: "m2" })).toBe(1);
    load.rows = [{ model: "m1", parallel: 4, busySequences: 0, queueDepth: 0 }];
    ({ samples } = parse((await metrics.render()).body));
    expect(value(samples, "hearth_queue_depth", { model: "m1" })).toBe(0);
    expect(value(samples, "hearth_busy_sequences", { model: "m1" })).toBe(0);
    // A model that is gone is not reported with its last value.
    expect(value(samples, "hearth_sequences", { model: "m2" })).toBeUndefined();
  });

  it("reads the engine's backend, its GPU layers and the GPU's memory at every scrape", async () => {
    let state: AcceleratorState | undefined;
    const load = {
      modelLoad: () => [],
      health: () => [
        { model: "m1", ready: true, gpuLayers: state?.gpu === false ? 0 : 30 },
        { model: "m2", ready: false, detail: "loading" },
        { model: "fleet", ready: true, endpoints: [] },
      ],
      accelerator: async () => state,
    };
    const metrics = new Metrics(load);
    // Before the engine has started: no backend to report.
    let { samples } = parse((await metrics.render()).body);
    expect(samples.filter((s) => s.name === "hearth_engine_gpu_info")).toEqual([]);

    state = { gpu: false, build: { build: "tuned", key: "0123456789abcdef" } };
    ({ samples } = parse((await metrics.render()).body));
    expect(samples.filter((s) => s.name === "hearth_engine_gpu_info")).toEqual([
      { name: "hearth_engine_gpu_info", labels: { gpu: "false" }, value: 1 },
    ]);
    expect(samples.filter((s) => s.name === "hearth_engine_build_info")).toEqual([
      { name: "hearth_engine_build_info", labels: { build: "tuned" }, value: 1 },
    ]);
    expect(samples.filter((s) => s.name === "hearth_gpu_vram_bytes")).toEqual([]);
    expect(samples.filter((s) => s.name === "hearth_model_gpu_layers")).toEqual([
      { name: "hearth_model_gpu_layers", labels: { model: "m1" }, value: 0 },
    ]);

    state = { gpu: "cuda", build: { build: "prebuilt" }, vram: { total: 8e9, used: 2e9, free: 6e9 } };
    ({ samples } = parse((await metrics.render()).body));
    expect(value(samples, "hearth_engine_gpu_info", { gpu: "cuda" })).toBe(1);
    expect(value(samples, "hearth_engine_gpu_info", { gpu: "false" })).toBeUndefined();
    expect(value(samples, "hearth_gpu_vram_bytes", { state: "used" })).toBe(2e9);
    expect(value(samples, "hearth_gpu_vram_bytes", { state: "total" })).toBe(8e9);
    expect(value(samples, "hearth_model_gpu_layers", { model: "m1" })).toBe(30);
  });

  it("reads each upstream endpoint's state at every scrape, labelled by model and endpoint index only", async () => {
    const endpoint = (url: string, healthy: boolean, inFlight: number, requests: number) => ({
      url,
      healthy,
      inFlight,
      requests,
      retries: requests > 5 ? 2 : 0,
      ejections: healthy ? 0 : 1,
      promptTokens: requests * 100,
      cachedTokens: requests * 60,
    });
    let endpoints = [endpoint("http://gpu-1/v1", true, 3, 10), endpoint("http://gpu-2/v1", false, 0, 4)];
    const metrics = new Metrics({
      modelLoad: () => [],
      health: () => [
        {
          model: "fleet",
          ready: true,
          endpoints,
          repins: { cache_lost: 2, endpoint_down: 1, endpoint_busy: 0 },
        },
        { model: "local", ready: true },
      ],
    });
    metrics.upstreamTimeToFirstToken("fleet", 1, 0.2);
    let { samples, types } = parse((await metrics.render()).body);
    expect(types.get("hearth_upstream_in_flight")).toBe("gauge");
    expect(types.get("hearth_upstream_requests_total")).toBe("counter");
    expect(value(samples, "hearth_upstream_in_flight", { model: "fleet", endpoint: "0" })).toBe(3);
    expect(value(samples, "hearth_upstream_healthy", { model: "fleet", endpoint: "0" })).toBe(1);
    expect(value(samples, "hearth_upstream_healthy", { model: "fleet", endpoint: "1" })).toBe(0);
    expect(value(samples, "hearth_upstream_requests_total", { model: "fleet", endpoint: "0" })).toBe(10);
    expect(value(samples, "hearth_upstream_retries_total", { model: "fleet", endpoint: "0" })).toBe(2);
    expect(value(samples, "hearth_upstream_ejections_total", { model: "fleet", endpoint: "1" })).toBe(1);
    expect(value(samples, "hearth_upstream_prompt_tokens_total", { model: "fleet", endpoint: "0" })).toBe(
      1000,
    );
    expect(
      value(samples, "hearth_upstream_cached_prompt_tokens_total", { model: "fleet", endpoint: "1" }),
    ).toBe(240);
    expect(types.get("hearth_upstream_repins_total")).toBe("counter");
    expect(value(samples, "hearth_upstream_repins_total", { model: "fleet", reason: "cache_lost" })).toBe(2);
    expect(value(samples, "hearth_upstream_repins_total", { model: "fleet", reason: "endpoint_down" })).toBe(
      1,
    );
    expect(value(samples, "hearth_upstream_repins_total", { model: "fleet", reason: "endpoint_busy" })).toBe(
      0,
    );
    expect(
      value(samples, "hearth_upstream_repins_total", { model: "local", reason: "cache_lost" }),
    ).toBeUndefined();
    expect(
      value(samples, "hearth_upstream_first_token_seconds_count", { model: "fleet", endpoint: "1" }),
    ).toBe(1);
    // Never a URL in a label.
    expect(samples.some((s) => Object.values(s.labels).some((v) => v.includes("gpu-")))).toBe(false);
    endpoints = [endpoint("http://gpu-1/v1", true, 0, 12), endpoint("http://gpu-2/v1", true, 1, 5)];
    ({ samples } = parse((await metrics.render()).body));
    expect(value(samples, "hearth_upstream_in_flight", { model: "fleet", endpoint: "0" })).toBe(0);
    expect(value(samples, "hearth_upstream_requests_total", { model: "fleet", endpoint: "0" })).toBe(12);
    expect(value(samples, "hearth_upstream_healthy", { model: "fleet", endpoint: "1" })).toBe(1);
  });

  it("keeps instances apart, includes process metrics and the Prometheus content type", async () => {
    const a = new Metrics(fakeLoad([]));
    const b = new Metrics(fakeLoad([]));
    a.requestFinished("m1", 200);
    const rendered = await b.render();
    expect(rendered.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const { samples } = parse(rendered.body);
    expect(value(samples, "hearth_requests_total", { model: "m1" })).toBeUndefined();
    expect(value(samples, "process_cpu_user_seconds_total")).toBeGreaterThanOrEqual(0);
    expect(value(samples, "nodejs_heap_size_used_bytes")).toBeGreaterThan(0);
  });

  it("bounds the model label even if a caller passes arbitrary names", async () => {
    const metrics = new Metrics(fakeLoad([]));
    for (let i = 0; i < 100; i++) metrics.requestFinished(`model-${i}`, 404);
    const { samples } = parse((await metrics.render()).body);
    const models = new Set(
      samples.filter((s) => s.name === "hearth_requests_total").map((s) => s.labels.model),
    );
    expect(models.size).toBe(65);
    expect(value(samples, "hearth_requests_total", { model: "other" })).toBe(36);
  });
});
