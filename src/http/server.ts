// The Node HTTP server the app listens on: deliberate timeouts and a cap on connections (docs/operations.md).

import type { IncomingMessage, Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { serve } from "@hono/node-server";
import type { ServerConfig } from "../config/schema.js";
import { countArrivals } from "./arrivals.js";

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
 * timeout (`server.sseDrainTimeoutMs`, src/http/sse.ts). A connection closed after refusing a body it did not read
 * lingers first (see `lingerBeforeClosing`).
 */
export function listen(
  fetch: (request: Request, env: unknown) => Response | Promise<Response>,
  limits: ServerLimits,
  /** Counts a request on its way to the engine (`Engine.expectRequest`); absent: nothing is counted. */
  expectRequest?: () => () => void,
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
    lingerBeforeClosing(server, LINGER);
    if (expectRequest !== undefined) countArrivals(server, expectRequest);
  });
}

/** How long, and how many more bytes, a connection reads and throws away before it closes (see below). */
export const LINGER = { ms: 5_000, bytes: 64 * 1024 * 1024 };

/**
 * nginx's "lingering close". A response that ends its connection (a 413 says `Connection: close`: the rest of the
 * body is never read) makes Node close the socket as soon as the response is written. A client still sending its
 * body then writes into a closed socket: its kernel gets a reset, and the client sees EPIPE or ECONNRESET instead
 * of the 413 it was sent. So when the request on that socket is not complete, the socket sends its end of the
 * stream after the response and keeps reading, discarding what comes, until the body ends, the client closes, or
 * `linger.ms` or `linger.bytes` runs out; only then is it destroyed. Node closes a connection through
 * `socket.destroySoon()` (after a response with `Connection: close`, and the body-draining in @hono/node-server
 * does too), so that is the one method replaced, per socket; with the request complete it does what it did.
 */
export function lingerBeforeClosing(server: Server, linger: { ms: number; bytes: number }): void {
  const requests = new WeakMap<Socket, IncomingMessage>();
  server.on("request", (request: IncomingMessage) => requests.set(request.socket, request));
  server.on("connection", (socket: Socket) => {
    const destroySoon = socket.destroySoon.bind(socket);
    let lingering = false;
    socket.destroySoon = () => {
      if (lingering) return;
      const request = requests.get(socket);
      if (request === undefined || request.complete || socket.destroyed) return destroySoon();
      lingering = true;
      let read = 0;
      const close = () => {
        clearTimeout(timer);
        socket.destroy();
      };
      const timer = setTimeout(close, linger.ms);
      timer.unref();
      // The HTTP parser reads the socket first (its listener came first), so `complete` is current here.
      socket.on("data", (chunk: Buffer) => {
        read += chunk.length;
        if (request.complete || read > linger.bytes) close();
      });
      socket.once("end", close);
      socket.once("close", () => clearTimeout(timer));
      request.once("end", close);
      // The body may be paused by a reader that stopped (the refused JSON parse): discard it instead.
      request.resume();
      socket.end();
    };
  });
}
