// Composition root: loadConfig → buildServices (store, tenancy, limits, usage, completions) around the engine →
// createApp → serve; SIGTERM drains, then disposes.

import {
  firstKeyAnnouncement,
  firstOwnerAnnouncement,
  writeFirstStartCredentials,
} from "./app/first-start.js";
import { buildServices, type Services } from "./app/services.js";
import { ensureModelFile } from "./catalogue/fetch.js";
import { createProgressReporter, teeProgress } from "./catalogue/progress.js";
import { DEFAULT_SHUTDOWN_TIMEOUT_MS, type HearthConfig } from "./config/schema.js";
import { startBackgroundEngineBuild } from "./engine/llama/background-build.js";
import { planEngineBuild } from "./engine/llama/engine-build.js";
import { LlamaEngine } from "./engine/llama/llama-engine.js";
import { EngineRegistry } from "./engine/registry.js";
import type { Engine, EngineBuildState } from "./engine/types.js";
import { UpstreamEngine } from "./engine/upstream/upstream-engine.js";
import { createApp } from "./http/app.js";
import { listen } from "./http/server.js";
import { createLogger, type Logger } from "./observability/logger.js";
import type { Metrics } from "./observability/metrics.js";
import { DEFAULT_OWNER_EMAIL } from "./tenancy/bootstrap.js";

const DAY_MS = 24 * 60 * 60 * 1000;

export interface RunningServer {
  url: string;
  services: Services;
  engine: Engine;
  /** Resolves once every model is loaded (rejects if loading failed). */
  engineReady: Promise<void>;
  /**
   * Stops accepting, lets running requests finish, then releases the engine and the store. Bounded by
   * server.shutdownTimeoutMs: past it, resolves "timed-out" (logged) with the work left behind.
   */
  shutdown(): Promise<ShutdownOutcome>;
}

export type ShutdownOutcome = "clean" | "timed-out";

export interface StartOptions {
  logger?: Logger;
  /** Where the one-time bootstrap credentials are printed (stdout by default). */
  announce?: (text: string) => void;
}

export async function startServer(config: HearthConfig, options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const announce = options.announce ?? ((text: string) => process.stdout.write(`${text}\n`));

  // The embedded engine serves `source` models, those of the config and those added at run time (with none, nothing
  // is loaded or downloaded); the upstream engine serves `upstream` models from their endpoints. The registry routes
  // each model to its engine.
  const llama = new LlamaEngine({
    models: config.models,
    gpu: config.gpu,
    resolveModelPath: (model, progress) =>
      ensureModelFile(model, {
        modelsDir: config.modelsDir,
        progress: teeProgress(createProgressReporter(), progress),
      }),
    onModelLoaded: (model, path) => logger.info({ model: model.id, path }, "model loaded"),
    onModelEvent: (e) =>
      e.state === "failed"
        ? logger.error({ model: e.model, reason: e.reason }, "model failed to load")
        : logger.info({ model: e.model, state: e.state, reason: e.reason }, `model ${e.state}`),
    memory: config.memory,
    engine: config.engine,
    onEngineBuild: (state) => reportEngineBuild(state, config, logger),
  });
  // The metrics exist once the services do; the upstream engine reports first tokens to them from then on.
  let metrics: Metrics | undefined;
  const upstream =
    config.upstreamModels.length === 0
      ? undefined
      : new UpstreamEngine({
          models: config.upstreamModels,
          logger,
          onFirstToken: (e) => metrics?.upstreamTimeToFirstToken(e.model, e.endpoint, e.seconds),
          // Counted in /metrics (hearth_upstream_repins_total); the line says which endpoint, for an operator's trace.
          onRepin: (e) => logger.debug(e, "upstream conversation re-pinned"),
        });
  const engine = new EngineRegistry(
    [llama, upstream].filter((e) => e !== undefined),
    config.modelIds,
  );
  let draining = false;
  const graph = await buildServices(config, { engine, modelHost: llama, logger, draining: () => draining });
  const { services } = graph;
  metrics = services.metrics;
  // Every configured model, upstream ones included: the first org is granted all it may call.
  const modelIds = config.modelIds;
  const bootstrapDays = config.server.bootstrapKeyExpiresInDays;
  const firstKey = await services.tenancy.bootstrap(modelIds, {
    ownerEmail: DEFAULT_OWNER_EMAIL,
    keyLifetimeMs: bootstrapDays === 0 ? undefined : bootstrapDays * DAY_MS,
  });
  if (firstKey !== null) announce(firstKeyAnnouncement(firstKey));
  const app = createApp(services);

  const { server, port } = await listen(app.fetch, config.server, () => engine.expectRequest());
  const url = `http://${config.server.host}:${port}`;
  logger.info({ url }, "listening");
  if (firstKey !== null) {
    if (firstKey.owner !== null) announce(firstOwnerAnnouncement(firstKey.owner, url));
    try {
      const saved = writeFirstStartCredentials(config.dataDir, firstKey, url);
      announce(
        `These credentials were also written to ${saved} (mode 0600); delete it once they are stored.\n`,
      );
    } catch (err) {
      // The console still shows them; a read-only data dir must not stop the server that already listens.
      logger.error({ err }, "writing the first-start credentials file failed; copy them from above");
    }
  }

  const engineReady = Promise.all([llama.start(), upstream?.start()]).then(() => undefined);
  engineReady.then(
    async () => logger.info({ models: modelIds, gpu: (await llama.accelerator())?.gpu }, "models ready"),
    (err: unknown) => logger.error({ err }, "model loading failed"),
  );

  let closing: Promise<ShutdownOutcome> | undefined;
  const timeoutMs = config.server.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
  const shutdown = () => {
    if (closing !== undefined) return closing;
    const work = (async () => {
      logger.info("shutting down: draining running requests");
      // Still listening while running requests finish: new ones get a 503 they can retry elsewhere.
      draining = true;
      await engine.drain();
      await services.accounting.settled();
      // The generations have ended, but their responses may still be on their way to the clients (the SSE writer
      // sends only as fast as a client reads): close() waits for them. Keep-alive sockets become idle as their
      // responses end, and would hold close() for seconds: they are closed as soon as they are idle.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const idle = setInterval(() => server.closeIdleConnections(), 50);
      try {
        server.closeIdleConnections();
        await engine.dispose();
        await closed;
      } finally {
        clearInterval(idle);
      }
      await graph.dispose(); // usage records and key uses are written before the store closes
    })();
    // A stream that never ends or a store that hangs must not keep a stopping process alive: past the bound, the
    // caller exits anyway.
    closing = withDeadline(work, timeoutMs).then((finished) => {
      if (finished) return "clean";
      logger.error(
        { timeoutMs },
        `shutdown did not finish within ${timeoutMs} ms (server.shutdownTimeoutMs); exiting anyway`,
      );
      return "timed-out";
    });
    return closing;
  };
  return { url, services, engine, engineReady, shutdown };
}

/** True when `work` settles within `ms`; false when the time ran out first. A rejection is passed on. */
function withDeadline(work: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  return Promise.race([work.then(() => true), deadline]).finally(() => clearTimeout(timer));
}

/**
 * One log line on which llama.cpp build serves. When the tuned build is missing (a first start), it is started in
 * the background at low priority (engine.backgroundBuild) and serves from the next start.
 */
function reportEngineBuild(state: EngineBuildState, config: HearthConfig, logger: Logger): void {
  if (state.build === "tuned") {
    logger.info({ build: state.key }, "engine: the tuned llama.cpp build serves (compiled for this CPU)");
    return;
  }
  if (state.missing !== true || config.engine?.backgroundBuild === false) {
    logger.info({ reason: state.reason }, "engine: node-llama-cpp's prebuilt binaries serve");
    return;
  }
  startBackgroundEngineBuild(planEngineBuild()).then(
    (background) => {
      if ("failed" in background) {
        logger.warn(
          {
            build: state.key,
            log: background.log,
            failedAt: background.failed.at,
            reason: background.failed.message,
          },
          "engine: node-llama-cpp's prebuilt binaries serve; the last tuned build failed and is not tried again " +
            "at start (`hearth engine build` tries again)",
        );
        return;
      }
      logger.warn(
        background.started
          ? { build: state.key, log: background.log, pid: background.pid }
          : { build: state.key, pid: background.pid },
        "engine: node-llama-cpp's prebuilt binaries serve for now; the tuned build for this CPU is compiling in " +
          "the background at low priority and serves from the next start",
      );
    },
    (err: unknown) =>
      logger.warn(
        { err, reason: state.reason },
        "engine: the prebuilt binaries serve; the background build did not start",
      ),
  );
}
