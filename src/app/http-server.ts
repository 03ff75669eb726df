// The Node HTTP server the app listens on: deliberate timeouts and a cap on connections (docs/operations.md).
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { ServerConfig } from "../config/schema.js";

export type ServerLimits = Pick<
  ServerConfig,
  "host" | "port" | "headersTimeoutMs" | "requestTimeoutMs" | "keepAliveTimeoutMs" | "maxConnections"
>;

/**
 * Listens with `fetch` as the handler and resolves once the port is bound. Node's defaults (5 minutes to send a
 * request, a minute for its headers, no bound on connections) let slow or idle clients hold sockets and memory:
 * here a client has `headersTimeoutMs` for its headers and `requestTimeoutMs` for the whole request, an idle
 * keep-alive connection closes after `keepAliveTimeoutMs`, and beyond `maxConnections` new connections are
 * closed at once. Responses have no socket timeout: a request may wait in the queue up to its model's
 * `queueTimeoutMs` with nothing to send, and a stream whose client stops reading is ended by the SSE drain
 * timeout (`server.sseDrainTimeoutMs`, src/api/sse.ts).
 */
export function listen(
  fetch: (request: Request, env: unknown) => Response | Promise<Response>,
  limits: ServerLimits,
): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = serve(
      {
        fetch,
        hostname: limits.host,
        port: limits.port,
        serverOptions: {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          // How often the header and request timeouts are checked (Node's default is every 30 s).
          connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
        },
      },
      (info: AddressInfo) => resolve({ server: server as Server, port: info.port }),
    ) as Server;
    // Also as properties: what the running server reads, whichever of the options this Node version takes.
    server.headersTimeout = limits.headersTimeoutMs;
    server.requestTimeout = limits.requestTimeoutMs;
    server.keepAliveTimeout = limits.keepAliveTimeoutMs;
    server.maxConnections = limits.maxConnections;
    server.timeout = 0;
  });
}
