// Reads hearth.yaml and the environment into a validated HearthConfig; the only reader of process.env.
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { parseModelSource } from "../catalogue/source.js";
import {
  defaultModels,
  type EngineFileSettings,
  engineSettingsSchema,
  fileConfigSchema,
  type HearthConfig,
  type ModelConfig,
  type ModelEntry,
  modelConfigSchema,
  serverConfigSchema,
  type UpstreamModelConfig,
  type UpstreamModelFileConfig,
} from "./schema.js";

/** A config problem, worded for the operator. The CLI prints it without a stack trace. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

export interface LoadConfigOptions {
  /** Path of the YAML file; when absent, HEARTH_CONFIG, then ./hearth.yaml if it exists. */
  configPath?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** Command-line overrides. */
  overrides?: {
    host?: string;
    port?: number;
    parallel?: number;
    maxQueue?: number;
    queueTimeoutMs?: number;
  };
}

export function formatZodIssues(error: z.ZodError, where: string): string {
  const lines = error.issues.map((issue) => {
    const path = issue.path.length > 0 ? issue.path.join(".") : "(top level)";
    return `  - ${path}: ${issue.message}`;
  });
  return `${where} is not valid:\n${lines.join("\n")}`;
}

function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(`Cannot read config file ${path}: ${(err as Error).message}`);
  }
  try {
    return parseYaml(text) ?? {};
  } catch (err) {
    throw new ConfigError(`Config file ${path} is not valid YAML: ${(err as Error).message}`);
  }
}

function envInt(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  return value;
}

/** A comma-separated list ("10.0.0.1, 10.1.0.0/16"); undefined when the variable is unset or empty. */
function envList(env: NodeJS.ProcessEnv, name: string): string[] | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return undefined;
  return raw
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

export function loadConfig(options: LoadConfigOptions = {}): HearthConfig {
  const env = options.env ?? process.env;
  const explicitPath = options.configPath ?? (env.HEARTH_CONFIG || undefined);
  const path = explicitPath ?? (existsSync("hearth.yaml") ? "hearth.yaml" : undefined);
  const raw = path === undefined ? {} : readConfigFile(path);
  const parsed = fileConfigSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(formatZodIssues(parsed.error, `Config file ${path}`));

  const overrides = options.overrides ?? {};
  const server = { ...parsed.data.server };
  const port = overrides.port ?? envInt(env, "HEARTH_PORT");
  if (port !== undefined) server.port = port;
  const host = overrides.host ?? env.HEARTH_HOST;
  if (host !== undefined) server.host = host;

  const trustedProxies = envList(env, "HEARTH_TRUSTED_PROXIES");
  if (trustedProxies !== undefined) {
    const checked = serverConfigSchema.shape.trustedProxies.safeParse(trustedProxies);
    if (!checked.success) throw new ConfigError(formatZodIssues(checked.error, "HEARTH_TRUSTED_PROXIES"));
    server.trustedProxies = checked.data;
  }

  const parallel = overrides.parallel ?? envInt(env, "HEARTH_PARALLEL");
  const maxQueue = overrides.maxQueue ?? envInt(env, "HEARTH_MAX_QUEUE");
  const queueTimeoutMs = overrides.queueTimeoutMs ?? envInt(env, "HEARTH_QUEUE_TIMEOUT_MS");
  const entries: ModelEntry[] =
    parsed.data.models ?? defaultModels.map((model) => ({ kind: "embedded", model }));
  const models: ModelConfig[] = [];
  const upstreamModels: UpstreamModelConfig[] = [];
  const modelIds: string[] = [];
  for (const entry of entries) {
    const id = entry.model.id;
    if (modelIds.includes(id))
      throw new ConfigError(`Config lists model "${id}" twice; model ids must be unique.`);
    modelIds.push(id);
    if (entry.kind === "embedded")
      models.push(embeddedModel(entry.model, { parallel, maxQueue, queueTimeoutMs }));
    else upstreamModels.push(upstreamModel(entry.model, env));
  }
  const keySecret = env.HEARTH_KEY_SECRET || undefined;
  if (keySecret !== undefined && !/^[0-9a-fA-F]{64}$/.test(keySecret)) {
    throw new ConfigError("HEARTH_KEY_SECRET must be 64 hex characters (32 bytes), like a key-secret file.");
  }

  return {
    server,
    models,
    upstreamModels,
    modelIds,
    dataDir: resolve(env.HEARTH_DATA_DIR || ".hearth"),
    databaseUrl: env.HEARTH_DATABASE_URL || undefined,
    store: parsed.data.store,
    responses: parsed.data.responses,
    memory: parsed.data.memory,
    redisUrl: env.HEARTH_REDIS_URL || undefined,
    modelsDir: resolve(env.HEARTH_MODELS_DIR || join(homedir(), ".cache", "hearth", "models")),
    adminToken: env.HEARTH_ADMIN_TOKEN || undefined,
    metricsToken: env.HEARTH_METRICS_TOKEN || parsed.data.metrics.token,
    keySecret,
    serverUrl: env.HEARTH_URL || `http://${server.host}:${server.port}`,
    logLevel: env.HEARTH_LOG_LEVEL || "info",
    gpu: parsed.data.gpu,
    engine: engineSettings(parsed.data.engine, env),
  };
}

/** The `engine:` block with HEARTH_ENGINE_BUILD, _BACKGROUND_BUILD, _DIRECT_STEPS and _BLOCKING_DECODE_MS over it. */
function engineSettings(file: EngineFileSettings, env: NodeJS.ProcessEnv): EngineFileSettings {
  const build = env.HEARTH_ENGINE_BUILD || undefined;
  const background = env.HEARTH_ENGINE_BACKGROUND_BUILD || undefined;
  const direct = env.HEARTH_ENGINE_DIRECT_STEPS || undefined;
  const blocking = env.HEARTH_ENGINE_BLOCKING_DECODE_MS || undefined;
  const flag = (value: string) => value !== "0" && value !== "false";
  const merged = {
    ...file,
    ...(build === undefined ? {} : { build }),
    ...(background === undefined ? {} : { backgroundBuild: flag(background) }),
    ...(direct === undefined ? {} : { directSteps: flag(direct) }),
    ...(blocking === undefined ? {} : { blockingDecodeMs: Number(blocking) }),
  };
  const checked = engineSettingsSchema.safeParse(merged);
  if (!checked.success) throw new ConfigError(formatZodIssues(checked.error, "HEARTH_ENGINE_BUILD"));
  return checked.data;
}

interface ModelOverrides {
  parallel: number | undefined;
  maxQueue: number | undefined;
  queueTimeoutMs: number | undefined;
}

function embeddedModel(model: ModelConfig, overrides: ModelOverrides): ModelConfig {
  const { parallel, maxQueue, queueTimeoutMs } = overrides;
  // Overrides go through the model schema too, so an out-of-range value is refused like one in the file.
  const merged = modelConfigSchema.safeParse({
    ...model,
    ...(parallel === undefined ? {} : { parallel }),
    ...(maxQueue === undefined ? {} : { maxQueue }),
    ...(queueTimeoutMs === undefined ? {} : { queueTimeoutMs }),
  });
  if (!merged.success) {
    throw new ConfigError(
      formatZodIssues(merged.error, `Model "${model.id}" with command-line and environment overrides`),
    );
  }
  try {
    parseModelSource(merged.data.source);
  } catch (err) {
    throw new ConfigError(`Model "${model.id}": ${(err as Error).message}`);
  }
  return merged.data;
}

/** An upstream model with its endpoints' keys read from the environment (the one place that reads it). */
function upstreamModel(model: UpstreamModelFileConfig, env: NodeJS.ProcessEnv): UpstreamModelConfig {
  const { id, upstream } = model;
  const endpoints = upstream.endpoints.map(({ url, apiKeyEnv }) => {
    if (apiKeyEnv === undefined) return { url, apiKey: undefined };
    const apiKey = env[apiKeyEnv];
    if (apiKey === undefined || apiKey === "") {
      throw new ConfigError(
        `Model "${id}": endpoint ${url} reads its key from ${apiKeyEnv}, which is not set.`,
      );
    }
    return { url, apiKey };
  });
  const config: UpstreamModelConfig = {
    id,
    upstream: { ...upstream, model: upstream.model ?? id, endpoints },
  };
  if (model.defaults !== undefined) config.defaults = model.defaults;
  return config;
}
