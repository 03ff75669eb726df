// Composition root: loadConfig → open store → tenancy → engine → createApp → serve; SIGTERM drains, then disposes.
import { mkdirSync } from "node:fs";
import { type ServerType, serve } from "@hono/node-server";
import { loadOrCreateAdminToken } from "./admin/admin-token.js";
import { createApp } from "./app/create-app.js";
import { createServices, disposeServices, type Services } from "./app/services.js";
import { loadOrCreateKeySecret } from "./auth/key-secret.js";
import type { HearthConfig } from "./config/schema.js";
import { LlamaEngine } from "./engine/llama/llama-engine.js";
import { ensureModelFile } from "./models/fetch.js";
import { createProgressReporter } from "./models/progress.js";
import { createLogger, type Logger } from "./observability/logger.js";
import { openStore } from "./store/open-store.js";
import { DEFAULT_OWNER_EMAIL, TenancyService } from "./tenancy/tenancy-service.js";

export interface RunningServer {
  url: string;
  services: Services;
  engine: LlamaEngine;
  /** Resolves once every model is loaded (rejects if loading failed). */
  engineReady: Promise<void>;
  /** Stops accepting, lets running requests finish, then releases the engine and the store. */
  shutdown(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** Where the one-time bootstrap credentials are printed (stdout by default). */
  announce?: (text: string) => void;
}

export async function startServer(config: HearthConfig, options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const announce = options.announce ?? ((text: string) => process.stdout.write(`${text}\n`));
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });

  const store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  const modelIds = config.models.map((m) => m.id);
  const tenancy = new TenancyService(store.db, {
    keySecret: loadOrCreateKeySecret(config),
    modelIds,
    onBackgroundError: (err) => logger.warn({ err }, "writing API key last-used times failed; will retry"),
  });
  const adminToken = loadOrCreateAdminToken(config);
  const firstKey = await tenancy.bootstrap(modelIds, { ownerEmail: DEFAULT_OWNER_EMAIL });
  if (firstKey !== null) {
    announce(
      [
        "",
        `Hearth created organization "${firstKey.orgName}" with every configured model.`,
        "Its first API key is shown once, now; store it somewhere safe:",
        "",
        `  ${firstKey.key}`,
        "",
      ].join("\n"),
    );
  }

  const engine = new LlamaEngine({
    models: config.models,
    resolveModelPath: (model) =>
      ensureModelFile(model, { modelsDir: config.modelsDir, progress: createProgressReporter() }),
    onModelLoaded: (model, path) => logger.info({ model: model.id, path }, "model loaded"),
  });
  let draining = false;
  const services = createServices({
    config,
    engine,
    tenancy,
    db: store.db,
    adminToken,
    logger,
    draining: () => draining,
  });
  const app = createApp(services);

  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: config.server.host, port: config.server.port }, () =>
      resolve(s),
    );
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.server.port;
  const url = `http://${config.server.host}:${port}`;
  logger.info({ url }, "listening");
  if (firstKey?.owner) {
    announce(
      [
        `Sign in to the dashboard at ${url}/dashboard as its first owner (shown once, now):`,
        `  Email:    ${firstKey.owner.email}`,
        `  Password: ${firstKey.owner.password}`,
        "",
      ].join("\n"),
    );
  }

  const engineReady = engine.start();
  engineReady.then(
    () => logger.info({ models: modelIds }, "models ready"),
    (err: unknown) => logger.error({ err }, "model loading failed"),
  );

  let closing: Promise<void> | undefined;
  const shutdown = () => {
    closing ??= (async () => {
      logger.info("shutting down: draining running requests");
      // Still listening while running requests finish: new ones get a 503 they can retry elsewhere.
      draining = true;
      await engine.drain();
      await services.accounting.settled();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Running responses have ended; idle keep-alive sockets would otherwise hold close() for seconds.
      (server as import("node:http").Server).closeAllConnections();
      await engine.dispose();
      await closed;
      await disposeServices(services);
      await tenancy.dispose(); // writes the coalesced last_used_at times before the store closes
      await store.close();
    })();
    return closing;
  };
  return { url, services, engine, engineReady, shutdown };
}
