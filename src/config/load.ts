// Reads hearth.yaml and the environment into a validated HearthConfig; the only reader of process.env.
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { parseModelSource } from "../models/source.js";
import {
  defaultModels,
  fileConfigSchema,
  type HearthConfig,
  type ModelConfig,
  modelConfigSchema,
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

  const parallel = overrides.parallel ?? envInt(env, "HEARTH_PARALLEL");
  const maxQueue = overrides.maxQueue ?? envInt(env, "HEARTH_MAX_QUEUE");
  const queueTimeoutMs = overrides.queueTimeoutMs ?? envInt(env, "HEARTH_QUEUE_TIMEOUT_MS");
  const models: ModelConfig[] = (parsed.data.models ?? defaultModels).map((m) => {
    // Overrides go through the model schema too, so an out-of-range value is refused like one in the file.
    const merged = modelConfigSchema.safeParse({
      ...m,
      ...(parallel === undefined ? {} : { parallel }),
      ...(maxQueue === undefined ? {} : { maxQueue }),
      ...(queueTimeoutMs === undefined ? {} : { queueTimeoutMs }),
    });
    if (!merged.success) {
      throw new ConfigError(
        formatZodIssues(merged.error, `Model "${m.id}" with command-line and environment overrides`),
      );
    }
    return merged.data;
  });
  const ids = new Set<string>();
  for (const m of models) {
    try {
      parseModelSource(m.source);
    } catch (err) {
      throw new ConfigError(`Model "${m.id}": ${(err as Error).message}`);
    }
    if (ids.has(m.id)) throw new ConfigError(`Config lists model "${m.id}" twice; model ids must be unique.`);
    ids.add(m.id);
  }

  const keySecret = env.HEARTH_KEY_SECRET || undefined;
  if (keySecret !== undefined && !/^[0-9a-fA-F]{64}$/.test(keySecret)) {
    throw new ConfigError("HEARTH_KEY_SECRET must be 64 hex characters (32 bytes), like a key-secret file.");
  }

  return {
    server,
    models,
    dataDir: resolve(env.HEARTH_DATA_DIR || ".hearth"),
    databaseUrl: env.HEARTH_DATABASE_URL || undefined,
    redisUrl: env.HEARTH_REDIS_URL || undefined,
    modelsDir: resolve(env.HEARTH_MODELS_DIR || join(homedir(), ".cache", "hearth", "models")),
    adminToken: env.HEARTH_ADMIN_TOKEN || undefined,
    keySecret,
    serverUrl: env.HEARTH_URL || `http://${server.host}:${server.port}`,
    logLevel: env.HEARTH_LOG_LEVEL || "info",
  };
}
